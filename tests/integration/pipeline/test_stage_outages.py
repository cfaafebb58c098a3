"""Outages in the shared stage mechanism, on the real PostgreSQL (an unreachable model service, an
unreachable Typesense, lock conflicts): transient failures never dead-letter, circuit breakers
defer and probe, holds and parking leave the sweep and show in `dgb status`, redrive unparks, and
the stages catch up after recovery."""

from __future__ import annotations

import pytest

from dgb import db, topology
from dgb.cli import main
from dgb.observe.status import pipeline_status
from dgb.pipeline import stages
from dgb.pipeline.report import StageRetry
from dgb.pipeline.resilience import CLOSED, HALF_OPEN, MODEL_SERVICE, OPEN, Breakers
from dgb.pipeline.runner import RunOptions, run_stage
from dgb.reconcile import redrive
from tests.support.pubsub import pull
from tests.support.sql import count, one_row
from tests.support.stage_faults import CountingEmbedder, Poisoning, enrich_all, unreachable_typesense

pytestmark = pytest.mark.stack


def _rows(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        rows = cur.fetchall()
    conn.commit()
    return rows


def test_an_outage_on_the_last_try_dead_letters_nothing_and_work_completes_after_recovery(
    pg,
    scraped,
    classifier,
    embedder,
    down_embedder,
    monkeypatch,
):
    enrich_all(pg, classifier)
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
    enrich_all(pg, classifier)
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
    enrich_all(pg, classifier)
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

    enrich_all(pg, classifier)
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

    enrich_all(pg, classifier)
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
