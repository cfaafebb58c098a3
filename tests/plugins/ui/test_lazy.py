"""LazyApp: the DGB pages' ASGI app is built on the first request, once, and a failed build is
tried again on the next request."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from dgb_airflow.ui.lazy import LazyApp


def _health_app() -> FastAPI:
    app = FastAPI()

    @app.get("/health")
    def health() -> dict:
        return {"ok": True}

    return app


def test_the_app_is_built_on_the_first_request_and_only_once():
    builds = []

    def factory():
        builds.append(1)
        return _health_app()

    lazy = LazyApp(factory)
    assert not lazy.built and builds == []
    client = TestClient(lazy)
    assert client.get("/health").json() == {"ok": True}
    assert client.get("/health").json() == {"ok": True}
    assert lazy.built and len(builds) == 1


def test_a_failed_build_is_tried_again_on_the_next_request():
    attempts = []

    def factory():
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("database not ready")
        return _health_app()

    client = TestClient(LazyApp(factory))
    with pytest.raises(RuntimeError, match="database not ready"):
        client.get("/health")
    assert client.get("/health").status_code == 200
    assert len(attempts) == 2


def test_mounted_under_a_prefix_like_the_api_server_does():
    outer = FastAPI()
    outer.mount("/dgb-integrity", LazyApp(_health_app))
    assert TestClient(outer).get("/dgb-integrity/health").json() == {"ok": True}
