"""OutboxRelayHook (dgb_airflow.hooks.outbox): outbox rows reach the real emulator through the GCP
connection; a relay failure after a commit is logged, never raised."""

from __future__ import annotations

import logging

from dgb import db, events, outbox, topology
from dgb_airflow.hooks.outbox import OutboxRelayHook, relay_outbox, relay_soon

from ..conftest import pull_all


def _enqueue(pg, n: int) -> list[str]:
    ids = [f"art_{i}" for i in range(n)]
    with db.transaction(pg) as cur:
        for uid in ids:
            outbox.enqueue(
                cur,
                events.make_event(
                    topology.TOPIC_SCRAPED,
                    {
                        "unique_id": uid,
                        "agency_key": "mec",
                        "published_at": "2026-11-20T10:00:00+00:00",
                        "scraped_at": "2026-11-20T10:05:00+00:00",
                    },
                ),
            )
    return ids


def test_relay_publishes_the_pending_outbox_to_the_connections_project(pg, project):
    ids = _enqueue(pg, 3)
    result = OutboxRelayHook().relay(pg, batch_size=2)
    assert (result.published, result.failed) == (3, 0) and outbox.pending_count(pg) == 0
    got = pull_all(project, topology.SUB_ENRICHMENT, 3)
    assert sorted(m.message.attributes["unique_id"] for m in got) == ids
    assert relay_outbox(pg).published == 0  # nothing left


def test_relay_soon_logs_a_failure_and_keeps_the_rows(pg, project, caplog):
    _enqueue(pg, 1)
    with caplog.at_level(logging.WARNING):
        relay_soon(pg, "no-such-connection", logging.getLogger("test"))
    assert "relay after commit failed" in caplog.text
    assert outbox.pending_count(pg) == 1  # still there for the outbox_relay DAG
    with caplog.at_level(logging.INFO):
        relay_soon(pg, "google_cloud_default", logging.getLogger("test"))
    assert outbox.pending_count(pg) == 0 and "published=1" in caplog.text
