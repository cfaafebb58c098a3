"""Each stage defined once (dgb.pipeline.definitions): the stage run's sweep, `dgb status` and
reconciliation read the same rules, against the real PostgreSQL; the registry the operator builds from."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from dgb import db
from dgb.cli import main
from dgb.observe.status import pipeline_status
from dgb.pipeline import definitions, stages
from dgb.pipeline.runner import RunOptions, run_stage
from dgb.reconcile.stuck import Thresholds, find_stuck

pytestmark = pytest.mark.stack

OLD_MODEL = "an-older-model"
DIM = 512
T = Thresholds(enrich_s=600, embed_s=600, index_s=600, outbox_s=300)


@pytest.fixture(scope="module")
def embedder():
    from dgb.embed.model import load_model

    return load_model("use-multilingual-v3", DIM)


def _article(cur, uid: str, *, model: str | None, age: timedelta = timedelta(hours=2)) -> None:
    """An enriched, indexed article; embedded by ``model`` (None: not embedded yet)."""
    when = datetime.now(UTC) - age
    cur.execute(
        "INSERT INTO news (unique_id, agency_key, title, url, published_at, content, summary, trace_id,"
        " version, scraped_at, enriched_at, updated_at, indexed_version, indexed_at)"
        " VALUES (%s, 'mec', %s, %s, %s, 'Texto da notícia.', 'Resumo.', %s, 3, %s, %s, %s, 3, %s)",
        (
            uid,
            f"Notícia {uid}",
            f"https://www.gov.br/mec/{uid}",
            when,
            str(uuid.uuid4()),
            when,
            when,
            when,
            when,
        ),
    )
    if model is not None:
        cur.execute(
            "UPDATE news SET content_embedding = %s, embedding_model = %s, embedding_dim = %s,"
            " embedded_at = %s WHERE unique_id = %s",
            ([0.1] * DIM, model, DIM, when, uid),
        )


def _pending(conn, stage: str, model: str | None) -> set[str]:
    d = definitions.definition(stage)
    with conn.cursor() as cur:
        cur.execute(f"SELECT unique_id FROM news WHERE {d.pending}", definitions.params(model))
        out = {r[0] for r in cur.fetchall()}
    conn.commit()
    return out


def test_a_vector_of_an_older_model_is_pending_for_embed_in_the_sweep_the_status_and_reconcile(
    pg, embedder, monkeypatch, capsys
):
    current = embedder.name
    monkeypatch.setenv("DGB_EMBEDDING_MODEL", current)
    with db.transaction(pg) as cur:
        _article(cur, "old-model", model=OLD_MODEL)
        _article(cur, "not-embedded", model=None)
        _article(cur, "current-model", model=current)
    want = {"old-model", "not-embedded"}

    # dgb status (the CLI passes DGB_EMBEDDING_MODEL): both count in the embed backlog
    assert main(["status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["backlog"]["embed"]["pending"] == 2
    assert status["backlog"]["embed"]["oldest_age_s"] >= 7000
    # model=None: a vector of any model counts as embedded
    assert pipeline_status(pg)["backlog"]["embed"]["pending"] == 1
    # reconciliation: both are stuck before embed (the same rule, beyond the threshold)
    found = find_stuck(pg, datetime.now(UTC), T, model=current)
    assert {s.unique_id for s in found.embed} == want and found.enrich == [] and found.index == []
    any_model = find_stuck(pg, datetime.now(UTC), T, model=None)
    assert {s.unique_id for s in any_model.embed} == {"not-embedded"}

    # the stage run: its sweep takes both up and re-embeds the older model's vector
    stage = stages.EmbedStage(embedder, current)
    assert _pending(pg, "embed", current) == want
    report = run_stage(stage, pg, [], RunOptions(sweep_limit=10))
    assert report.swept == 2 and sorted(report.processed) == sorted(want)
    with pg.cursor() as cur:
        cur.execute("SELECT unique_id, embedding_model, embedding_dim FROM news ORDER BY unique_id")
        assert cur.fetchall() == [
            ("current-model", current, DIM),
            ("not-embedded", current, DIM),
            ("old-model", current, DIM),
        ]
    pg.commit()

    # now no consumer sees embed work; the new vectors made the articles pending for index
    assert run_stage(stage, pg, [], RunOptions(sweep_limit=10)).swept == 0
    assert main(["status", "--json"]) == 0
    backlog = json.loads(capsys.readouterr().out)["backlog"]
    assert backlog["embed"]["pending"] == 0 and backlog["index"]["pending"] == 2
    assert find_stuck(pg, datetime.now(UTC) + timedelta(hours=1), T, model=current).embed == []
    assert _pending(pg, "index", current) == want


def test_a_message_for_an_article_embedded_by_another_model_is_not_skipped_as_done(pg, embedder):
    """The stage's idempotency check is the same ``done`` rule: an older model's vector is not done."""
    from dgb import events, topology
    from dgb.pipeline.messages import InMessage

    with db.transaction(pg) as cur:
        _article(cur, "old-model", model=OLD_MODEL)
        _article(cur, "current-model", model=embedder.name)
    msgs = []
    for uid in ("old-model", "current-model"):
        ev = events.make_event(
            topology.TOPIC_ENRICHED,
            {
                "unique_id": uid,
                "enriched_at": "2026-01-01T00:00:00+00:00",
                "most_specific_theme_code": None,
                "has_summary": True,
            },
        )
        msgs.append(InMessage(topology.SUB_EMBEDDINGS, uid, ev.data(), ev.attributes))
    report = run_stage(stages.EmbedStage(embedder, embedder.name), pg, msgs, RunOptions(sweep_limit=0))
    assert report.processed == ["old-model"] and report.skipped == ["current-model"]


def test_every_rule_is_two_valued_so_not_is_its_complement(pg):
    """A rule that could yield NULL would drop rows from both a rule and its negation."""
    with db.transaction(pg) as cur:
        cur.execute(
            "INSERT INTO news (unique_id, agency_key, title, url, published_at, scraped_at, version)"
            " VALUES ('bare', 'mec', 't', 'https://x/bare', now(), now(), 1)"
        )
        _article(cur, "embedded", model=OLD_MODEL)
        _article(cur, "unembedded", model=None)
        cur.execute(
            "UPDATE news SET removed_at = now(), indexed_version = NULL WHERE unique_id = 'unembedded'"
        )
    for model in (None, OLD_MODEL, "another"):
        for d in definitions.DEFINITIONS.values():
            for rule in (d.ready, d.done, d.pending):
                with pg.cursor() as cur:
                    cur.execute(
                        f"SELECT count(*) FILTER (WHERE {rule}),"
                        f" count(*) FILTER (WHERE NOT ({rule})), count(*) FROM news",
                        definitions.params(model),
                    )
                    yes, no, total = cur.fetchone()
                assert yes + no == total == 3, (d.name, rule, model)
        with pg.cursor() as cur:
            cur.execute(
                f"SELECT unique_id FROM news WHERE {definitions.complete()}", definitions.params(model)
            )
            complete = {r[0] for r in cur.fetchall()}
        pending_somewhere = set().union(*(_pending(pg, name, model) for name in definitions.DEFINITIONS))
        assert complete == {"bare", "embedded", "unembedded"} - pending_somewhere
    pg.commit()


def test_searchable_is_the_index_stage_done_rule_and_status_and_the_view_count_by_it(pg):
    """One "searchable" rule (definitions.SEARCHABLE, the index stage's done rule on an article in
    the index): two-valued, and exactly the articles `dgb status` and the pipeline view's latency
    history measure."""
    from dgb.observe.overview import latency_history

    with db.transaction(pg) as cur:
        _article(cur, "searchable", model=OLD_MODEL, age=timedelta(minutes=30))
        _article(cur, "stale", model=OLD_MODEL, age=timedelta(minutes=30))
        _article(cur, "deleted", model=OLD_MODEL, age=timedelta(minutes=30))
        _article(cur, "never", model=None, age=timedelta(minutes=30))
        cur.execute("UPDATE news SET version = 4 WHERE unique_id = 'stale'")
        cur.execute("UPDATE news SET removed_at = now(), indexed_at = NULL WHERE unique_id = 'deleted'")
        cur.execute("UPDATE news SET indexed_version = NULL, indexed_at = NULL WHERE unique_id = 'never'")
    assert definitions.INDEX.done in definitions.SEARCHABLE
    with pg.cursor() as cur:
        cur.execute(
            f"SELECT unique_id FROM news WHERE {definitions.SEARCHABLE}"
            f" UNION ALL SELECT '-' || unique_id FROM news WHERE NOT ({definitions.SEARCHABLE})"
        )
        assert sorted(r[0] for r in cur.fetchall()) == ["-deleted", "-never", "-stale", "searchable"]
    pg.commit()
    assert pipeline_status(pg)["latency_sample"] == 1
    assert sum(h["articles"] for h in latency_history(pg, hours=2)) == 1


def test_the_registry_builds_each_stage_with_only_what_it_needs(pg, settings, embedder):
    asked: list[str] = []

    def give_embedder():
        asked.append("embedder")
        return embedder

    def give_typesense():
        asked.append("typesense")
        from dgb.search import schema

        return schema.client(settings)

    deps = stages.Dependencies(embedder=give_embedder, typesense=give_typesense)
    assert list(stages.STAGES) == list(definitions.DEFINITIONS)

    embed = stages.build("embed", pg, settings, deps)
    assert isinstance(embed, stages.EmbedStage) and embed.model == settings.embedding_model
    assert asked == ["embedder"]
    index = stages.build("index", pg, settings, deps)
    assert isinstance(index, stages.IndexStage) and index.alias == settings.typesense_collection
    assert index.dim == settings.embedding_dim and asked == ["embedder", "typesense"]
    for name, cls in stages.STAGES.items():
        assert cls.definition is definitions.definition(name)
        assert (cls.name, cls.subscriptions, cls.next_topic, cls.sweep_order) == (
            name,
            cls.definition.subscriptions,
            cls.definition.next_topic,
            cls.definition.since,
        )
    with pytest.raises(ValueError, match="unknown stage 'nope'"):
        stages.build("nope", pg, settings, deps)
    with pytest.raises(ValueError, match="unknown stage"):
        definitions.definition("nope")


def test_the_stage_operator_builds_from_the_registry(pg, settings):
    from dgb_airflow.operators.stage import StageOperator

    index = StageOperator(task_id="index", stage="index")._build(pg)
    assert isinstance(index, stages.IndexStage) and index.alias == settings.typesense_collection
    embed = StageOperator(task_id="embed", stage="embed")._build(pg)  # the model service client, not called
    assert isinstance(embed, stages.EmbedStage) and embed.model_name == settings.embedding_model
    with pytest.raises(ValueError, match="unknown stage 'rank'"):
        StageOperator(task_id="rank", stage="rank")._build(pg)
