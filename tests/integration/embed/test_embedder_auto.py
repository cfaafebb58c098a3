"""DGB_EMBEDDER=auto meeting a model service that is still loading its model: the real service
app on loopback, its model load held until the test releases it (the bundled model then)."""

from __future__ import annotations

import logging
import threading

import pytest

from dgb.config import Settings
from dgb.embed import get_embedder
from dgb.embed import model as model_module
from dgb.embed.client import ServiceEmbedder
from dgb.embed.model import load_model
from dgb.embed.service import ModelState, make_app
from tests.support.model_service import serving

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def model():
    return load_model("use-multilingual-v3", 512)


@pytest.fixture
def loading_service(model, monkeypatch):
    """(url, release): the service app answering 503 "loading" until ``release.set()``; this
    process is pointed at it with DGB_EMBEDDER=auto and no credentials (DGB_MODEL_AUTH=none)."""
    release = threading.Event()

    class HeldBack(ModelState):
        def load(self) -> None:
            release.wait(60)
            self.embedder = model

    with serving(make_app(HeldBack(model.name, model.dim)), loaded=False) as url:
        monkeypatch.setenv("DGB_MODEL_URL", url)
        monkeypatch.setenv("DGB_EMBEDDER", "auto")
        monkeypatch.setenv("DGB_MODEL_AUTH", "none")
        try:
            yield url, release
        finally:
            release.set()


def _no_model_here(monkeypatch) -> list[str]:
    """Record (instead of doing) every in-process model load."""
    loads: list[str] = []

    def refuse(name, dim=None):
        loads.append(name)
        return "in-process model"

    monkeypatch.setattr(model_module, "load_model", refuse)
    return loads


def test_auto_waits_for_a_loading_service_instead_of_loading_the_model_here(loading_service, monkeypatch):
    url, release = loading_service
    loads = _no_model_here(monkeypatch)
    with ServiceEmbedder(url) as client:
        assert client.probe() == "loading" and not client.available()
    timer = threading.Timer(1.5, release.set)  # the model finishes loading 1.5 s from now
    timer.start()
    try:
        embedder = get_embedder(Settings.from_env())
    finally:
        timer.cancel()
    assert isinstance(embedder, ServiceEmbedder), embedder
    assert embedder.probe() == "ok" and embedder.dim == 512 and loads == []
    assert embedder.encode(["vacinação contra a gripe"]).shape == (1, 512)


def test_auto_loads_here_with_a_warning_when_the_service_stays_loading(loading_service, monkeypatch, caplog):
    url, _ = loading_service
    loads = _no_model_here(monkeypatch)
    monkeypatch.setenv("DGB_MODEL_START_WAIT", "1")
    with caplog.at_level(logging.WARNING, logger="dgb.embed"):
        embedder = get_embedder(Settings.from_env())
    assert embedder == "in-process model" and len(loads) == 1
    warned = [r.getMessage() for r in caplog.records if "still loading" in r.getMessage()]
    assert warned and url in warned[0] and "DGB_MODEL_START_WAIT" in warned[0]


def test_service_mode_never_waits_nor_loads_here(loading_service, monkeypatch):
    url, _ = loading_service
    loads = _no_model_here(monkeypatch)
    monkeypatch.setenv("DGB_EMBEDDER", "service")
    monkeypatch.setenv("DGB_MODEL_START_WAIT", "30")
    embedder = get_embedder(Settings.from_env())
    assert isinstance(embedder, ServiceEmbedder) and loads == []
    assert embedder.probe() == "loading"
