"""news_features (migration 0014): keys merged, never replaced; rows follow their article."""

from __future__ import annotations

import psycopg
import pytest

from dgb import db
from dgb.features import store
from tests.support import news

pytestmark = pytest.mark.stack


def test_merge_keeps_other_keys_and_overwrites_its_own(pg):
    news.add(pg, "a1")
    with db.transaction(pg) as cur:
        assert store.merge_features(cur, {"a1": {"word_count": 3, "trending_score": 1.5}}) == 1
    with db.transaction(pg) as cur:
        store.merge_features(cur, {"a1": {"word_count": 7, "sentiment": {"label": "neutral", "score": 0.0}}})
        store.merge_features(cur, {"a1": {}})  # nothing to write: no change
    with db.transaction(pg) as cur:
        got = store.read_features(cur, ["a1", "unknown"])
        cur.execute("SELECT updated_at > now() - interval '1 minute' FROM news_features")
        fresh = cur.fetchone()[0]
    assert got == {
        "a1": {"word_count": 7, "trending_score": 1.5, "sentiment": {"label": "neutral", "score": 0.0}}
    }
    assert fresh
    with db.transaction(pg) as cur:
        store.remove_keys(cur, ["a1"], ["trending_score"])
        assert store.read_features(cur, ["a1"])["a1"] == {
            "word_count": 7,
            "sentiment": {"label": "neutral", "score": 0.0},
        }


def test_a_row_needs_its_article_and_goes_with_it(pg):
    news.add(pg, "a2")
    with db.transaction(pg) as cur:
        store.merge_features(cur, {"a2": {"word_count": 1}})
    with pytest.raises(psycopg.errors.ForeignKeyViolation), db.transaction(pg) as cur:
        store.merge_features(cur, {"nope": {"word_count": 1}})
    with db.transaction(pg) as cur:
        cur.execute("DELETE FROM news WHERE unique_id = 'a2'")
        cur.execute("SELECT count(*) FROM news_features")
        assert cur.fetchone()[0] == 0


def test_entity_tables_exist_in_productions_layout(pg):
    with db.transaction(pg) as cur:
        cur.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_name IN ('entity_registry', 'entity_alias', 'news_entities')"
            " ORDER BY table_name, ordinal_position"
        )
        cols: dict[str, list[str]] = {}
        for t, c in cur.fetchall():
            cols.setdefault(t, []).append(c)
    assert cols["entity_alias"] == ["alias_norm", "type", "entity_id", "source", "confidence", "created_at"]
    assert cols["news_entities"] == ["unique_id", "entity_id", "type", "count", "salience", "published_at"]
    assert cols["entity_registry"][:4] == ["entity_id", "canonical_name", "type", "aliases"]


def test_merge_can_drop_keys_that_no_longer_apply(pg):
    news.add(pg, "a3")
    with db.transaction(pg) as cur:
        store.merge_features(cur, {"a3": {"readability_flesch": 40.0, "view_count": 3}})
        store.merge_features(cur, {"a3": {"word_count": 4}}, drop=["readability_flesch", "absent_key"])
        assert store.read_features(cur, ["a3"])["a3"] == {"view_count": 3, "word_count": 4}
