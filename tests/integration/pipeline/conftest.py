"""Fixtures of the pipeline's end-to-end tests (test_pipeline.py, test_stage_resilience.py): the
bundled model and the local classifier, a fresh Pub/Sub project with the topology applied, and mec's
articles scraped from the local gov.br site with their events relayed."""

from __future__ import annotations

import uuid

import pytest

from dgb import db, outbox, topology
from dgb.fetch import Fetcher
from dgb.scraper.run import scrape_agency
from tests.support.articles import ARTICLES, mirrored_agency
from tests.support.fetch import FAST


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


@pytest.fixture
def scraped(pg, mirror, project, pubsub_server):
    """mec's articles scraped from the local site, their events relayed to the emulator."""
    from google.cloud import pubsub_v1

    _site, _server, base = mirror(ARTICLES)
    with Fetcher(FAST) as f:
        report = scrape_agency(pg, mirrored_agency(base, "mec"), f)
    from dgb.taxonomy import load_taxonomy, themes_rows

    db.upsert_themes(pg, themes_rows(load_taxonomy()))
    assert outbox.relay(pg, pubsub_v1.PublisherClient(), project).published == len(
        [a for a in ARTICLES if a[0] == "mec"]
    )
    return report.new
