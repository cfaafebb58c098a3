"""Fixtures of the oracle's tests against the real pipeline: a local gov.br site that journals its
whole corpus, a Typesense alias of the test's own, the pipeline run in process on them
(:class:`tests.support.local_pipeline.LocalPipeline`) and an event counter subscribed before the
run. The model, the classifier and the Pub/Sub project: tests/integration/conftest.py."""

from __future__ import annotations

import pytest

from dgb.taxonomy import load_taxonomy, themes_rows
from tests.support.articles import ARTICLES
from tests.support.local_pipeline import LocalPipeline


@pytest.fixture
def alias(scratch_index, embedder):
    """A collection and alias of the test's own (deleted after it), and its Typesense client."""
    _s, ts, name = scratch_index("t", embedder.dim)
    return ts, name


@pytest.fixture
def events(project):
    """The oracle's event counter, subscribed to the pipeline's topics before anything is published."""
    from dgb_dev.chaos.event_counter import EventCounter

    counter = EventCounter(project).open()
    yield counter
    counter.close()


@pytest.fixture
def pipeline(pg, mirror, project, classifier, embedder, alias, events):
    """mec's articles on a site that journals them, the pipeline ready to run on them."""
    from dgb import db

    db.upsert_themes(pg, themes_rows(load_taxonomy()))
    site, _server, base = mirror(ARTICLES, journal_base=True)
    ts, name = alias
    return LocalPipeline(pg, project, classifier, embedder, ts, name, site, base)
