"""Fixtures of the pipeline's end-to-end tests (test_pipeline.py and the stage mechanism's
test_stage_*.py): mec's articles scraped from the local gov.br site with their events relayed, and
a model service nobody answers. The model, the classifier and the Pub/Sub project:
tests/integration/conftest.py."""

from __future__ import annotations

import pytest

from dgb import db, outbox
from dgb.fetch import Fetcher
from dgb.scraper.run import scrape_agency
from tests.support.articles import ARTICLES, mirrored_agency
from tests.support.fetch import FAST
from tests.support.stage_faults import CountingEmbedder, closed_port


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


@pytest.fixture
def down_embedder(embedder):
    """The model service's client on a loopback port where nothing listens (a real outage), one
    attempt per call; ``dim`` answered locally (the stage checks the vectors' shape)."""
    from dgb.embed.client import ServiceEmbedder

    client = ServiceEmbedder(f"http://127.0.0.1:{closed_port()}", timeout=2, attempts=1)
    client._name, client._dim = embedder.name, embedder.dim
    yield CountingEmbedder(client)
    client.close()
