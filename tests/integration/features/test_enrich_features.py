"""Features on the event path: the enrich stage (run by the one stage mechanism) writes each new
and each edited article's features to news_features with its classification, canonical ids to
production's entity tables, Bedrock's NER and combined calls to the same ledger; a malformed
answer is a clear failure that loses no article. Bedrock is the one fake (in-process client)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from dgb import db
from dgb.agencies import load_agencies
from dgb.enrich.bedrock import BedrockClassifier
from dgb.features import reading
from dgb.features.bedrock_ner import BedrockNer
from dgb.features.compute import FeatureComputer
from dgb.features.store import merge_features, read_features
from dgb.pipeline import stages
from dgb.pipeline.runner import RunOptions, run_stage
from dgb.scraper.models import Article
from dgb.scraper.store import save_articles
from dgb.taxonomy import load_taxonomy, themes_rows
from dgb_dev.bedrock_fake import AnsweringClient  # the one Bedrock fake
from tests.support.bedrock import Sleeps, recorded

pytestmark = pytest.mark.stack

NEWS = Path(__file__).resolve().parents[2] / "fixtures" / "classifier" / "real_news.jsonl"


def _real_articles() -> list[Article]:
    rows = [json.loads(line) for line in NEWS.read_text(encoding="utf-8").splitlines()]
    return [
        Article(
            url=f"https://www.gov.br/mec/pt-br/assuntos/noticias/real-{i}",
            agency="mec",
            title=r["title"],
            content=r["content"],
            published_at=datetime.fromisoformat("2026-03-04T10:00:00-03:00"),
        )
        for i, r in enumerate(rows)
    ]


@pytest.fixture
def loaded(pg):
    db.upsert_themes(pg, themes_rows(load_taxonomy()))
    db.upsert_agencies(pg, load_agencies().values())
    articles = _real_articles()
    save_articles(pg, "mec", "Ministério da Educação", articles)
    return pg, articles


class _Client(AnsweringClient):
    """The fake's answers, except a malformed one for the article whose title holds ``broken``."""

    def __init__(self, broken: str | None = None):
        super().__init__()
        self.broken = broken

    def converse(self, **kwargs):
        text = kwargs["messages"][0]["content"][0]["text"]
        if self.broken and self.broken in text:
            self.requests.append(kwargs)
            return recorded("combined_malformed")
        reply = super().converse(**kwargs)
        self.replies.append((text, json.loads(reply["output"]["message"]["content"][0]["text"])))
        return reply

    @property
    def replies(self) -> list[tuple[str, dict]]:
        """(the request's text, the answer's JSON) of every call answered."""
        return self.__dict__.setdefault("_replies", [])

    def sentiment_for(self, title: str) -> dict:
        """The sentiment the fake answered for the article with ``title``."""
        return next(
            answer["sentiment"] for text, answer in self.replies if title in text and "sentiment" in answer
        )


def _stage(pg, client, ner: bool) -> stages.EnrichStage:
    classifier = BedrockClassifier(client=client, sleep=Sleeps(), rand=lambda: 0.0)
    computer = FeatureComputer(BedrockNer(classifier, model_id="ner-model") if ner else None)
    return stages.EnrichStage(classifier, pg, features=computer)


def _rows(pg, sql, *args):
    with pg.cursor() as cur:
        cur.execute(sql, args or None)
        return cur.fetchall()


def test_new_articles_get_their_features_with_their_classification(loaded):
    pg, articles = loaded
    client = _Client()
    report = run_stage(_stage(pg, client, ner=False), pg, [], RunOptions(sweep_limit=100))
    assert len(report.processed) == len(articles)
    with pg.cursor() as cur:
        feats = read_features(cur, [a.unique_id for a in articles])
    assert set(feats) == {a.unique_id for a in articles}
    for a in articles:
        f = feats[a.unique_id]
        assert f["word_count"] == len(a.content.split())
        assert f["readability_flesch"] == reading.reading_features(a.content)["readability_flesch"]
        assert f["sentiment"] == client.sentiment_for(a.title)  # the combined call's answer, stored
        assert f["sentiment_method"] == "bedrock" and f["entities_method"] == "rules-pt-1"
        assert all(m["canonical_id"] and m["count"] >= 1 and 0 <= m["salience"] <= 1 for m in f["entities"])
    anvisa = next(a for a in articles if a.title.startswith("Anvisa"))
    assert feats[anvisa.unique_id]["entities"][0]["canonical_id"] == "dgb_anvisa"
    # the agency's id is registered with its catalogue key; every canonical id of a mention is
    # in the registry and in news_entities
    assert _rows(pg, "SELECT agency_key, type FROM entity_registry WHERE entity_id = 'dgb_anvisa'") == [
        ("anvisa", "ORG")
    ]
    ids = {m["canonical_id"] for f in feats.values() for m in f["entities"]}
    assert {r[0] for r in _rows(pg, "SELECT entity_id FROM news_entities")} == ids
    assert _rows(pg, "SELECT count(*) FROM entity_registry WHERE entity_id = ANY(%s)", list(ids)) == [
        (len(ids),)
    ]
    # classification calls only (NER offline): one per article in the ledger
    assert _rows(pg, "SELECT sum(calls) FROM llm_usage_daily") == [(len(articles),)]


def test_an_edit_recomputes_and_keeps_other_jobs_keys(loaded):
    pg, articles = loaded
    run_stage(_stage(pg, _Client(), ner=False), pg, [], RunOptions(sweep_limit=100))
    a = articles[1]
    with db.transaction(pg) as cur:
        merge_features(cur, {a.unique_id: {"trending_score": 2.5, "view_count": 7}})
    edited = Article(
        url=a.url, agency="mec", title=a.title, content="Texto curto.", published_at=a.published_at
    )
    assert save_articles(pg, "mec", "Ministério da Educação", [edited]).updated == [a.unique_id]
    report = run_stage(_stage(pg, _Client(), ner=False), pg, [], RunOptions(sweep_limit=100))
    assert report.processed == [a.unique_id]
    with pg.cursor() as cur:
        f = read_features(cur, [a.unique_id])[a.unique_id]
    assert f["word_count"] == 2
    assert "readability_flesch" not in f  # under 10 words now: the stale figure is gone
    assert f["trending_score"] == 2.5 and f["view_count"] == 7  # the engagement jobs' keys stay
    # only the title names the agency now: one mention, one news_entities row, counts recomputed
    assert [(m["text"], m["count"]) for m in f["entities"]] == [("Anvisa", 1)]
    assert _rows(pg, "SELECT entity_id, count FROM news_entities WHERE unique_id = %s", a.unique_id) == [
        ("dgb_anvisa", 1)
    ]


def test_bedrock_ner_call_goes_to_the_same_ledger(loaded):
    pg, articles = loaded
    client = _Client()
    report = run_stage(_stage(pg, client, ner=True), pg, [], RunOptions(sweep_limit=100))
    assert len(report.processed) == len(articles)
    ner_calls = [r for r in client.requests if r["modelId"] == "ner-model"]
    assert len(ner_calls) == len(articles) and all(
        r["inferenceConfig"]["temperature"] == 0.0 for r in ner_calls
    )
    usage = dict(_rows(pg, "SELECT model_id, calls FROM llm_usage_daily"))
    assert usage["ner-model"] == len(articles) and sum(usage.values()) == 2 * len(articles)
    with pg.cursor() as cur:
        feats = read_features(cur, [a.unique_id for a in articles])
    assert {f["entities_method"] for f in feats.values()} == {"bedrock"}
    assert _rows(pg, "SELECT count(*) FROM entity_registry WHERE provenance = 'llm'")[0][0] > 0


def test_a_malformed_answer_dead_letters_that_article_only(loaded):
    pg, articles = loaded
    broken = articles[2]
    report = run_stage(
        _stage(pg, _Client(broken=broken.title), ner=False), pg, [], RunOptions(sweep_limit=100)
    )
    assert [uid for uid, _ in report.dead_lettered] == [broken.unique_id]
    assert "malformed_llm_output" in report.dead_lettered[0][1]
    assert len(report.processed) == len(articles) - 1
    # the article is still there, unenriched and without features; its dead letter says why
    assert _rows(pg, "SELECT enriched_at FROM news WHERE unique_id = %s", broken.unique_id) == [(None,)]
    assert _rows(pg, "SELECT count(*) FROM news_features WHERE unique_id = %s", broken.unique_id) == [(0,)]
    assert _rows(pg, "SELECT count(*) FROM news_features") == [(len(articles) - 1,)]
