"""Fixtures of the integration tests that run the pipeline's stages in process (tests/integration/
pipeline, tests/integration/chaos): the bundled model and the local classifier, loaded once per
module (the model itself once per process: dgb.embed.model caches it), and a fresh Pub/Sub project
with the topology applied."""

from __future__ import annotations

import uuid

import pytest

from dgb import topology


@pytest.fixture(scope="module")
def embedder():
    from dgb.embed.model import load_model

    return load_model("use-multilingual-v3", 512)


@pytest.fixture(scope="module")
def classifier(embedder):
    from dgb.enrich.base import get_classifier

    return get_classifier(embedder=embedder, backend="local")


@pytest.fixture
def project(pubsub_server):
    name = f"dgb-pipe-{uuid.uuid4().hex[:8]}"
    topology.apply(name)
    return name
