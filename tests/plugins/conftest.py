"""Fixtures of the plugins tests: the real servers of tests/conftest.py (PostgreSQL, the Pub/Sub
emulator, Typesense) and the local gov.br site of tests/integration/conftest.py, plus a fresh
Pub/Sub project with the pipeline's topology, a minimal Airflow task context and a recording
backend for Airflow's stats."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
from airflow.sdk._shared.observability.metrics import stats as stats_module

from dgb import topology
from tests.integration.conftest import mirror  # noqa: F401 - the local gov.br site, reused


@pytest.fixture
def project(pubsub_server, monkeypatch):
    """A new emulator project with the topology applied; the GCP connection points at it."""
    import json

    name = f"dgb-plug-{uuid.uuid4().hex[:8]}"
    topology.apply(name)
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT",
        json.dumps({"conn_type": "google_cloud_platform", "extra": {"is_anonymous": True, "project": name}}),
    )
    return name


def pull_all(project: str, subscription: str, want: int, timeout: float = 5.0) -> list:
    """Pull and ack up to ``want`` messages (ReceivedMessage objects) with the plain client; stops at
    the first empty answer. Blocking: from a coroutine, run it in a thread."""
    from google.api_core import exceptions
    from google.cloud import pubsub_v1

    sub = pubsub_v1.SubscriberClient()
    path = f"projects/{project}/subscriptions/{subscription}"
    out: list = []
    for _ in range(10):
        try:
            resp = sub.pull(request={"subscription": path, "max_messages": 100}, timeout=timeout)
        except exceptions.DeadlineExceeded:
            break
        if not resp.received_messages:
            break
        sub.acknowledge(request={"subscription": path, "ack_ids": [m.ack_id for m in resp.received_messages]})
        out.extend(resp.received_messages)
        if len(out) >= want:
            break
    return out


def task_context(
    conf: dict | None = None,
    params: dict | None = None,
    run_id: str = "manual__test",
    try_number: int = 1,
    triggering_asset_events: dict | None = None,
) -> dict:
    """The part of an Airflow task context the operators read."""
    return {
        "params": params or {},
        "dag_run": SimpleNamespace(conf=conf or {}),
        "run_id": run_id,
        "ti": SimpleNamespace(try_number=try_number),
        "triggering_asset_events": triggering_asset_events or {},
    }


class StatsRecorder:
    """A stats backend (Airflow's StatsLogger protocol) that keeps what it was sent."""

    def __init__(self, sink: list, fail: bool = False):
        self.sink, self.fail = sink, fail

    def incr(self, stat, count=1, rate=1, *, tags=None):
        if self.fail:
            raise OSError("statsd unreachable")
        self.sink.append(("incr", stat, count, tags))

    def gauge(self, stat, value, rate=1, delta=False, *, tags=None):
        if self.fail:
            raise OSError("statsd unreachable")
        self.sink.append(("gauge", stat, value, tags))


def install_stats_backend(backend) -> tuple:
    saved = (stats_module._factory, stats_module._backend, stats_module._export_legacy_names)
    stats_module.initialize(factory=lambda: backend, export_legacy_names=False)
    return saved


def restore_stats_backend(saved: tuple) -> None:
    stats_module._factory, stats_module._backend, stats_module._export_legacy_names = saved


@pytest.fixture
def recorded_metrics():
    """What the operators send to Airflow's stats, as (kind, name, value, tags) tuples."""
    sink: list = []
    saved = install_stats_backend(StatsRecorder(sink))
    yield sink
    restore_stats_backend(saved)
