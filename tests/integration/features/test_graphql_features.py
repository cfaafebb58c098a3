"""GraphQL `Article.features` reads news_features as the graphql-api does: one JSONB object per
article, read by ``unique_id``; its typed fields are entities (text, type, count, canonical_id,
salience), view_count, unique_sessions, trending_score, word_count, readability_flesch, and a
malformed item is dropped, not an error. Every value this pipeline writes must come through that
reading whole, with its GraphQL type."""

from __future__ import annotations

from datetime import datetime

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


def _int(v):
    return None if isinstance(v, bool) or not isinstance(v, (int, float)) else int(v)


def _float(v):
    return None if isinstance(v, bool) or not isinstance(v, (int, float)) else float(v)


def article_features(features: dict | None) -> dict | None:
    """The GraphQL type's reading of the JSONB (its documented tolerance: missing -> None,
    malformed entity items skipped)."""
    if not features:
        return None
    entities = []
    for e in features.get("entities") or []:
        if isinstance(e, dict) and e.get("text") and e.get("type"):
            entities.append(
                {
                    "text": str(e["text"]),
                    "type": str(e["type"]),
                    "count": _int(e.get("count")) or 1,
                    "canonical_id": (str(e["canonical_id"]).strip() or None)
                    if e.get("canonical_id")
                    else None,
                    "salience": _float(e.get("salience")),
                }
            )
    return {
        "entities": entities,
        **{k: _int(features.get(k)) for k in ("view_count", "unique_sessions", "word_count")},
        **{k: _float(features.get(k)) for k in ("trending_score", "readability_flesch")},
    }


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

    # the graphql-api's read: the article's JSONB by unique_id
    with pg.cursor() as cur:
        cur.execute(
            "SELECT unique_id, features FROM news_features WHERE unique_id = ANY(%s)", ([art.unique_id],)
        )
        ((uid, raw),) = cur.fetchall()
    got = article_features(raw)
    assert uid == art.unique_id
    assert got["word_count"] == len(CONTENT.split()) and isinstance(raw["word_count"], int)
    assert (
        isinstance(raw["readability_flesch"], float)
        and got["readability_flesch"] == raw["readability_flesch"]
    )
    assert (got["trending_score"], got["view_count"], got["unique_sessions"]) == (1.75, 12, 9)
    # every stored mention comes through, typed, with its canonical id
    assert len(got["entities"]) == len(raw["entities"]) >= 4
    for e in got["entities"]:
        assert e["type"] in TYPES and e["count"] >= 1 and 0.0 <= e["salience"] <= 1.0
        assert e["canonical_id"] and (
            e["canonical_id"].startswith("dgb_") or e["canonical_id"].startswith("Q")
        )
    by_text = {e["text"]: e for e in got["entities"]}
    assert (
        by_text["MEC"]["canonical_id"] == "dgb_mec" and by_text["MEC"]["count"] == 3
    )  # title, full name, acronym
    assert by_text["Brasil"]["canonical_id"] == "Q155"
    assert by_text["Camilo Santana"]["type"] == "PER" and by_text["Pé-de-Meia"]["type"] == "POLICY"
    # the sentiment the combined call gave (not a GraphQL field; the search filter's source)
    assert (
        raw["sentiment"]["label"] in ("positive", "neutral", "negative")
        and raw["sentiment_method"] == "bedrock"
    )
