"""`dgb features backfill [--since DATE] [--limit N]`: articles enriched before features existed
get theirs in batches, resumably; production's own keys stay; Bedrock's NER calls are billed in
the ledger; the index stage re-indexes what it changed."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from dgb import cli, db
from dgb.agencies import load_agencies
from dgb.enrich.bedrock import BedrockClassifier
from dgb.features import backfill
from dgb.features.bedrock_ner import BedrockNer
from dgb.features.compute import FeatureComputer
from dgb.features.store import merge_features, read_features
from dgb.scraper.models import Article
from dgb.scraper.store import save_articles
from dgb_dev.bedrock_fake import AnsweringClient  # the one Bedrock fake
from tests.support.bedrock import Sleeps

pytestmark = pytest.mark.stack

NEWS = Path(__file__).resolve().parents[2] / "fixtures" / "classifier" / "real_news.jsonl"
DAY0 = datetime.fromisoformat("2026-03-01T10:00:00-03:00")


@pytest.fixture
def adopted(pg):
    """Six real articles enriched by "production", one of them with production's LLM features."""
    db.upsert_agencies(pg, load_agencies().values())
    rows = [json.loads(line) for line in NEWS.read_text(encoding="utf-8").splitlines()]
    arts = [
        Article(
            url=f"https://www.gov.br/mec/pt-br/assuntos/noticias/adopted-{i}",
            agency="mec",
            title=r["title"],
            content=r["content"],
            published_at=DAY0 + timedelta(days=i),
        )
        for i, r in enumerate(rows)
    ]
    save_articles(pg, "mec", "Ministério da Educação", arts)
    with db.transaction(pg) as cur:
        cur.execute("UPDATE news SET enriched_at = now(), classifier = 'production'")
        merge_features(
            cur,
            {
                arts[0].unique_id: {
                    "sentiment": {"label": "negative", "score": -0.8},
                    "entities": [{"text": "Daniel Vorcaro", "type": "PER", "count": 2}],
                    "has_image": False,
                }
            },
        )
    return pg, arts


def _rows(pg, sql, *args):
    with pg.cursor() as cur:
        cur.execute(sql, args or None)
        return cur.fetchall()


def test_backfill_in_batches_resumes_and_keeps_productions_keys(adopted):
    pg, arts = adopted
    versions = dict(_rows(pg, "SELECT unique_id, version FROM news"))
    seen = []
    first = backfill.run(pg, FeatureComputer(), limit=2, batch=1, progress=lambda r: seen.append(r.done))
    assert (first.todo, first.done, first.batches) == (2, 2, 2) and seen == [1, 2]
    with pg.cursor() as cur:
        feats = read_features(cur, [a.unique_id for a in arts])
    done = {uid for uid, f in feats.items() if "features_computed_at" in f}
    assert done == {arts[5].unique_id, arts[4].unique_id}  # newest first

    rest = backfill.run(pg, FeatureComputer(), batch=3)
    assert (rest.todo, rest.done) == (4, 4)
    assert backfill.run(pg, FeatureComputer()).todo == 0  # nothing left: a rerun is a no-op
    with pg.cursor() as cur:
        feats = read_features(cur, [a.unique_id for a in arts])
    assert all("features_computed_at" in f and f["word_count"] > 0 for f in feats.values())
    # production's LLM sentiment and entities and its other keys stay; missing keys are filled
    kept = feats[arts[0].unique_id]
    assert kept["sentiment"] == {"label": "negative", "score": -0.8} and "sentiment_method" not in kept
    assert kept["entities"] == [{"text": "Daniel Vorcaro", "type": "PER", "count": 2}]
    assert kept["has_image"] is False and kept["word_count"] == len(
        json.loads(NEWS.read_text(encoding="utf-8").splitlines()[0])["content"].split()
    )
    # every backfilled article is pending for the index stage again (its version moved on)
    after = dict(_rows(pg, "SELECT unique_id, version FROM news"))
    assert all(after[uid] == versions[uid] + 1 for uid in versions)
    assert _rows(pg, "SELECT count(*) FROM news_entities WHERE unique_id = %s", arts[1].unique_id)[0][0] > 0


def test_since_limits_the_articles_and_the_cli_reports(adopted, capsys):
    pg, arts = adopted
    since = (DAY0 + timedelta(days=4)).date().isoformat()
    assert cli.main(["features", "backfill", "--since", since]) == 0
    out, err = capsys.readouterr()
    assert out.strip().startswith("features backfill: 2 articles in 1 batches")
    assert "features backfill: 2/2 articles (100.0%)" in err
    with pg.cursor() as cur:
        feats = read_features(cur, [a.unique_id for a in arts])
    assert {uid for uid, f in feats.items() if "features_computed_at" in f} == {
        arts[4].unique_id,
        arts[5].unique_id,
    }
    assert cli.main(["features", "backfill", "--limit", "1"]) == 0
    assert capsys.readouterr().out.strip().endswith("3 left")


def test_bedrock_ner_in_the_backfill_is_billed_in_the_ledger(adopted):
    pg, arts = adopted
    client = AnsweringClient()
    ner = BedrockNer(BedrockClassifier(client=client, sleep=Sleeps(), rand=lambda: 0.0), model_id="ner-model")
    result = backfill.run(pg, FeatureComputer(ner), batch=4)
    assert result.done == len(arts) and result.bedrock_calls == len(arts) == len(client.requests)
    assert _rows(pg, "SELECT model_id, calls FROM llm_usage_daily") == [("ner-model", len(arts))]
    with pg.cursor() as cur:
        feats = read_features(cur, [a.unique_id for a in arts])
    assert feats[arts[1].unique_id]["entities_method"] == "bedrock"


def test_rows_of_an_older_version_are_recomputed_and_llm_answers_kept(adopted):
    """Rows this pipeline computed with an older version (readability on the raw markdown, the
    prefix lexicon) are recomputed; a Bedrock sentiment and production's LLM keys stay; the
    sentiment comes from the classifier's head when one is given."""
    pg, arts = adopted
    old = {"features_computed_at": "2026-11-01T00:00:00+00:00", "readability_flesch": -26.0}
    with db.transaction(pg) as cur:
        merge_features(
            cur,
            {
                arts[1].unique_id: {
                    **old,
                    "sentiment": {"label": "negative", "score": -0.3},
                    "sentiment_method": "lexicon-pt-1",
                },
                arts[2].unique_id: {
                    **old,
                    "sentiment": {"label": "positive", "score": 0.6},
                    "sentiment_method": "bedrock",
                },
            },
        )
    asked = []

    def head(items):
        asked.extend(i.unique_id for i in items)
        return [{"label": "neutral", "score": 0.05, "method": "local-head-1"} for _ in items]

    result = backfill.run(pg, FeatureComputer(), batch=10, sentiments=head)
    assert result.done == len(arts) and sorted(asked) == sorted(a.unique_id for a in arts)
    with pg.cursor() as cur:
        feats = read_features(cur, [a.unique_id for a in arts])
    from dgb.features.compute import FEATURES_VERSION
    from dgb.features.reading import reading_features

    assert all(f["features_version"] == FEATURES_VERSION for f in feats.values())
    rows = [json.loads(line) for line in NEWS.read_text(encoding="utf-8").splitlines()]
    redone = feats[arts[1].unique_id]
    assert redone["readability_flesch"] == reading_features(rows[1]["content"])["readability_flesch"] != -26.0
    assert (redone["sentiment"], redone["sentiment_method"]) == (
        {"label": "neutral", "score": 0.05},
        "local-head-1",
    )
    assert feats[arts[2].unique_id]["sentiment"] == {"label": "positive", "score": 0.6}  # Bedrock's stays
    assert feats[arts[2].unique_id]["sentiment_method"] == "bedrock"
    assert feats[arts[0].unique_id]["sentiment"] == {"label": "negative", "score": -0.8}  # production's
    assert backfill.run(pg, FeatureComputer(), sentiments=head).todo == 0  # resumable: nothing left
