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
