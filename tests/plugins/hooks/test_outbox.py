"""OutboxRelayHook (dgb_airflow.hooks.outbox): outbox rows reach the real emulator through the GCP
connection; a relay failure after a commit is logged, never raised."""

from __future__ import annotations

import json
import logging

import pytest

from dgb import db, events, outbox, topology
from dgb.cli import main
from dgb.config import messaging
from dgb.observe.status import pipeline_status
from dgb_airflow.hooks.outbox import OutboxRelayHook, relay_outbox
from tests.support.pubsub import pull_all


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


def test_the_relay_publishes_the_minor_version_the_producer_stamped(pg, project, monkeypatch):
    """An upgrade's producers stamp the next minor (``DGB_EVENT_MINOR_VERSION``): the outbox keeps
    it and the relay publishes it as it is; the consumer's check takes it."""
    monkeypatch.setenv("DGB_EVENT_MINOR_VERSION", "1")
    ids = _enqueue(pg, 2)
    with pg.cursor() as cur:
        cur.execute("SELECT DISTINCT attributes->>'event_version' FROM outbox")
        assert cur.fetchall() == [("1.1",)]
    assert OutboxRelayHook().relay(pg).published == 2
    got = pull_all(project, topology.SUB_ENRICHMENT, 2)
    assert sorted(m.message.attributes["unique_id"] for m in got) == ids
    assert {m.message.attributes["event_version"] for m in got} == {"1.1"}
    for m in got:
        events.parse_message(topology.TOPIC_SCRAPED, m.message.data, dict(m.message.attributes))


def test_relay_soon_logs_a_failure_and_keeps_the_rows(pg, project, caplog):
    _enqueue(pg, 1)
    with caplog.at_level(logging.WARNING):
        OutboxRelayHook("no-such-connection").relay_soon(pg, logging.getLogger("test"))
    assert "relay after commit failed" in caplog.text
    assert outbox.pending_count(pg) == 1  # still there for the outbox_relay DAG
    with caplog.at_level(logging.INFO):
        OutboxRelayHook("google_cloud_default").relay_soon(pg, logging.getLogger("test"))
    assert outbox.pending_count(pg) == 0 and "published=1" in caplog.text


# ------------------------------------------------------------------ states: failed, purge, claim


def _rows(pg) -> dict[str, tuple]:
    with pg.cursor() as cur:
        cur.execute("SELECT aggregate_id, published_at, failed_at, last_error, attempts FROM outbox")
        rows = {r[0]: r[1:] for r in cur.fetchall()}
    pg.commit()
    return rows


def _enqueue_raw(pg, topic: str, uid: str, payload: dict, attributes: dict) -> None:
    with db.transaction(pg) as cur:
        outbox.enqueue_raw(cur, topic, uid, payload, attributes)


def test_refused_publishes_end_in_the_failed_state_and_never_fail_the_relay_again(pg, project, capsys):
    """Too large, invalid attributes (at once) and a missing topic (after NOT_FOUND_ATTEMPTS) are
    terminal: the row keeps the error, leaves the pending count, and later relays skip it."""
    ok = _enqueue(pg, 1)[0]
    _enqueue_raw(pg, topology.TOPIC_SCRAPED, "big", {"unique_id": "big", "x": "y" * 10_000_001}, {})
    _enqueue_raw(pg, topology.TOPIC_SCRAPED, "bad-attr", {"unique_id": "bad-attr"}, {"k": "v" * 2000})
    _enqueue_raw(pg, "no-such-topic", "lost-topic", {"unique_id": "lost-topic"}, {})
    result = OutboxRelayHook().relay(pg)
    assert (result.published, result.terminal, result.failed) == (1, 2, 1)
    rows = _rows(pg)
    assert rows[ok][0] is not None and rows[ok][1] is None
    assert rows["big"][1] is not None and rows["big"][2].startswith("message_too_large")
    assert rows["bad-attr"][1] is not None and rows["bad-attr"][2].startswith("invalid_attributes")
    assert rows["lost-topic"][1] is None and "NotFound" in rows["lost-topic"][2]  # retried for now
    assert outbox.pending_count(pg) == 1 and outbox.failed_count(pg) == 2
    for _ in range(outbox.NOT_FOUND_ATTEMPTS - 1):  # the backoff skipped: each attempt at once
        with db.transaction(pg) as cur:
            cur.execute("UPDATE outbox SET available_at = now() WHERE failed_at IS NULL")
        result = OutboxRelayHook().relay(pg)
    assert (result.published, result.failed, result.terminal) == (0, 0, 1)
    published, failed, error, attempts = _rows(pg)["lost-topic"]
    assert failed is not None and "NotFound" in error and attempts == outbox.NOT_FOUND_ATTEMPTS
    assert outbox.pending_count(pg) == 0 and outbox.failed_count(pg) == 3
    again = OutboxRelayHook().relay(pg)
    assert (again.published, again.failed, again.terminal) == (0, 0, 0)  # terminal: never retried
    status = pipeline_status(pg)
    assert status["outbox_pending"] == 0 and status["outbox_failed"] == 3
    assert status["backlog"]["outbox"]["pending"] == 0
    assert main(["status"]) == 0
    assert "OUTBOX FAILED 3 event(s) refused by Pub/Sub for good" in capsys.readouterr().out


def test_relay_operator_fails_only_on_retryable_errors_and_purges(pg, project):
    """The outbox_relay DAG's task: a terminal row is logged, not raised (the DAG no longer fails
    every minute); published rows past the retention are purged, recent ones and failed ones kept."""
    from dgb_airflow.operators.outbox import OutboxRelayOperator
    from tests.support.airflow_context import task_context

    _enqueue(pg, 2)
    _enqueue_raw(pg, topology.TOPIC_SCRAPED, "bad-attr", {"unique_id": "bad-attr"}, {"k": "v" * 2000})
    with db.transaction(pg) as cur:  # an old published row, past the 7-day retention
        cur.execute(
            "INSERT INTO outbox (topic, aggregate_id, payload, published_at, message_id)"
            " VALUES (%s, 'old', '{}', now() - interval '8 days', 'm1')",
            (topology.TOPIC_SCRAPED,),
        )
    out = OutboxRelayOperator(task_id="relay_outbox").execute(task_context())
    assert out == {"published": 2, "pending": 0, "failed": 1, "purged": 1}
    assert sorted(_rows(pg)) == ["art_0", "art_1", "bad-attr"]
    _enqueue_raw(pg, "no-such-topic", "lost-topic", {"unique_id": "lost-topic"}, {})
    with pytest.raises(RuntimeError, match="failed=1"):  # retryable (for now): the task retries
        OutboxRelayOperator(task_id="relay_outbox").execute(task_context())


def test_purge_keeps_pending_failed_and_recent_rows(pg, monkeypatch):
    with db.transaction(pg) as cur:
        for uid, published, failed in (
            ("old-published", "now() - interval '3 days'", "NULL"),
            ("new-published", "now() - interval '1 hour'", "NULL"),
            ("old-failed", "NULL", "now() - interval '30 days'"),
            ("old-pending", "NULL", "NULL"),
        ):
            cur.execute(
                "INSERT INTO outbox (topic, aggregate_id, payload, created_at, published_at, failed_at)"
                f" VALUES ('t', %s, '{{}}', now() - interval '30 days', {published}, {failed})",
                (uid,),
            )
    monkeypatch.setenv(messaging.OUTBOX_RETENTION_ENV, "0")
    assert outbox.purge_published(pg) == 0  # 0 keeps everything
    monkeypatch.setenv(messaging.OUTBOX_RETENTION_ENV, "2")
    assert outbox.purge_published(pg, batch_size=1) == 1
    assert sorted(_rows(pg)) == ["new-published", "old-failed", "old-pending"]
    monkeypatch.setenv(messaging.OUTBOX_RETENTION_ENV, "soon")
    with pytest.raises(ValueError, match=messaging.OUTBOX_RETENTION_ENV):
        messaging.outbox_retention_days()


def test_the_relay_holds_no_lock_while_it_waits_on_pubsub(pg, project):
    """Claim, commit, publish, mark: while the publish is in flight the claimed rows are neither
    locked nor inside an open transaction (another connection updates them at once), and no other
    relay takes them (their next attempt lies past the publish deadline)."""
    from google.cloud import pubsub_v1

    from dgb.config import settings

    _enqueue(pg, 2)
    other = db.connect(settings().pg_dsn())
    seen: dict = {}

    class WatchingPublisher:
        """The real publisher; before each publish, another session looks at the rows."""

        def __init__(self):
            self.inner = pubsub_v1.PublisherClient()

        def publish(self, topic, data, **kwargs):
            with other.cursor() as cur:
                cur.execute("SET lock_timeout = '2s'")
                cur.execute("UPDATE outbox SET last_error = 'touched' WHERE published_at IS NULL")
                seen["updated"] = cur.rowcount
                cur.execute(
                    "SELECT count(*) FROM outbox WHERE published_at IS NULL AND available_at <= now()"
                )
                seen["due"] = cur.fetchone()[0]
                cur.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND state LIKE 'idle in%%'",
                    (pg.info.backend_pid,),
                )
                seen["relay_in_transaction"] = cur.fetchone()[0]
            other.commit()
            return self.inner.publish(topic, data, **kwargs)

    try:
        result = outbox.relay(pg, WatchingPublisher(), project, timeout=5.0)
    finally:
        other.close()
    assert result.published == 2
    assert seen == {"updated": 2, "due": 0, "relay_in_transaction": 0}
    assert {r[2] for r in _rows(pg).values()} == {None}  # marked published, error cleared


def test_the_publisher_is_the_connections_project_with_or_without_the_provider(pg, project, monkeypatch):
    """Against the emulator the relay skips the Google provider (a plain anonymous client); a
    connection without a project goes through DgbPubSubHook (which finds none either)."""
    from dgb_airflow.hooks.pubsub import DgbPubSubHook

    hook = OutboxRelayHook()
    _client, got = hook.publisher()
    assert got == project == DgbPubSubHook().project_id
    _enqueue(pg, 1)
    assert hook.relay(pg).published == 1
    got = pull_all(project, topology.SUB_ENRICHMENT, 1)
    assert [m.message.attributes["unique_id"] for m in got] == ["art_0"]
    # made once per hook: every later relay of this hook (one per committed chunk) reuses it
    client_again, _ = hook.publisher()
    assert client_again is _client
    _enqueue_raw(pg, topology.TOPIC_SCRAPED, "art_1", {"unique_id": "art_1"}, {})
    assert hook.relay(pg).published == 1
    again = pull_all(project, topology.SUB_ENRICHMENT, 1)
    assert [json.loads(m.message.data)["unique_id"] for m in again] == ["art_1"]
    no_project = '{"conn_type": "google_cloud_platform", "extra": {"is_anonymous": true}}'
    monkeypatch.setenv("AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", no_project)
    assert OutboxRelayHook().publisher()[1] is None
