"""Faults for the shared stage mechanism's tests: a classifier that raises on chosen articles, an
embedder whose calls are counted, a Typesense client and a loopback port where nothing listens,
and a helper that enriches every pending article."""

from __future__ import annotations

import socket

from dgb.pipeline import stages
from dgb.pipeline.runner import RunOptions, run_stage


class Poisoning:
    """The real classifier, raising (as a parser bug would) whenever ``bad`` is in the batch."""

    def __init__(self, inner, bad: set[str]):
        self.inner, self.bad = inner, set(bad)
        self.name, self.version = inner.name, inner.version
        self.calls: list[list[str]] = []

    def classify_batch(self, items):
        ids = [i.unique_id for i in items]
        self.calls.append(ids)
        if self.bad & set(ids):
            raise ValueError(f"cannot parse the article body of {sorted(self.bad & set(ids))}")
        return self.inner.classify_batch(items)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


def unreachable_typesense(settings):
    """The product's Typesense client (dgb.search.schema.client) on a port nothing listens on,
    without the client's own pause between its retries (a refused connection fails at once)."""
    from dataclasses import replace

    from dgb.search import schema

    down = schema.client(replace(settings, typesense_port=closed_port()), timeout=1)
    down.config.retry_interval_seconds = 0.0
    return down


class CountingEmbedder:
    def __init__(self, inner):
        self.inner, self.calls = inner, 0

    @property
    def dim(self):
        return self.inner.dim

    def encode(self, texts, batch_size=32):
        self.calls += 1
        return self.inner.encode(texts, batch_size=batch_size)


def enrich_all(pg, classifier):
    report = run_stage(stages.EnrichStage(classifier, pg), pg, [], RunOptions(sweep_limit=100))
    assert report.retry == [] and report.dead_lettered == []
