"""The shared stage mechanism's chunks, on the real PostgreSQL (the real classifier and model; a
fake Bedrock client for the token ledger): each chunk commits with its events and ledger, the
deadline leaves the rest pending, bisection isolates a poison article, a refused row is
dead-lettered alone, and the next chunk's model calls run ahead while a chunk commits."""

from __future__ import annotations

import json

import pytest

from dgb import db, topology
from dgb.pipeline import stages
from dgb.pipeline.runner import RunOptions, run_stage
from tests.support.sql import count, one_row
from tests.support.stage_faults import Poisoning, enrich_all

pytestmark = pytest.mark.stack


def one_row_per(pg, sql, *args):
    with pg.cursor() as cur:
        cur.execute(sql, args)
        rows = cur.fetchall()
    pg.commit()
    return rows


class _Counting:
    """The local classifier, its calls counted and timed (which thread, which rows)."""

    def __init__(self, inner, name="local"):
        self.inner, self.name, self.calls = inner, name, []
        self.version = inner.version

    def classify_batch(self, items):
        import threading

        self.calls.append((threading.current_thread().name, tuple(i.unique_id for i in items)))
        return self.inner.classify_batch(items)


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
    enrich_all(pg, classifier)
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
