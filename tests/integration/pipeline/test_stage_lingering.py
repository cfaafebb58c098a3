"""Stage runs that stay warm (dgb.pipeline.runner.keep_sweeping), on the real PostgreSQL: a run
that did work goes on sweeping until idle or its cap, never after an outage; a run that found
nothing, or whose events were already done, ends at once; a woken run waits for the work its
event announced."""

from __future__ import annotations

import threading
import time

import pytest

from dgb import db, outbox, topology
from dgb.pipeline import stages
from dgb.pipeline.resilience import MODEL_SERVICE
from dgb.pipeline.runner import RunOptions, keep_sweeping, run_stage
from dgb.pipeline.wakeup import CommitWaiter, input_topics
from tests.support.sql import count

pytestmark = pytest.mark.stack


def test_keep_sweeping_takes_work_that_arrives_and_ends_once_idle(pg, pg_server, scraped, classifier):
    """A run that lingers takes the work committed after its own (here: two articles whose
    theme an edit cleared), then ends once ``idle_s`` passes with nothing new."""
    first, later = scraped[:-2], scraped[-2:]
    enrich = stages.EnrichStage(classifier, pg)
    other = db.connect(pg_server.pg_dsn())
    with db.transaction(other) as cur:  # the last two are not pending yet when the run starts
        cur.execute("UPDATE news SET removed_at = now() WHERE unique_id = ANY(%s)", (later,))
    report = run_stage(enrich, pg, [], RunOptions(sweep_limit=100))
    assert sorted(report.processed) == sorted(first) and report.sweeps == 0
    naps: list[float] = []

    def nap(seconds: float) -> None:
        naps.append(seconds)
        time.sleep(seconds)
        if len(naps) == 2:  # they arrive while the run is lingering
            with db.transaction(other) as cur:
                cur.execute("UPDATE news SET removed_at = NULL WHERE unique_id = ANY(%s)", (later,))

    try:
        out = keep_sweeping(
            enrich, pg, report, RunOptions(sweep_limit=100), idle_s=0.3, max_s=30, poll_s=0.05, sleep=nap
        )
    finally:
        other.close()
    assert sorted(out.processed) == sorted(scraped) and out.retry == [] and out.dead_lettered == []
    assert count(pg, "SELECT count(*) FROM news WHERE enriched_at IS NULL") == 0
    # it went on after the arrival (idle again from then on) and stopped well before max_s
    assert 3 <= out.sweeps == len(naps) < 200 and out.summary()["sweeps"] == out.sweeps


def test_keep_sweeping_stops_at_its_cap_and_not_after_an_outage(pg, scraped, classifier):
    enrich = stages.EnrichStage(classifier, pg)
    busy = run_stage(enrich, pg, [], RunOptions(sweep_limit=100))
    flips = iter(scraped * 1000)

    def edit(seconds: float) -> None:  # one article made pending before every sweep: never idle
        with db.transaction(pg) as cur:
            cur.execute("UPDATE news SET enriched_at = NULL WHERE unique_id = %s", (next(flips),))

    t0 = time.monotonic()
    out = keep_sweeping(
        enrich, pg, busy, RunOptions(sweep_limit=100), idle_s=0.2, max_s=1.0, poll_s=0.0, sleep=edit
    )
    assert out.sweeps >= 2 and 1.0 <= time.monotonic() - t0 < 10

    from dgb.pipeline.report import StageReport

    sweeping = RunOptions(sweep_limit=100)
    for stopped, options, idle_s in (
        (StageReport("enrich", retry=[("x", "timeout")]), sweeping, 5),
        (StageReport("enrich", breakers_open=[MODEL_SERVICE]), sweeping, 5),
        (StageReport("enrich", deadline_hit=True), sweeping, 5),
        (StageReport("enrich"), RunOptions(sweep_limit=0), 5),  # nothing to sweep
        (StageReport("enrich"), sweeping, 0),  # lingering switched off
    ):
        assert keep_sweeping(enrich, pg, stopped, options, idle_s=idle_s, max_s=5, sleep=edit).sweeps == 0


def test_a_run_that_found_nothing_does_not_stay_warm(pg, scraped, classifier):
    """The 1-minute sweep of an idle pipeline ends at once: only a run that did work lingers."""
    enrich = stages.EnrichStage(classifier, pg)
    run_stage(enrich, pg, [], RunOptions(sweep_limit=100))  # everything done
    naps: list[float] = []
    idle = run_stage(enrich, pg, [], RunOptions(sweep_limit=100))
    assert idle.processed == []
    out = keep_sweeping(enrich, pg, idle, RunOptions(sweep_limit=100), idle_s=5, max_s=30, sleep=naps.append)
    assert out.sweeps == 0 and naps == []


def test_a_woken_run_waits_for_the_announced_work_from_the_event_on(pg, pg_server, scraped, classifier):
    """A run woken by an earlier stage's event (the embed and index DAGs on the scraped event) has
    nothing to do at first: it stays, takes the work once it becomes pending, and counts its idle
    time from the event; one that starts after ``idle_s`` (queued behind another run) ends at once."""
    enrich = stages.EnrichStage(classifier, pg)
    run_stage(enrich, pg, [], RunOptions(sweep_limit=100))  # everything done
    other = db.connect(pg_server.pg_dsn())
    naps: list[float] = []

    def nap(seconds: float) -> None:  # the previous stage commits while the woken run waits
        naps.append(seconds)
        time.sleep(seconds)
        if len(naps) == 3:
            with db.transaction(other) as cur:
                cur.execute("UPDATE news SET enriched_at = NULL WHERE unique_id = ANY(%s)", (scraped[:2],))

    try:
        idle = run_stage(enrich, pg, [], RunOptions(sweep_limit=100))
        assert idle.processed == []
        out = keep_sweeping(
            enrich,
            pg,
            idle,
            RunOptions(sweep_limit=100),
            idle_s=2,
            max_s=30,
            poll_s=0.05,
            woken_s_ago=0.1,
            sleep=nap,
        )
    finally:
        other.close()
    assert sorted(out.processed) == sorted(scraped[:2]) and len(naps) > 3

    # woken longer ago than idle_s: the event's work was someone else's by now
    late = run_stage(enrich, pg, [], RunOptions(sweep_limit=100))
    naps.clear()
    out = keep_sweeping(
        enrich, pg, late, RunOptions(sweep_limit=100), idle_s=2, max_s=30, woken_s_ago=2.5, sleep=naps.append
    )
    assert out.sweeps == 0 and naps == []
    # woken 1.5 s ago with idle_s 2: it polls for the half second left (at most 6 naps of 0.1 s),
    # not for 2 s from its own start (20)
    naps.clear()

    def real_nap(seconds: float) -> None:
        naps.append(seconds)
        time.sleep(seconds)

    out = keep_sweeping(
        enrich,
        pg,
        late,
        RunOptions(sweep_limit=100),
        idle_s=2,
        max_s=30,
        poll_s=0.1,
        woken_s_ago=1.5,
        sleep=real_nap,
    )
    assert out.processed == [] and 1 <= out.sweeps == len(naps) <= 6


def test_a_run_whose_events_were_already_done_does_not_stay_warm(pg, scraped, classifier):
    """Events queued behind a warm run find their articles done (skipped): such a run ends at once,
    or each would linger in turn long after the news stopped."""
    enrich = stages.EnrichStage(classifier, pg)
    run_stage(enrich, pg, [], RunOptions(sweep_limit=100))
    done = run_stage(enrich, pg, [], RunOptions(sweep_limit=100), unique_ids=scraped[:2])
    assert done.processed == [] and done.skipped
    naps: list[float] = []
    out = keep_sweeping(enrich, pg, done, RunOptions(sweep_limit=100), idle_s=5, max_s=30, sleep=naps.append)
    assert out.sweeps == 0 and naps == []


def _announce(dsn: str, uids: list[str], topic: str, *, commit: bool = True) -> None:
    """From another connection: make ``uids`` pending for the enrich stage and add the event that
    announces it to the outbox, in one transaction (committed or rolled back)."""
    conn = db.connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("UPDATE news SET enriched_at = NULL WHERE unique_id = ANY(%s)", (uids,))
            outbox.enqueue_raw(cur, topic, uids[0], {"unique_id": uids[0]}, {"unique_id": uids[0]})
        conn.commit() if commit else conn.rollback()
    finally:
        conn.close()


def test_a_waiter_wakes_on_the_commit_of_its_topics_only(pg, pg_server, scraped, classifier):
    """The outbox notifies each committed row's topic: a waiter on the stage's input topics returns
    on such a commit, and not on a rolled-back one or another topic's (it then waits its timeout)."""
    run_stage(stages.EnrichStage(classifier, pg), pg, [], RunOptions(sweep_limit=100))
    waiter = CommitWaiter(pg, input_topics((topology.SUB_ENRICHMENT,)))
    assert waiter.topics == {topology.TOPIC_SCRAPED}
    waiter(0.0)  # LISTEN from here on
    assert waiter.listening and waiter.woken == 0
    dsn = pg_server.pg_dsn()
    _announce(dsn, scraped[:1], topology.TOPIC_ENRICHED)  # another stage's input
    _announce(dsn, scraped[:1], topology.TOPIC_SCRAPED, commit=False)
    waiter(0.3)
    assert waiter.woken == 0
    later = threading.Timer(0.2, _announce, (dsn, scraped[:1], topology.TOPIC_SCRAPED))
    later.start()
    waiter(30.0)  # returns with the commit, not after 30 s
    later.join()
    assert waiter.woken == 1
    waiter.close()
    assert waiter.listening is None
    _announce(dsn, scraped[:1], topology.TOPIC_SCRAPED)  # not listening any more: nothing queued
    with pg.cursor() as cur:
        cur.execute("SELECT 1")
    pg.commit()
    assert list(pg.notifies(timeout=0.1)) == []


def test_a_warm_run_sweeps_when_the_commit_of_its_work_is_notified(
    pg, pg_server, scraped, classifier, monkeypatch
):
    """keep_sweeping waits between sweeps on a CommitWaiter of the stage's input topics (the
    default): the articles another stage commits are taken by the sweep the notification starts.
    The poll here is longer than the whole run, so only the notification can start a sweep early."""
    from dgb.pipeline import runner

    waiters: list[CommitWaiter] = []

    class Recorded(CommitWaiter):
        def __init__(self, *args):
            super().__init__(*args)
            waiters.append(self)

    monkeypatch.setattr(runner, "CommitWaiter", Recorded)
    enrich = stages.EnrichStage(classifier, pg)
    run_stage(enrich, pg, [], RunOptions(sweep_limit=100))  # everything done
    idle = run_stage(enrich, pg, [], RunOptions(sweep_limit=100))
    later = threading.Timer(0.5, _announce, (pg_server.pg_dsn(), scraped[:2], topology.TOPIC_SCRAPED))
    later.start()
    out = keep_sweeping(
        enrich, pg, idle, RunOptions(sweep_limit=100), idle_s=3, max_s=30, poll_s=60, woken_s_ago=0.0
    )
    later.join()
    assert sorted(out.processed) == sorted(scraped[:2])
    # woken once by the commit (that sweep took the work), then the wait to the end of idle_s
    assert [w.woken for w in waiters] == [1] and out.sweeps == 2
    assert waiters[0].listening is None  # UNLISTENed when the run ended
