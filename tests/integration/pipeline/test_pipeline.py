"""The shared stage mechanism end to end on real servers: scrape -> outbox -> Pub/Sub (emulator)
-> enrich -> embed -> index (Typesense), with redelivery, poison messages and transient failures."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

import pytest

from dgb import db, outbox, topology
from dgb.pipeline import stages
from dgb.pipeline.messages import InMessage
from dgb.pipeline.report import StageRetry
from dgb.pipeline.runner import RunOptions, run_stage
from dgb.search import schema
from tests.support.articles import ARTICLES
from tests.support.pubsub import pull
from tests.support.sql import count

pytestmark = pytest.mark.stack

N = len([a for a in ARTICLES if a[0] == "mec"])


def test_each_message_three_times_gives_one_result_and_one_document(
    pg, scraped, project, classifier, embedder, typesense_server
):
    from google.cloud import pubsub_v1

    msgs = pull(project, topology.SUB_ENRICHMENT, N)
    assert len(msgs) == N
    report = run_stage(stages.EnrichStage(classifier, pg), pg, msgs * 3, RunOptions(sweep_limit=0))
    assert sorted(report.processed) == sorted(scraped) and report.dead_lettered == []
    assert count(pg, "SELECT count(*) FROM outbox WHERE topic = %s", topology.TOPIC_ENRICHED) == N
    assert (
        count(
            pg,
            "SELECT count(*) FROM news WHERE enriched_at IS NOT NULL AND most_specific_theme_id"
            " IS NOT NULL AND summary <> ''",
        )
        == N
    )
    # delivered again later: nothing is classified twice
    again = run_stage(stages.EnrichStage(classifier, pg), pg, msgs, RunOptions(sweep_limit=0))
    assert again.processed == [] and len(again.skipped) == N
    assert count(pg, "SELECT count(*) FROM outbox WHERE topic = %s", topology.TOPIC_ENRICHED) == N

    # the enriched events fan out to embeddings and typesense (through the real emulator)
    outbox.relay(pg, pubsub_v1.PublisherClient(), project)
    emb_msgs = pull(project, topology.SUB_EMBEDDINGS, N)
    emb = run_stage(stages.EmbedStage(embedder, embedder.name), pg, emb_msgs * 3, RunOptions(sweep_limit=0))
    assert len(emb.processed) == N
    assert (
        count(
            pg,
            "SELECT count(*) FROM news WHERE array_length(content_embedding, 1) = 512"
            " AND embedding_model = 'use-multilingual-v3'",
        )
        == N
    )

    alias = f"t_{uuid.uuid4().hex[:8]}"
    s = replace(typesense_server, typesense_collection=alias, embedding_dim=512)
    ts = schema.client(s)
    schema.ensure_collection(s, ts)
    try:
        outbox.relay(pg, pubsub_v1.PublisherClient(), project)
        idx_msgs = pull(project, topology.SUB_TYPESENSE, N) + pull(project, topology.SUB_TYPESENSE_UPDATE, N)
        assert len(idx_msgs) == 2 * N
        index = stages.IndexStage(ts, alias, pg, 512)
        rep = run_stage(index, pg, idx_msgs * 3, RunOptions(sweep_limit=0))
        assert len(rep.processed) == N and rep.retry == []
        assert ts.collections[alias].retrieve()["num_documents"] == N
        doc = ts.collections[alias].documents[scraped[0]].retrieve()
        assert doc["theme_1_level_1_code"] and len(doc["content_embedding"]) == 512
        assert count(pg, "SELECT count(*) FROM news WHERE indexed_version = version") == N
    finally:
        target = ts.aliases[alias].retrieve()["collection_name"]
        ts.aliases[alias].delete()
        ts.collections[target].delete()


def test_poison_messages_are_dead_lettered_and_the_rest_processed(pg, scraped, project, classifier):
    from google.cloud import pubsub_v1

    msgs = pull(project, topology.SUB_ENRICHMENT, N)
    good = msgs[1:]
    poison = [
        InMessage(topology.SUB_ENRICHMENT, "p1", b"not json{", {**msgs[0].attributes}),
        InMessage(
            topology.SUB_ENRICHMENT, "p2", msgs[0].data, {**msgs[0].attributes, "event_version": "9.9"}
        ),
        InMessage(
            topology.SUB_ENRICHMENT,
            "p3",
            json.dumps({**json.loads(msgs[0].data), "unique_id": "no-such-article_000000"}).encode(),
            {**msgs[0].attributes, "unique_id": "no-such-article_000000"},
        ),
    ]
    report = run_stage(stages.EnrichStage(classifier, pg), pg, good + poison, RunOptions(sweep_limit=0))
    assert len(report.processed) == N - 1
    with pg.cursor() as cur:
        cur.execute("SELECT reason, subscription, trace_id IS NOT NULL FROM dead_letters ORDER BY reason")
        rows = cur.fetchall()
    assert rows == [
        ("malformed_json", topology.SUB_ENRICHMENT, True),
        ("unknown_id", topology.SUB_ENRICHMENT, True),
        ("unsupported_version", topology.SUB_ENRICHMENT, True),
    ]
    # and each is on the subscription's dead-letter topic, with its reason
    outbox.relay(pg, pubsub_v1.PublisherClient(), project)
    dlq = topology.subscription(topology.SUB_ENRICHMENT)
    got = pull(project, dlq.dead_letter_subscription, 3)
    assert sorted(m.attributes["dgb_dead_letter_reason"] for m in got) == [
        "malformed_json",
        "unknown_id",
        "unsupported_version",
    ]


class FlakyClassifier:
    """The real classifier, failing transiently for chosen articles (fault injection)."""

    def __init__(self, inner, fail_for: set[str], times: int):
        self.inner, self.fail_for, self.times = inner, fail_for, times
        self.name, self.version = inner.name, inner.version

    def classify_batch(self, items):
        from dgb.enrich.base import ClassificationFailure

        results = self.inner.classify_batch(items)
        if self.times > 0:
            self.times -= 1
            results = [
                ClassificationFailure("throttled", "ThrottlingException (injected)", True)
                if it.unique_id in self.fail_for
                else r
                for it, r in zip(items, results)
            ]
        return results


def test_transient_failure_is_retried_then_processed(pg, scraped, project, classifier):
    msgs = pull(project, topology.SUB_ENRICHMENT, N)
    victim = scraped[0]
    flaky = FlakyClassifier(classifier, {victim}, times=1)
    with pytest.raises(StageRetry, match=victim):
        run_stage(stages.EnrichStage(flaky, pg), pg, msgs, RunOptions(sweep_limit=0))
    # the others are committed; the victim carries its error, nothing dead-lettered
    assert count(pg, "SELECT count(*) FROM news WHERE enriched_at IS NOT NULL") == N - 1
    with pg.cursor() as cur:
        cur.execute("SELECT last_error, attempts FROM news WHERE unique_id = %s", (victim,))
        err, attempts = cur.fetchone()
    assert "throttled" in err and attempts == 1
    # Airflow's retry runs the same triggering messages again
    report = run_stage(stages.EnrichStage(flaky, pg), pg, msgs, RunOptions(sweep_limit=0))
    assert report.processed == [victim] and len(report.skipped) == N - 1
    assert count(pg, "SELECT count(*) FROM dead_letters") == 0


def test_transient_failure_on_the_last_attempt_dead_letters_nothing(pg, scraped, project, classifier):
    """An outage is not poison: on the last Airflow try the run ends normally, the articles stay
    pending with their error, and the next run completes them."""
    msgs = pull(project, topology.SUB_ENRICHMENT, N)
    flaky = FlakyClassifier(classifier, set(scraped[:2]), times=1)
    report = run_stage(stages.EnrichStage(flaky, pg), pg, msgs, RunOptions(sweep_limit=0, final_attempt=True))
    assert report.dead_lettered == [] and sorted(k for k, _ in report.retry) == sorted(scraped[:2])
    assert count(pg, "SELECT count(*) FROM news WHERE problem IS NOT NULL OR hold_stage IS NOT NULL") == 0
    assert count(pg, "SELECT count(*) FROM dead_letters") == 0
    report = run_stage(stages.EnrichStage(flaky, pg), pg, [], RunOptions(sweep_limit=100))
    assert sorted(report.processed) == sorted(scraped[:2])
    assert count(pg, "SELECT count(*) FROM news WHERE enriched_at IS NOT NULL AND attempts = 0") == N


def test_sweep_takes_up_work_that_no_message_announced(pg, scraped, classifier):
    # no messages at all (an asset event that got no DAG run): the timer's run sweeps PostgreSQL
    report = run_stage(stages.EnrichStage(classifier, pg), pg, [], RunOptions(sweep_limit=3))
    assert report.swept == 3 and len(report.processed) == 3
    report = run_stage(stages.EnrichStage(classifier, pg), pg, [], RunOptions(sweep_limit=100))
    assert report.swept == N - 3


def test_edit_during_processing_is_left_to_its_own_event(pg, scraped, project, classifier):
    msgs = pull(project, topology.SUB_ENRICHMENT, N)

    class EditingClassifier(FlakyClassifier):
        def classify_batch(self, items):
            results = self.inner.classify_batch(items)
            with db.transaction(pg) as cur:  # the article is edited while we classify it
                cur.execute("UPDATE news SET version = version + 1 WHERE unique_id = %s", (scraped[0],))
            return results

    report = run_stage(
        stages.EnrichStage(EditingClassifier(classifier, set(), 0), pg), pg, msgs, RunOptions(sweep_limit=0)
    )
    assert scraped[0] in report.skipped and len(report.processed) == N - 1
    with pg.cursor() as cur:
        cur.execute("SELECT enriched_at FROM news WHERE unique_id = %s", (scraped[0],))
        assert cur.fetchone()[0] is None


def test_dead_letters_from_topics_reach_the_table_once(pg, project, pubsub_server):
    """A trigger reject lands on the dead-letter topic only; the sweep records it in the table."""
    from google.cloud import pubsub_v1

    from dgb.deadletters import record_from_topics

    sub = topology.subscription(topology.SUB_ENRICHMENT)
    publisher = pubsub_v1.PublisherClient()
    dlq = f"projects/{project}/topics/{sub.dead_letter_topic}"
    publisher.publish(
        dlq,
        b"{broken",
        trace_id="t-1",
        event_version="1.0",
        dgb_dead_letter_reason="malformed_json",
        dgb_source_subscription=sub.name,
        dgb_source_message_id="m-1",
    ).result(timeout=10)
    publisher.publish(dlq, b"{}", dgb_dead_letter_reason="unknown_id", dgb_recorded="1").result(timeout=10)
    subscriber = pubsub_v1.SubscriberClient()
    counts = record_from_topics(pg, subscriber, project, timeout=3)
    assert counts[sub.name] == 1
    with pg.cursor() as cur:
        cur.execute("SELECT subscription, message_key, reason, trace_id, payload, status FROM dead_letters")
        assert cur.fetchall() == [(sub.name, "m-1", "malformed_json", "t-1", "{broken", "open")]
    assert record_from_topics(pg, subscriber, project, timeout=3)[sub.name] == 0  # acked: not twice


def test_the_one_dead_letter_upsert_counts_a_repeat_reopens_it_and_keeps_the_latest_error(pg):
    """dgb.deadletters.upsert writes every dead letter (the stage runs' and the topics' recorder's):
    one row per subscription, key and reason; a repeat counts, opens it again and keeps its error."""
    from dgb.deadletters import upsert

    letter = {
        "subscription": topology.SUB_ENRICHMENT,
        "message_key": "k1",
        "message_id": "m1",
        "unique_id": None,
        "trace_id": "t-1",
        "reason": "bad_input",
        "attributes": {"a": "1"},
    }
    with db.transaction(pg) as cur:
        upsert(cur, error="the first error", payload="{}", **letter)
        cur.execute("UPDATE dead_letters SET status = 'redriven'")
    with db.transaction(pg) as cur:
        upsert(cur, error="x" * 5000, payload="another payload", **{**letter, "attributes": {"b": "2"}})
    with pg.cursor() as cur:
        cur.execute("SELECT attempts, status, error, payload, attributes FROM dead_letters")
        assert cur.fetchall() == [(2, "open", "x" * 4000, "{}", {"a": "1"})]
    pg.commit()


def test_each_article_can_be_followed_in_the_chunk_log_lines(pg, scraped, classifier, caplog):
    """Processed and skipped articles are logged one JSON line per chunk and outcome, each article's
    id beside its trace id (the operator's search of the task logs); a second run logs them as
    skipped_done, again all of them."""

    def lines():
        out = []
        for rec in caplog.records:
            if rec.name == "dgb.pipeline" and rec.getMessage().startswith("{"):
                out.append(json.loads(rec.getMessage()))
        return [e for e in out if "outcome" in e]

    with caplog.at_level("INFO", logger="dgb.pipeline"):
        run_stage(stages.EnrichStage(classifier, pg), pg, [], RunOptions(sweep_limit=100, chunk_size=2))
    processed = [e for e in lines() if e["outcome"] == "processed"]
    assert len(processed) == (len(scraped) + 1) // 2  # one line per chunk, not per article
    ids = [uid for e in processed for uid in e["unique_ids"]]
    assert sorted(ids) == sorted(scraped)
    with db.transaction(pg) as cur:
        cur.execute("SELECT unique_id, trace_id::text FROM news WHERE unique_id = ANY(%s)", (scraped,))
        traces = dict(cur.fetchall())
    for e in processed:
        assert e["stage"] == "enrich" and e["count"] == len(e["unique_ids"]) == len(e["trace_ids"])
        assert all(traces[u] == t for u, t in zip(e["unique_ids"], e["trace_ids"]))

    caplog.clear()
    with caplog.at_level("INFO", logger="dgb.pipeline"):
        run_stage(stages.EnrichStage(classifier, pg), pg, [], RunOptions(sweep_limit=0), unique_ids=scraped)
    done = [e for e in lines() if e["outcome"] == "skipped_done"]
    assert len(done) == 1 and sorted(done[0]["unique_ids"]) == sorted(scraped)
