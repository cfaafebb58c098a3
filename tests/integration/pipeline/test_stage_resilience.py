"""Poison work and outages in the shared stage mechanism, on the real PostgreSQL (and the real
classifier / model; an unreachable model service for the outage; a fake Bedrock client for the
token ledger): chunked commits, bisection, transient-vs-permanent, circuit breakers, holds and
parking, `dgb status`, redrive."""

from __future__ import annotations

import json
import socket
import time

import pytest

from dgb import db, topology
from dgb.cli import main
from dgb.observe.status import pipeline_status
from dgb.pipeline import stages
from dgb.pipeline.report import StageRetry
from dgb.pipeline.resilience import CLOSED, HALF_OPEN, MODEL_SERVICE, OPEN, Breakers
from dgb.pipeline.runner import RunOptions, keep_sweeping, run_stage
from dgb.reconcile import redrive
from tests.support.pubsub import pull
from tests.support.sql import count, one_row

pytestmark = pytest.mark.stack


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


@pytest.fixture
def down_embedder(embedder):
    """The model service's client on a loopback port where nothing listens (a real outage), one
    attempt per call; ``dim`` answered locally (the stage checks the vectors' shape)."""
    from dgb.embed.client import ServiceEmbedder

    client = ServiceEmbedder(f"http://127.0.0.1:{closed_port()}", timeout=2, attempts=1)
    client._name, client._dim = embedder.name, embedder.dim
    yield CountingEmbedder(client)
    client.close()


def _enrich_all(pg, classifier):
    report = run_stage(stages.EnrichStage(classifier, pg), pg, [], RunOptions(sweep_limit=100))
    assert report.retry == [] and report.dead_lettered == []


def test_chunks_commit_mid_run_with_their_events_and_ledger(pg, pg_server, scraped, classifier):
    """Each chunk's results, next events and token ledger are visible before the run ends."""
    from dgb.enrich.bedrock import BedrockClassifier
    from dgb.taxonomy import load_taxonomy

    good = json.dumps({"theme_l1": "03", "theme_l2": "03.02", "theme_l3": "03.02.01", "summary": "Resumo."})

    class FakeBedrock:
        def converse(self, **kwargs):
            return {
                "output": {"message": {"role": "assistant", "content": [{"text": good}]}},
                "stopReason": "end_turn",
                "usage": {"inputTokens": 1000, "outputTokens": 50, "totalTokens": 1050},
                "metrics": {"latencyMs": 10},
            }

    model_id = "test-chunk-ledger"
    bedrock = BedrockClassifier(
        load_taxonomy(), client=FakeBedrock(), model_id=model_id, sleep=lambda s: None
    )
    other = db.connect(pg_server.pg_dsn())  # another session: sees only what was committed
    seen: list[tuple[int, int, int]] = []

    def observe():
        enriched = one_row(other, "SELECT count(*) FROM news WHERE enriched_at IS NOT NULL")[0]
        events = one_row(other, "SELECT count(*) FROM outbox WHERE topic = %s", topology.TOPIC_ENRICHED)[0]
        calls = one_row(
            other, "SELECT coalesce(sum(calls), 0) FROM llm_usage_daily WHERE model_id = %s", model_id
        )
        seen.append((enriched, events, int(calls[0])))

    try:
        with db.transaction(pg) as cur:
            cur.execute("DELETE FROM llm_usage_daily WHERE model_id = %s", (model_id,))
        report = run_stage(
            stages.EnrichStage(bedrock, pg),
            pg,
            [],
            RunOptions(sweep_limit=100, chunk_size=2, on_chunk=observe),
        )
        n = len(scraped)
        assert len(report.processed) == n and report.chunks == (n + 1) // 2
        # after the first chunk: 2 results, their 2 events and 2 paid calls already committed
        assert seen[0] == (2, 2, 2)
        assert seen[-1] == (n, n, n)
        assert [s[0] for s in seen] == sorted(s[0] for s in seen)
    finally:
        other.close()
        with db.transaction(pg) as cur:
            cur.execute("DELETE FROM llm_usage_daily WHERE model_id = %s", (model_id,))


def test_deadline_leaves_the_rest_pending_for_the_next_run(pg, scraped, classifier):
    report = run_stage(
        stages.EnrichStage(classifier, pg), pg, [], RunOptions(sweep_limit=100, chunk_size=2, deadline_s=0)
    )
    assert report.deadline_hit and report.processed == [] and len(report.deferred) == len(scraped)
    assert count(pg, "SELECT count(*) FROM news WHERE enriched_at IS NULL") == len(scraped)
    assert count(pg, "SELECT count(*) FROM dead_letters") == 0
    again = run_stage(stages.EnrichStage(classifier, pg), pg, [], RunOptions(sweep_limit=100, chunk_size=2))
    assert len(again.processed) == len(scraped)


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


def test_bisection_isolates_the_bad_article(pg, scraped, classifier):
    bad = scraped[2]
    poisoning = Poisoning(classifier, {bad})
    report = run_stage(
        stages.EnrichStage(poisoning, pg), pg, [], RunOptions(sweep_limit=100, chunk_size=len(scraped))
    )
    assert sorted(report.processed) == sorted(u for u in scraped if u != bad)
    assert report.dead_lettered == [(bad, "error")] and report.bisections >= 1
    assert [bad] in poisoning.calls  # it was tried alone
    with pg.cursor() as cur:
        cur.execute("SELECT unique_id, reason, status, error FROM dead_letters")
        [(uid, reason, status, error)] = cur.fetchall()
        cur.execute(
            "SELECT hold_stage, hold_failures, parked_at, problem FROM news WHERE unique_id = %s", (bad,)
        )
        assert cur.fetchone() == ("enrich", 1, None, "dead_letter")
    pg.commit()
    assert (uid, reason, status) == (bad, "error", "open") and "cannot parse" in error


def test_a_data_error_at_commit_dead_letters_only_that_row(pg, scraped, classifier):
    bad = scraped[1]

    class NulSummary(Poisoning):
        def classify_batch(self, items):
            from dataclasses import replace

            return [
                replace(r, summary="resumo\x00quebrado") if i.unique_id == bad else r
                for i, r in zip(items, self.inner.classify_batch(items))
            ]

    report = run_stage(
        stages.EnrichStage(NulSummary(classifier, set()), pg), pg, [], RunOptions(sweep_limit=100)
    )
    assert sorted(report.processed) == sorted(u for u in scraped if u != bad)
    assert report.dead_lettered == [(bad, "persist_refused")]
    assert (
        count(pg, "SELECT count(*) FROM outbox WHERE topic = %s", topology.TOPIC_ENRICHED) == len(scraped) - 1
    )


def test_features_the_database_refuses_dead_letter_only_that_row(pg, scraped, classifier):
    """The chunk's features are written together after its rows (persist_chunk); one article's
    features that PostgreSQL refuses (a NUL byte in jsonb) make the chunk redo row by row, so only
    that article is dead-lettered and the others keep their features and entities."""
    from dgb.features.compute import FeatureComputer

    titles = dict(one_row_per(pg, "SELECT unique_id, title FROM news WHERE unique_id = ANY(%s)", scraped))
    bad = scraped[1]

    class NulFeatures(FeatureComputer):
        def compute(self, title, content, **kw):
            out = super().compute(title, content, **kw)
            if title == titles[bad]:
                out.keys["sentiment_method"] = "quebrado\x00"
            return out

    report = run_stage(
        stages.EnrichStage(classifier, pg, features=NulFeatures()), pg, [], RunOptions(sweep_limit=100)
    )
    assert report.dead_lettered == [(bad, "persist_refused")]
    good = sorted(u for u in scraped if u != bad)
    assert sorted(report.processed) == good
    assert count(pg, "SELECT count(*) FROM news_features WHERE unique_id = ANY(%s)", good) == len(good)
    assert count(pg, "SELECT count(*) FROM news_features WHERE unique_id = %s", bad) == 0
    with_entities = "SELECT count(DISTINCT unique_id) FROM news_entities WHERE unique_id = ANY(%s)"
    assert count(pg, with_entities, good) > 0
    assert count(pg, "SELECT count(*) FROM news_entities WHERE unique_id = %s", bad) == 0


def test_a_rolled_back_attempt_leaves_no_features_to_another_row(pg, scraped, classifier):
    """The first row's features are not written together with what a rolled-back attempt left:
    in one chunk the 2nd article's features and the 3rd article's summary are refused. The first
    attempt fails at the 3rd row; in the row-by-row redo the 1st row writes its own features alone,
    so only the 2nd and 3rd are dead-lettered."""
    from dataclasses import replace

    from dgb.features.compute import FeatureComputer

    order: list[tuple[str, str]] = []  # (unique_id, title) in the chunk's order

    class NulThird(Poisoning):
        def classify_batch(self, items):
            results = self.inner.classify_batch(items)
            if not order:
                order.extend((i.unique_id, i.title) for i in items)
            return [
                replace(r, summary="resumo\x00") if i.unique_id == order[2][0] else r
                for i, r in zip(items, results)
            ]

    class NulSecond(FeatureComputer):
        def compute(self, title, content, **kw):
            out = super().compute(title, content, **kw)
            if title == order[1][1]:
                out.keys["sentiment_method"] = "quebrado\x00"
            return out

    stage = stages.EnrichStage(NulThird(classifier, set()), pg, features=NulSecond())
    report = run_stage(stage, pg, [], RunOptions(sweep_limit=100, chunk_size=25))
    assert len(order) == len(scraped) >= 3
    assert sorted(report.dead_lettered) == sorted(
        [(order[1][0], "persist_refused"), (order[2][0], "persist_refused")]
    )
    assert order[0][0] in report.processed
    assert count(pg, "SELECT count(*) FROM news_features WHERE unique_id = %s", order[0][0]) == 1


def one_row_per(pg, sql, *args):
    with pg.cursor() as cur:
        cur.execute(sql, args)
        rows = cur.fetchall()
    pg.commit()
    return rows


def test_an_outage_on_the_last_try_dead_letters_nothing_and_work_completes_after_recovery(
    pg,
    scraped,
    classifier,
    embedder,
    down_embedder,
    monkeypatch,
):
    _enrich_all(pg, classifier)
    monkeypatch.setenv("DGB_BREAKER_COOLDOWN_S", "0")  # half-open at once after it opened
    n = len(scraped)
    down = stages.EmbedStage(down_embedder, embedder.name)
    # not the last try: retryable, nothing dead-lettered
    with pytest.raises(StageRetry):
        run_stage(down, pg, [], RunOptions(sweep_limit=100, chunk_size=2))
    # the last Airflow try: the run ends normally, still nothing dead-lettered or held
    report = run_stage(down, pg, [], RunOptions(sweep_limit=100, chunk_size=2, final_attempt=True))
    assert report.dead_lettered == [] and report.processed == [] and report.retry
    assert count(pg, "SELECT count(*) FROM dead_letters") == 0
    assert count(pg, "SELECT count(*) FROM news WHERE hold_stage IS NOT NULL OR problem IS NOT NULL") == 0
    assert count(pg, "SELECT count(*) FROM news WHERE attempts > 0 AND last_error LIKE '%%unavailable%%'") > 0
    # the model service is back: every article goes through and the flags clear
    report = run_stage(
        stages.EmbedStage(embedder, embedder.name), pg, [], RunOptions(sweep_limit=100, chunk_size=2)
    )
    assert len(report.processed) == n
    assert count(pg, "SELECT count(*) FROM news WHERE embedded_at IS NOT NULL AND attempts = 0") == n
    assert count(pg, "SELECT count(*) FROM news WHERE last_error IS NOT NULL") == 0
    assert count(pg, "SELECT count(*) FROM dead_letters") == 0
    assert one_row(pg, "SELECT failures, open_until FROM stage_breakers WHERE name = %s", MODEL_SERVICE) == (
        0,
        None,
    )


def test_circuit_breaker_opens_defers_then_half_open_probe(
    pg,
    scraped,
    classifier,
    embedder,
    down_embedder,
    monkeypatch,
):
    _enrich_all(pg, classifier)
    monkeypatch.setenv("DGB_BREAKER_THRESHOLD", "2")
    monkeypatch.setenv("DGB_BREAKER_COOLDOWN_S", "600")
    monkeypatch.setenv("DGB_BREAKER_MAX_COOLDOWN_S", "600")
    monkeypatch.setenv("DGB_STAGE_PREFETCH_CHUNKS", "2")
    n = len(scraped)
    assert n >= 4
    down = stages.EmbedStage(down_embedder, embedder.name)
    report = run_stage(down, pg, [], RunOptions(sweep_limit=100, chunk_size=1, final_attempt=True))
    # two failed answers open it; the rest is deferred without calling the service. The first
    # chunk's call and the two started ahead of it went out before any failure was known (the
    # second chunk takes its failed answer; the third's is never used); none after
    assert down_embedder.calls == 1 + 2 and report.breakers_open == [MODEL_SERVICE]
    assert len(report.retry) == 2 and len(report.deferred) == n - 2 and report.dead_lettered == []
    assert Breakers(pg, [MODEL_SERVICE]).state(MODEL_SERVICE) == OPEN
    # another run while it is open: no call at all, no raise (nothing was attempted)
    report = run_stage(down, pg, [], RunOptions(sweep_limit=100, chunk_size=1))
    assert down_embedder.calls == 3 and len(report.deferred) == n
    # `dgb status` shows it
    status = pipeline_status(pg)
    assert [(b["name"], b["state"]) for b in status["breakers"]] == [(MODEL_SERVICE, OPEN)]

    # cool-down over: half-open, one probe; it fails -> open again, for longer
    with db.transaction(pg) as cur:
        cur.execute("UPDATE stage_breakers SET open_until = now() - interval '1 second'")
    assert Breakers(pg, [MODEL_SERVICE]).state(MODEL_SERVICE) == HALF_OPEN
    report = run_stage(down, pg, [], RunOptions(sweep_limit=100, chunk_size=3, final_attempt=True))
    assert down_embedder.calls == 4 and report.chunks == 1 and len(report.deferred) == n - 1  # no call ahead
    assert one_row(pg, "SELECT opens FROM stage_breakers WHERE name = %s", MODEL_SERVICE) == (2,)

    # half-open again, the service is back: the probe (one article) closes it, then full chunks
    with db.transaction(pg) as cur:
        cur.execute("UPDATE stage_breakers SET open_until = now() - interval '1 second'")
    healthy = CountingEmbedder(embedder)
    report = run_stage(
        stages.EmbedStage(healthy, embedder.name), pg, [], RunOptions(sweep_limit=100, chunk_size=3)
    )
    assert len(report.processed) == n and report.deferred == []
    assert healthy.calls == 1 + -(-(n - 1) // 3)  # the probe, then chunks of 3
    assert Breakers(pg, [MODEL_SERVICE]).state(MODEL_SERVICE) == CLOSED


class Deadlocking(CountingEmbedder):
    """The real model, but every call first loses a lock conflict (as the index stage's mark did
    against the embed stage's commit): PostgreSQL is healthy, the article is fine."""

    def __init__(self, inner, failures: int):
        super().__init__(inner)
        self.failures = failures

    def encode(self, texts, batch_size=32):
        import psycopg

        self.calls += 1
        if self.calls <= self.failures:
            raise psycopg.errors.DeadlockDetected("deadlock detected")
        return self.inner.encode(texts, batch_size=batch_size)


def test_a_lock_conflict_is_retried_and_never_opens_a_breaker(
    pg,
    scraped,
    classifier,
    embedder,
    monkeypatch,
):
    import psycopg

    from dgb.pipeline.resilience import CONFLICT, POSTGRESQL, TRANSIENT, classify

    verdict = classify(psycopg.errors.DeadlockDetected("deadlock detected"), MODEL_SERVICE)
    assert (verdict.kind, verdict.dependency, verdict.reason) == (TRANSIENT, POSTGRESQL, CONFLICT)
    _enrich_all(pg, classifier)
    monkeypatch.setenv("DGB_BREAKER_THRESHOLD", "2")
    n = len(scraped)
    conflicted = Deadlocking(embedder, failures=n)
    report = run_stage(
        stages.EmbedStage(conflicted, embedder.name),
        pg,
        [],
        RunOptions(sweep_limit=100, chunk_size=1, final_attempt=True),
    )
    # every chunk was tried (none deferred by a breaker), every article left pending, none dead-lettered
    assert conflicted.calls == n and report.deferred == [] and report.breakers_open == []
    assert len(report.retry) == n and report.dead_lettered == [] and report.processed == []
    assert Breakers(pg, [POSTGRESQL, MODEL_SERVICE]).states[POSTGRESQL].failures == 0
    assert Breakers(pg, [MODEL_SERVICE]).state(MODEL_SERVICE) == CLOSED
    # a postgresql breaker left half-open (by a real outage) is closed by the next run that works,
    # though no stage lists PostgreSQL among its dependencies
    with db.transaction(pg) as cur:
        cur.execute(
            "INSERT INTO stage_breakers (name, failures, opens, open_until, last_error)"
            " VALUES (%s, 5, 1, now() - interval '1 second', 'postgresql_unavailable: gone')",
            (POSTGRESQL,),
        )
    assert Breakers(pg, [POSTGRESQL]).state(POSTGRESQL) == HALF_OPEN
    report = run_stage(
        stages.EmbedStage(conflicted, embedder.name), pg, [], RunOptions(sweep_limit=100, chunk_size=5)
    )
    assert len(report.processed) == n
    assert Breakers(pg, [POSTGRESQL]).state(POSTGRESQL) == CLOSED
    assert pipeline_status(pg)["breakers"] == []


def test_held_and_parked_rows_leave_the_sweep_show_in_status_and_redrive_unparks(
    pg,
    scraped,
    project,
    classifier,
    capsys,
    caplog,
):
    bad = scraped[0]
    poisoning = Poisoning(classifier, {bad})
    stage = stages.EnrichStage(poisoning, pg)
    first = run_stage(stage, pg, [], RunOptions(sweep_limit=100, max_failures=2))
    assert first.dead_lettered == [(bad, "error")] and first.parked == []
    # held: the sweep no longer takes it (no paid call every minute)
    poisoning.calls.clear()
    again = run_stage(stage, pg, [], RunOptions(sweep_limit=100, max_failures=2))
    assert again.swept == 0 and poisoning.calls == []
    # a message still brings it back; the second permanent failure parks it
    msgs = [
        m for m in pull(project, topology.SUB_ENRICHMENT, len(scraped)) if m.attributes["unique_id"] == bad
    ]
    assert len(msgs) == 1
    parked = run_stage(stage, pg, msgs, RunOptions(sweep_limit=100, max_failures=2))
    assert parked.parked == [(bad, "error")]
    assert one_row(pg, "SELECT hold_failures, parked_at IS NOT NULL FROM news WHERE unique_id = %s", bad) == (
        2,
        True,
    )
    # parked: even its message is skipped now
    poisoning.calls.clear()
    skipped = run_stage(stage, pg, msgs, RunOptions(sweep_limit=100, max_failures=2))
    assert skipped.skipped == [bad] and poisoning.calls == []

    status = pipeline_status(pg)
    assert status["parked"] == [{"stage": "enrich", "reason": "error", "count": 1}]
    assert status["backlog"]["enrich"]["pending"] == 1  # still not done: counted in the backlog
    capsys.readouterr()  # drop the runs' log lines
    # the status's own INFO lines (the integrity share it plans with) are logs, not its report: a
    # process where Airflow set up logging to stdout would interleave them with the report
    caplog.set_level("WARNING", logger="dgb")
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "  parked  enrich       1  reason error" in out
    assert out.splitlines()[0].startswith("articles ")  # the existing lines are unchanged
    assert "  backlog enrich  pending      1" in out

    # the operator fixes the cause and redrives: un-parked, processed, flags cleared
    rep = redrive.redrive(pg, reason="error")
    assert len(rep.redriven) == 1
    assert one_row(pg, "SELECT hold_stage, parked_at FROM news WHERE unique_id = %s", bad) == (None, None)
    fixed = run_stage(stages.EnrichStage(classifier, pg), pg, [], RunOptions(sweep_limit=100))
    assert fixed.processed == [bad]
    assert one_row(
        pg,
        "SELECT hold_stage, hold_failures, parked_at, problem, attempts FROM news WHERE unique_id = %s",
        bad,
    ) == (None, 0, None, None, 0)
    assert pipeline_status(pg)["parked"] == []


def test_a_later_success_clears_the_flags_and_resolves_the_dead_letter(pg, scraped, project, classifier):
    bad = scraped[0]
    run_stage(stages.EnrichStage(Poisoning(classifier, {bad}), pg), pg, [], RunOptions(sweep_limit=100))
    assert one_row(pg, "SELECT hold_stage, problem FROM news WHERE unique_id = %s", bad) == (
        "enrich",
        "dead_letter",
    )
    # its event arrives again (e.g. a redelivery) and now it goes through
    msgs = [
        m for m in pull(project, topology.SUB_ENRICHMENT, len(scraped)) if m.attributes["unique_id"] == bad
    ]
    report = run_stage(stages.EnrichStage(classifier, pg), pg, msgs, RunOptions(sweep_limit=0))
    assert report.processed == [bad]
    assert one_row(pg, "SELECT hold_stage, problem, last_error FROM news WHERE unique_id = %s", bad) == (
        None,
        None,
        None,
    )
    assert one_row(pg, "SELECT status, resolution FROM dead_letters WHERE unique_id = %s", bad) == (
        "resolved",
        "processed by a later run",
    )


def test_thousands_of_held_rows_do_not_hide_real_work_from_the_sweep(pg, classifier):
    """1,200 poison rows older than the real work: the sweep's LIMIT still reaches the real work,
    through the partial index that leaves them out."""
    with db.transaction(pg) as cur:
        cur.execute(
            "INSERT INTO news (unique_id, agency_key, title, url, published_at, scraped_at, hold_stage,"
            " hold_reason, hold_failures, parked_at, problem)"
            " SELECT 'poison-' || g, 'mec', 'x', 'https://www.gov.br/mec/p/' || g, now(),"
            " now() - interval '2 days' + g * interval '1 second', 'enrich', 'error', 3, now(), 'dead_letter'"
            " FROM generate_series(1, 1200) g"
        )
        cur.execute(
            "INSERT INTO news (unique_id, agency_key, title, url, published_at, content, scraped_at)"
            " SELECT 'real-' || g, 'mec', 'Vacinação ' || g, 'https://www.gov.br/mec/r/' || g, now(),"
            " 'Texto da notícia sobre vacinação.', now() - interval '1 day' FROM generate_series(1, 5) g"
        )
        cur.execute("ANALYZE news")
        from dgb.pipeline.definitions import ENRICH

        cur.execute(
            f"EXPLAIN SELECT unique_id FROM news WHERE {ENRICH.sweep} ORDER BY scraped_at LIMIT 1000",
            {"model": None},
        )
        plan = "\n".join(r[0] for r in cur.fetchall())
    assert "news_sweep_enrich_idx" in plan, plan
    from dgb.taxonomy import load_taxonomy, themes_rows

    db.upsert_themes(pg, themes_rows(load_taxonomy()))
    report = run_stage(stages.EnrichStage(classifier, pg), pg, [], RunOptions(sweep_limit=3))
    assert report.swept == 3 and all(u.startswith("real-") for u in report.processed)


def test_typesense_down_dead_letters_nothing_and_the_index_catches_up(
    pg,
    scraped,
    classifier,
    embedder,
    typesense_server,
    monkeypatch,
):
    import uuid
    from dataclasses import replace

    from dgb.search import schema
    from dgb.search import sync as search_sync

    _enrich_all(pg, classifier)
    run_stage(stages.EmbedStage(embedder, embedder.name), pg, [], RunOptions(sweep_limit=100))
    n = len(scraped)
    alias = f"t_{uuid.uuid4().hex[:8]}"
    s = replace(typesense_server, typesense_collection=alias, embedding_dim=512)
    down = unreachable_typesense(s)
    backoffs: list[int] = []  # the sync's retries, without their sleeps (their lengths: test_search_index)
    monkeypatch.setattr(search_sync, "_backoff", lambda attempt: backoffs.append(attempt) or 0.0)
    report = run_stage(
        stages.IndexStage(down, alias, pg, 512), pg, [], RunOptions(sweep_limit=100, final_attempt=True)
    )
    assert report.processed == [] and report.dead_lettered == [] and len(report.retry) == n
    assert backoffs and max(backoffs) == 4  # retried up to sync's max_retries (5) before giving up
    assert count(pg, "SELECT count(*) FROM news WHERE hold_stage IS NOT NULL OR problem IS NOT NULL") == 0
    assert one_row(pg, "SELECT failures >= 3 FROM stage_breakers WHERE name = 'typesense'") == (True,)

    # still down: the breaker is open and Typesense's /health does not answer: nothing is tried
    assert Breakers(pg, ["typesense"]).state("typesense") == OPEN
    report = run_stage(stages.IndexStage(down, alias, pg, 512), pg, [], RunOptions(sweep_limit=100))
    assert report.breakers_open == ["typesense"] and len(report.deferred) == n and report.chunks == 0

    ts = schema.client(s)
    schema.ensure_collection(s, ts)
    try:
        # back within the cool-down (still open): /health answers, so one probe goes at once
        # and, as it succeeds, the rest follows in the same run
        assert Breakers(pg, ["typesense"]).state("typesense") == OPEN
        report = run_stage(stages.IndexStage(ts, alias, pg, 512), pg, [], RunOptions(sweep_limit=100))
        assert len(report.processed) == n and report.dead_lettered == [] and report.deferred == []
        assert Breakers(pg, ["typesense"]).state("typesense") == CLOSED
        assert ts.collections[alias].retrieve()["num_documents"] == n
        assert count(pg, "SELECT count(*) FROM news WHERE indexed_version = version AND attempts = 0") == n
    finally:
        target = ts.aliases[alias].retrieve()["collection_name"]
        ts.aliases[alias].delete()
        ts.collections[target].delete()


def test_documents_typesense_lost_are_indexed_again_by_the_next_index_run(
    pg,
    scraped,
    classifier,
    embedder,
    typesense_server,
):
    """A Typesense that comes back without some documents (this one, 0.24 single-node, can come
    back from a restart with its collections but not their documents): the index run finds
    the shortfall and re-indexes exactly the articles whose document is gone."""
    import uuid
    from dataclasses import replace

    from dgb.search import schema

    _enrich_all(pg, classifier)
    run_stage(stages.EmbedStage(embedder, embedder.name), pg, [], RunOptions(sweep_limit=100))
    n = len(scraped)
    alias = f"t_{uuid.uuid4().hex[:8]}"
    s = replace(typesense_server, typesense_collection=alias, embedding_dim=512)
    ts = schema.client(s)
    schema.ensure_collection(s, ts)
    try:
        assert (
            len(
                run_stage(
                    stages.IndexStage(ts, alias, pg, 512), pg, [], RunOptions(sweep_limit=100)
                ).processed
            )
            == n
        )
        assert stages.IndexStage(ts, alias, pg, 512).restore_lost_documents() == 0  # nothing lost
        with db.transaction(pg) as cur:  # settled long ago: not in flight
            cur.execute("UPDATE news SET updated_at = now() - interval '1 hour'")
        gone = scraped[:2]
        for uid in gone:
            ts.collections[alias].documents[uid].delete()
        assert stages.IndexStage(ts, alias, pg, 512).restore_lost_documents() == 2
        assert sorted(
            r[0] for r in _rows(pg, "SELECT unique_id FROM news WHERE indexed_version IS NULL")
        ) == sorted(gone)
        report = run_stage(stages.IndexStage(ts, alias, pg, 512), pg, [], RunOptions(sweep_limit=100))
        assert sorted(report.processed) == sorted(gone)
        assert ts.collections[alias].retrieve()["num_documents"] == n
        # Typesense unreachable: the check gives up quietly (the run's breaker handles outages)
        down = unreachable_typesense(s)
        assert stages.IndexStage(down, alias, pg, 512).restore_lost_documents() == 0
    finally:
        target = ts.aliases[alias].retrieve()["collection_name"]
        ts.aliases[alias].delete()
        ts.collections[target].delete()


def _rows(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        rows = cur.fetchall()
    conn.commit()
    return rows


def test_an_unknown_error_on_a_whole_chunk_is_not_poison_until_it_repeats(
    pg,
    scraped,
    classifier,
    monkeypatch,
):
    from dgb.pipeline.resilience import UNKNOWN_LIMIT

    monkeypatch.setenv("DGB_BREAKER_COOLDOWN_S", "0")  # the breaker it opens lets a probe through

    # a systemic fault (every article fails the same unexpected way): nothing is dead-lettered
    broken = Poisoning(classifier, set(scraped))
    report = run_stage(
        stages.EnrichStage(broken, pg), pg, [], RunOptions(sweep_limit=100, final_attempt=True)
    )
    assert report.dead_lettered == [] and len(report.retry) == len(scraped)
    assert count(pg, "SELECT count(*) FROM news WHERE hold_stage IS NOT NULL") == 0
    assert report.breakers_open or one_row(pg, "SELECT failures FROM stage_breakers")[0] >= 3
    # one article alone failing the very same way run after run: poison after UNKNOWN_LIMIT tries
    bad = scraped[0]
    alone = stages.EnrichStage(Poisoning(classifier, {bad}), pg)
    for attempt in range(2, UNKNOWN_LIMIT + 1):
        report = run_stage(alone, pg, [], RunOptions(sweep_limit=0, final_attempt=True), unique_ids=[bad])
        if attempt < UNKNOWN_LIMIT:
            assert report.dead_lettered == [] and [u for u, _ in report.retry] == [bad]
    assert report.dead_lettered == [(bad, "error")]
    assert one_row(pg, "SELECT hold_stage FROM news WHERE unique_id = %s", bad) == ("enrich",)


def test_the_embed_stage_commits_its_first_chunk_on_a_fresh_connection(
    pg, pg_server, scraped, classifier, embedder, caplog
):
    """The vectors' adapter is in place before the chunk's cursor is made: a fresh connection (each
    Airflow task run opens one) commits its first chunk in one transaction, not after a refused
    commit redone row by row (which cost every single-article run a failed transaction)."""
    _enrich_all(pg, classifier)
    fresh = db.connect(pg_server.pg_dsn())
    try:
        with caplog.at_level("WARNING", logger="dgb.pipeline"):
            report = run_stage(
                stages.EmbedStage(embedder, embedder.name), fresh, [], RunOptions(sweep_limit=100)
            )
    finally:
        fresh.close()
    assert len(report.processed) == len(scraped)
    assert "chunk refused" not in caplog.text


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


class _Counting:
    """The local classifier, its calls counted and timed (which thread, which rows)."""

    def __init__(self, inner, name="local"):
        self.inner, self.name, self.calls = inner, name, []
        self.version = inner.version

    def classify_batch(self, items):
        import threading

        self.calls.append((threading.current_thread().name, tuple(i.unique_id for i in items)))
        return self.inner.classify_batch(items)


@pytest.mark.parametrize("ahead", [1, 2])
def test_the_next_chunks_classification_runs_while_a_chunk_commits(
    pg, scraped, classifier, monkeypatch, ahead
):
    """With the local classifier the next chunks' model calls (``DGB_STAGE_PREFETCH_CHUNKS``) are
    started before a chunk is processed, so they run while that chunk's features are computed and
    its rows committed, and the next chunks' processing takes their answers: one call per chunk,
    every chunk after the first classified by a prefetch thread, the same outcome."""
    from dgb.features.compute import FeatureComputer

    events: list[tuple[str, tuple]] = []

    class Recording(_Counting):
        def classify_batch(self, items):
            events.append(("call", tuple(i.unique_id for i in items)))
            return super().classify_batch(items)

    class Features(FeatureComputer):
        def compute(self, title, content, **kw):
            events.append(("features", (title,)))
            return super().compute(title, content, **kw)

    monkeypatch.setenv("DGB_STAGE_PREFETCH_CHUNKS", str(ahead))
    counting = Recording(classifier)
    stage = stages.EnrichStage(counting, pg, features=Features())
    report = run_stage(stage, pg, [], RunOptions(sweep_limit=100, chunk_size=2))
    assert sorted(report.processed) == sorted(scraped) and report.dead_lettered == []
    chunks_run = (len(scraped) + 1) // 2
    assert chunks_run >= 3
    assert len(counting.calls) == chunks_run == report.chunks  # no chunk classified twice
    threads = [t for t, _ in counting.calls]
    assert threads.count("MainThread") == 1  # the first chunk: nothing was started for it
    assert all(t.startswith("dgb-prefetch") for t in threads if t != "MainThread")
    # the next chunks' calls were started before the first chunk's features were computed
    first_features = next(i for i, (kind, _) in enumerate(events) if kind == "features")
    started_before = [ids for kind, ids in events[:first_features] if kind == "call"]
    assert len(started_before) == 1 + ahead, events[: first_features + 1]
    assert count(pg, "SELECT count(*) FROM news WHERE enriched_at IS NOT NULL") == len(scraped)


def test_a_paid_classifier_is_never_called_ahead(pg, scraped, classifier):
    """Bedrock (or hybrid) answers cost money and the next chunk may not run: no prefetch."""
    paid = _Counting(classifier, name="bedrock")
    run_stage(stages.EnrichStage(paid, pg), pg, [], RunOptions(sweep_limit=100, chunk_size=2))
    assert {t for t, _ in paid.calls} == {"MainThread"}
