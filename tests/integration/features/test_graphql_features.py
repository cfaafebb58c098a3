"""Production's GraphQL API reads the news database with its own SQL (tests/fixtures/graphql_api/
queries.sql, its text): run here against the tables the pipeline wrote after a real enrich stage.
Its ``Article.features`` type reads entities (text, type, count, canonical_id, salience), view_count,
unique_sessions, trending_score, word_count and readability_flesch from the JSONB and silently
drops a value of the wrong JSON type; so every value must come back with exactly the JSON type the
GraphQL type reads, every entity's canonical id must resolve in ``entity_registry`` through its
entity-page query, and the Article query must return the article with its themes."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from dgb import db
from dgb.agencies import load_agencies
from dgb.features.compute import FeatureComputer
from dgb.features.entities import TYPES
from dgb.features.store import merge_features
from dgb.pipeline import stages
from dgb.pipeline.runner import RunOptions, run_stage
from dgb.scraper.models import Article
from dgb.scraper.store import save_articles
from tests.support.bedrock import Sleeps

pytestmark = pytest.mark.stack

CONTENT = (
    "O Ministério da Educação (MEC) abriu nesta terça-feira as inscrições do Enem 2026. "
    "Segundo o ministro Camilo Santana, o Pé-de-Meia amplia o apoio a estudantes do Brasil. "
    "As provas serão aplicadas em novembro em todos os estados."
)


QUERIES = Path(__file__).resolve().parents[2] / "fixtures" / "graphql_api" / "queries.sql"


def graphql_api_queries() -> dict[str, str]:
    """name -> SQL of production's GraphQL API (the fixture keeps its text)."""
    out: dict[str, str] = {}
    for block in QUERIES.read_text(encoding="utf-8").split("-- name: ")[1:]:
        name, _, sql = block.partition("\n")
        out[name.strip()] = sql.strip().rstrip(";").strip()
    return out


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_float(v) -> bool:
    return isinstance(v, float)


def test_article_features_read_from_news_features(pg):
    from dgb.enrich.bedrock import BedrockClassifier
    from dgb.taxonomy import load_taxonomy, themes_rows
    from dgb_dev.bedrock_fake import AnsweringClient  # the one Bedrock fake

    db.upsert_themes(pg, themes_rows(load_taxonomy()))
    db.upsert_agencies(pg, load_agencies().values())
    art = Article(
        url="https://www.gov.br/mec/pt-br/assuntos/noticias/enem-2026",
        agency="mec",
        title="MEC abre inscrições do Enem 2026",
        content=CONTENT,
        published_at=datetime.fromisoformat("2026-05-05T09:00:00-03:00"),
    )
    save_articles(pg, "mec", "Ministério da Educação", [art])
    classifier = BedrockClassifier(client=AnsweringClient(), sleep=Sleeps(), rand=lambda: 0.0)
    stage = stages.EnrichStage(classifier, pg, features=FeatureComputer())
    assert run_stage(stage, pg, [], RunOptions(sweep_limit=10)).processed == [art.unique_id]
    with db.transaction(pg) as cur:  # the engagement jobs' keys, as they write them
        merge_features(cur, {art.unique_id: {"trending_score": 1.75, "view_count": 12, "unique_sessions": 9}})

    sql = graphql_api_queries()
    assert set(sql) == {"features_batch", "entity_registry_batch", "news_by_id"}
    with pg.cursor() as cur:
        cur.execute(sql["features_batch"], ([art.unique_id],))
        ((uid, raw),) = cur.fetchall()
        cur.execute(sql["news_by_id"], (art.unique_id,))
        news = dict(zip([c.name for c in cur.description], cur.fetchone()))
    pg.rollback()
    assert uid == art.unique_id
    # the values ArticleFeatures reads, each of the JSON type it accepts (anything else is dropped)
    assert is_int(raw["word_count"]) and raw["word_count"] == len(CONTENT.split())
    assert is_float(raw["readability_flesch"])
    assert (raw["trending_score"], raw["view_count"], raw["unique_sessions"]) == (1.75, 12, 9)
    assert is_float(raw["trending_score"]) and is_int(raw["view_count"]) and is_int(raw["unique_sessions"])
    entities = raw["entities"]
    assert len(entities) >= 4
    for e in entities:
        assert isinstance(e["text"], str) and e["text"] and e["type"] in TYPES
        assert is_int(e["count"]) and e["count"] >= 1
        assert is_float(e["salience"]) and 0.0 <= e["salience"] <= 1.0
        assert isinstance(e["canonical_id"], str) and e["canonical_id"].strip() == e["canonical_id"]
    by_text = {e["text"]: e for e in entities}
    assert (
        by_text["MEC"]["canonical_id"] == "dgb_mec" and by_text["MEC"]["count"] == 3
    )  # title, name, acronym
    assert by_text["Brasil"]["canonical_id"] == "Q155"
    assert by_text["Camilo Santana"]["type"] == "PER" and by_text["Pé-de-Meia"]["type"] == "POLICY"
    # the entity pages: every canonical id is a registry row of the same type
    ids = sorted({e["canonical_id"] for e in entities})
    with pg.cursor() as cur:
        cur.execute(sql["entity_registry_batch"], (ids,))
        registry = {row[0]: row for row in cur.fetchall()}
    pg.rollback()
    assert set(registry) == set(ids)
    for e in entities:
        assert registry[e["canonical_id"]][2] == e["type"]
    assert registry["dgb_mec"][7] == "mec"  # an agency's entity links to its agency
    # the Article query: the article, its themes and the same features object
    assert news["title"] == art.title and news["theme_l1_code"] and news["most_specific_theme_code"]
    assert news["features"] == raw
    # the sentiment the combined call gave (not a GraphQL field; the search filter's source): the
    # fake answers the lexicon's reading of the article, favourable here ("amplia o apoio")
    assert raw["sentiment"]["label"] == "positive" and raw["sentiment"]["score"] > 0.2
    assert raw["sentiment_method"] == "bedrock"
