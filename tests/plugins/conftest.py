"""Fixtures of the plugins tests (beside the real servers and the local gov.br site of
tests/conftest.py): a fresh Pub/Sub project with the pipeline's topology, and the metrics the
operators send to Airflow's stats."""

from __future__ import annotations

import uuid

import pytest

from dgb import topology
from tests.support.airflow_stats import StatsRecorder, install_stats_backend, restore_stats_backend


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


@pytest.fixture
def recorded_metrics():
    """What the operators send to Airflow's stats, as (kind, name, value, tags) tuples."""
    sink: list = []
    saved = install_stats_backend(StatsRecorder(sink))
    yield sink
    restore_stats_backend(saved)
