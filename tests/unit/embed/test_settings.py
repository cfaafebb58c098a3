"""The embedding model's settings, read in :mod:`dgb.config.embed`: defaults and validation."""

from __future__ import annotations

import os

import pytest

from dgb.config.embed import embedder_mode, model_threads, service_limits
from dgb.embed import get_embedder
from dgb.embed.service import Limits


def test_embedder_mode(monkeypatch):
    monkeypatch.delenv("DGB_EMBEDDER", raising=False)
    assert embedder_mode() == "auto"
    monkeypatch.setenv("DGB_EMBEDDER", "service")
    assert embedder_mode() == "service"
    monkeypatch.setenv("DGB_EMBEDDER", "gpu")
    with pytest.raises(ValueError, match="DGB_EMBEDDER must be auto, service or local"):
        get_embedder()


def test_model_threads(monkeypatch):
    monkeypatch.delenv("DGB_MODEL_THREADS", raising=False)
    assert model_threads() == max(1, os.cpu_count() or 1)
    monkeypatch.setenv("DGB_MODEL_THREADS", " 3 ")
    assert model_threads() == 3
    for bad in ("0", "-2", "1.5", "two"):
        monkeypatch.setenv("DGB_MODEL_THREADS", bad)
        with pytest.raises(ValueError, match="DGB_MODEL_THREADS"):
            model_threads()


def test_service_limits(monkeypatch):
    monkeypatch.delenv("DGB_MODEL_MAX_PENDING", raising=False)
    monkeypatch.delenv("DGB_MODEL_REQUEST_TIMEOUT", raising=False)
    assert service_limits() == {} and Limits.from_env() == Limits()
    monkeypatch.setenv("DGB_MODEL_MAX_PENDING", "4")
    monkeypatch.setenv("DGB_MODEL_REQUEST_TIMEOUT", "2.5")
    assert Limits.from_env() == Limits(max_pending=4, request_timeout=2.5)
    for name, bad in (("DGB_MODEL_MAX_PENDING", "0"), ("DGB_MODEL_REQUEST_TIMEOUT", "0")):
        monkeypatch.setenv(name, bad)
        with pytest.raises(ValueError, match=name):
            service_limits()
        monkeypatch.setenv(name, "4")


def test_model_service_credentials_settings(monkeypatch, tmp_path):
    from dgb.config import embed as embed_config

    for name in ("DGB_MODEL_AUTH", "DGB_MODEL_TOKEN", "DGB_MODEL_AUDIENCE", "DGB_MODEL_INVOKERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DGB_STATE_DIR", str(tmp_path))
    assert embed_config.model_auth() == "token" and embed_config.model_token() == ""
    (tmp_path / "secrets.env").write_text("DGB_MODEL_TOKEN=do-arquivo\n")
    assert embed_config.model_token() == "do-arquivo"  # what `make up` generated
    monkeypatch.setenv("DGB_MODEL_TOKEN", "do-ambiente")
    assert embed_config.model_token() == "do-ambiente"  # the environment wins
    monkeypatch.setenv("DGB_MODEL_AUTH", " Google_ID ")
    assert embed_config.model_auth() == "google_id"
    monkeypatch.setenv("DGB_MODEL_AUTH", "open")
    with pytest.raises(ValueError, match="DGB_MODEL_AUTH must be one of token, google_id, none"):
        embed_config.model_auth()
    monkeypatch.setenv("DGB_MODEL_INVOKERS", " Composer@p.iam.gserviceaccount.com, ,b@p.iam ")
    assert embed_config.model_invokers() == {"composer@p.iam.gserviceaccount.com", "b@p.iam"}
    monkeypatch.setenv("DGB_MODEL_AUDIENCE", "https://a.run.app/,https://b.run.app")
    assert embed_config.model_audience() == "https://a.run.app/,https://b.run.app"


def test_model_start_wait(monkeypatch):
    from dgb.config.embed import model_start_wait

    monkeypatch.delenv("DGB_MODEL_START_WAIT", raising=False)
    assert model_start_wait() == 60.0
    monkeypatch.setenv("DGB_MODEL_START_WAIT", "0")
    assert model_start_wait() == 0.0
    for bad in ("-1", "soon"):
        monkeypatch.setenv("DGB_MODEL_START_WAIT", bad)
        with pytest.raises(ValueError, match="DGB_MODEL_START_WAIT"):
            model_start_wait()
