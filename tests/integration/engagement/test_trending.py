"""Trending scores (dgb.engagement.trending) on PostgreSQL and Typesense: the SQL agrees with the
formula, every changed score reaches the index in the same run as a partial update, scores expire
24 hours after publication, and a failed push is repaired by the next run."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from dgb.engagement import trending
from dgb.engagement.formula import MIN_DAY, trending_score
from dgb.search import schema
from dgb.search.sync import IndexUnavailable
from tests.support.engagement import add_article, document, ensure_themes, features, index, make_index

H = timedelta(hours=1)

# the mechanics below use small themes: production's formula alone (the minimum has its own test)
pytestmark = pytest.mark.usefixtures("production_trending_formula")


@pytest.fixture
def now(pg):
    """PostgreSQL's clock, whole seconds (the reference time of the runs and the articles)."""
    with pg.cursor() as cur:
        cur.execute("SELECT date_trunc('second', now())")
        value = cur.fetchone()[0]
    pg.rollback()
    return value


@pytest.fixture
def idx(pg, typesense_server):
    ensure_themes(pg)
    ts, alias, cleanup = make_index(typesense_server)
    yield ts, alias
    cleanup()


def expected_scores(rows: list[tuple[str, datetime, str | None, bool]], now: datetime) -> dict[str, float]:
    """The formula applied by counting in Python: every live, themed, non-removed article."""
    kept = [(uid, t, theme) for uid, t, theme, removed in rows if theme and not removed and t <= now]
    out = {}
    for uid, t, theme in kept:
        if t <= now - 24 * H:
            continue
        day = sum(1 for _, u, th in kept if th == theme and t - 24 * H <= u <= t)
        week = sum(1 for _, u, th in kept if th == theme and t - 7 * 24 * H <= u <= t)
        out[uid] = trending_score(day, week)
    return out


def test_sql_scores_equal_the_formula_theme_by_theme(pg, idx, now):
    ts, alias = idx
    rnd = random.Random(24)
    rows = []
    for i in range(160):
        theme = rnd.choice(["01", "02", "03", None])
        # half in the last 30 hours, the rest over 9 days; a few in the future (a wrong date)
        t = now - timedelta(seconds=rnd.randint(-3600, rnd.choice([30 * 3600, 9 * 86400])))
        rows.append((f"art-{i:03d}", t, theme, rnd.random() < 0.05))
    # ties (the same second) and the exact 24-hour and 7-day edges of one article's windows
    edge = now - 2 * H
    rows += [
        ("tie-a", edge, "01", False),
        ("tie-b", edge, "01", False),
        ("edge-day", edge - 24 * H, "01", False),
        ("edge-week", edge - 7 * 24 * H, "01", False),
    ]
    for uid, t, theme, removed in rows:
        add_article(pg, uid, t, theme, removed=removed)
    want = expected_scores(rows, now)
    assert len(want) > 20 and len({round(v, 3) for v in want.values()}) > 5  # a real spread

    out = trending.run(pg, ts, alias, now=now)

    stored = {uid: float(v) for uid, v in features(pg, "trending_score").items()}
    assert stored == want
    assert out["live"] == len(want) and out["changed"] == len(want) and out["expired"] == 0
    # the two articles of the same second count each other; the edges are inside the windows
    assert stored["tie-a"] == stored["tie-b"]
    assert not any(uid.startswith("edge") for uid in stored)  # older than 24 h: never live here


def test_busy_theme_scores_above_a_quiet_one_and_em_alta_reaches_the_index(pg, idx, now):
    ts, alias = idx
    # theme 01: 1 article a day for a week, then 6 in the last 12 hours (busy today)
    # theme 02: 2 articles a day, steady
    for d in range(1, 8):
        add_article(pg, f"busy-old-{d}", now - d * 24 * H - 3 * H, "01")
        add_article(pg, f"steady-{d}a", now - d * 24 * H - H, "02")
        add_article(pg, f"steady-{d}b", now - d * 24 * H - 5 * H, "02")
    busy = [f"busy-{k}" for k in range(6)]
    for k, uid in enumerate(busy):
        add_article(pg, uid, now - (12 - 2 * k) * H, "01")
    add_article(pg, "steady-today", now - 3 * H, "02")
    ids = busy + ["steady-today"] + [f"busy-old-{d}" for d in range(1, 8)]
    index(pg, ts, alias, ids)
    before = document(ts, alias, "busy-5")

    out = trending.run(pg, ts, alias, now=now)

    assert out["updated"] == len(busy) + 1 and out["failed"] == 0
    last = document(ts, alias, "busy-5")
    # 6 in its day, 6 + 6 in its week: 6 / (12 / 7)
    assert last["trending_score"] == trending_score(6, 12) == 3.5
    # 2 in its day, 14 in its week: the theme's usual pace
    assert document(ts, alias, "steady-today")["trending_score"] == 1.0
    # the partial update left every other field as the whole upsert wrote it
    assert {k: v for k, v in last.items() if k != "trending_score"} == before
    # the portal's "Em alta" sort and badge: today's busy theme first
    res = ts.collections[alias].documents.search(
        {"q": "*", "sort_by": "trending_score:desc", "filter_by": "trending_score:>=1.5", "per_page": 50}
    )
    assert {h["document"]["unique_id"] for h in res["hits"]} <= set(busy)
    assert res["hits"][0]["document"]["theme_1_level_1_code"] == "01"


def test_only_changed_scores_are_written_and_a_new_article_moves_its_neighbours(pg, idx, now):
    ts, alias = idx
    add_article(pg, "b-1", now - 72 * H, "05")
    add_article(pg, "b-2", now - 96 * H, "05")
    for k in range(4):
        add_article(pg, f"a-{k}", now - (20 - k) * H, "05")
    index(pg, ts, alias, [f"a-{k}" for k in range(4)])
    first = trending.run(pg, ts, alias, now=now)
    assert first["changed"] == 4

    again = trending.run(pg, ts, alias, now=now)
    assert again["changed"] == 0 and again["changed_ids"] == []

    # a late article, published before a-2 and a-3: their windows hold one more article
    add_article(pg, "late", now - 18.5 * H, "05")
    index(pg, ts, alias, ["late"])
    moved = trending.run(pg, ts, alias, now=now)
    assert moved["changed_ids"] == ["a-2", "a-3", "late"]
    assert document(ts, alias, "a-3")["trending_score"] == trending_score(5, 7) == 5.0
    assert document(ts, alias, "a-0")["trending_score"] == trending_score(1, 3) == 2.333
    with pg.cursor() as cur:
        cur.execute("SELECT kind, status, figures ->> 'changed' FROM engagement_runs ORDER BY id")
        assert cur.fetchall() == [("trending", "ok", "4"), ("trending", "ok", "0"), ("trending", "ok", "3")]


def test_scores_turn_0_when_the_article_is_24_hours_old(pg, idx, now):
    ts, alias = idx
    add_article(pg, "old-0", now - 30 * H, "07")
    add_article(pg, "fresh-0", now - 20 * H, "07")
    add_article(pg, "fresh-1", now - 2 * H, "07")
    index(pg, ts, alias, ["old-0", "fresh-0", "fresh-1"])
    trending.run(pg, ts, alias, now=now)
    # fresh-0: old-0 and itself in its day and week; fresh-1: 2 in its day, 3 in its week
    assert features(pg, "trending_score") == {"fresh-0": 7.0, "fresh-1": 4.667}
    assert "trending_score" not in document(ts, alias, "old-0")  # never live: no key

    later = trending.run(pg, ts, alias, now=now + 5 * H)  # fresh-0 is 25 h old now
    assert later["expired"] == 1 and "fresh-0" in later["changed_ids"]
    assert features(pg, "trending_score")["fresh-0"] == 0
    assert document(ts, alias, "fresh-0")["trending_score"] == 0
    assert document(ts, alias, "fresh-1")["trending_score"] > 0


def test_a_push_that_failed_is_sent_by_the_next_run(pg, idx, now, typesense_server):
    ts, alias = idx
    for k in range(3):
        add_article(pg, f"p-{k}", now - (3 + k) * H, "09")
    index(pg, ts, alias, [f"p-{k}" for k in range(3)])
    # a Typesense that does not answer (a closed port), and no waiting between retries
    down = schema.client(replace(typesense_server, typesense_port=1), timeout=0.5)
    import dgb.search.partial as partial

    real = partial.update_fields
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            "dgb.engagement.runs.update_fields",
            lambda *a, **k: real(*a, **{**k, "max_retries": 1, "sleep": lambda s: None}),
        )
        with pytest.raises(IndexUnavailable):
            trending.run(pg, down, alias, now=now)
    assert set(features(pg, "trending_score")) == {"p-0", "p-1", "p-2"}  # stored, not pushed
    assert all("trending_score" not in document(ts, alias, f"p-{k}") for k in range(3))

    nxt = trending.run(pg, ts, alias, now=now)
    assert nxt["changed"] == 0 and nxt["updated"] == 3  # nothing changed, yet all three pushed
    assert all(document(ts, alias, f"p-{k}")["trending_score"] > 0 for k in range(3))
    with pg.cursor() as cur:
        cur.execute("SELECT status, error IS NOT NULL FROM engagement_runs ORDER BY id")
        assert cur.fetchall() == [("failed", True), ("ok", False)]


def test_articles_not_in_the_index_are_counted_not_failed(pg, idx, now):
    ts, alias = idx
    add_article(pg, "indexed", now - H, "11")
    add_article(pg, "pending", now - 2 * H, "11")
    index(pg, ts, alias, ["indexed"])
    with pg.cursor() as cur:  # indexed once, then gone from the index (a rebuild, a lost document)
        cur.execute("UPDATE news SET indexed_at = now() WHERE unique_id = 'pending'")
    pg.commit()
    out = trending.run(pg, ts, alias, now=now)
    assert (out["updated"], out["not_indexed"], out["failed"]) == (1, 1, 0)


def test_a_whole_reindex_carries_the_current_score_and_view_count(pg, idx, now):
    ts, alias = idx
    add_article(pg, "first", now - 3 * H, "13")
    add_article(pg, "second", now - H, "13")
    out = trending.run(pg, ts, alias, now=now)
    assert out["changed"] == 2 and out["updated"] == 0  # neither indexed yet: nothing to push
    with pg.cursor() as cur:
        cur.execute(
            "UPDATE news_features SET features = features || '{\"view_count\": 12}'"
            " WHERE unique_id = 'second'"
        )
    pg.commit()
    index(pg, ts, alias, ["first", "second"])  # the index stage's whole upsert
    assert document(ts, alias, "first")["trending_score"] == 7.0
    second = document(ts, alias, "second")
    assert (second["trending_score"], second["view_count"]) == (7.0, 12)
    assert "view_count" not in document(ts, alias, "first")


def test_run_records_older_than_30_days_are_deleted_but_the_watermark(pg, idx, now):
    ts, alias = idx
    with pg.cursor() as cur:
        cur.execute(
            "INSERT INTO engagement_runs (kind, started_at, status) VALUES"
            " ('trending', now() - interval '40 days', 'failed'),"
            " ('trending', now() - interval '35 days', 'ok'),"
            " ('trending', now() - interval '34 days', 'failed'),"
            " ('views', now() - interval '40 days', 'failed')"
        )
    pg.commit()
    trending.run(pg, ts, alias, now=now)
    with pg.cursor() as cur:
        cur.execute(
            "SELECT kind, status, started_at < now() - interval '30 days' FROM engagement_runs ORDER BY id"
        )
        # the old complete run stays until a newer one completes; other kinds are left alone
        assert cur.fetchall() == [
            ("trending", "ok", True),
            ("views", "failed", True),
            ("trending", "ok", False),
        ]
    trending.run(pg, ts, alias, now=now)
    with pg.cursor() as cur:
        cur.execute("SELECT count(*) FROM engagement_runs WHERE kind = 'trending'")
        assert cur.fetchone()[0] == 2  # the 35-day-old watermark went once a newer run was complete


def test_a_theme_below_the_minimum_day_count_does_not_trend(pg, idx, now, monkeypatch):
    """One article in the day and none in the week: production's ratio says 7.0 ("Em alta"); with
    the minimum (DGB_TRENDING_MIN_DAY, default 5) it scores 0, and a theme with enough articles
    keeps production's ratio."""
    monkeypatch.delenv("DGB_TRENDING_MIN_DAY")
    ts, alias = idx
    add_article(pg, "lonely", now - 2 * H, "14")
    for k in range(5):
        add_article(pg, f"wave-{k}", now - (10 - k) * H, "15")
    for d in range(1, 4):
        add_article(pg, f"wave-old-{d}", now - d * 24 * H - 12 * H, "15")
    index(pg, ts, alias, ["lonely", *[f"wave-{k}" for k in range(5)]])

    trending.run(pg, ts, alias, now=now)

    scores = features(pg, "trending_score")
    assert trending_score(1, 1) == 7.0 and scores["lonely"] == 0  # the minimum: no badge
    assert document(ts, alias, "lonely")["trending_score"] == 0
    # wave-4 has 5 in its day and 8 in its week: 5 / (8 / 7) = 4.375, production's value
    assert scores["wave-4"] == trending_score(5, 8, MIN_DAY) == 4.375
    # wave-0 .. wave-3 had fewer than 5 in their day when published: 0
    assert [scores[f"wave-{k}"] for k in range(4)] == [0, 0, 0, 0]
    # the same rows with the minimum at 1 give production's formula back
    again = trending.compute(pg, now=now, since=None, min_day=1)
    assert again["changed"]["lonely"] == 7.0


def test_a_run_pushes_only_what_changed_since_the_last_complete_run(pg, idx, now):
    """The watermark: values written and articles indexed before the last complete run (less the
    15-minute margin) are not pushed again; a value written after it is. Ignoring the watermark
    would push all three every run."""
    ts, alias = idx
    add_article(pg, "w-0", now - 3 * H, "16")
    add_article(pg, "w-1", now - 4 * H, "17")
    add_article(pg, "w-2", now - 5 * H, "17")
    index(pg, ts, alias, ["w-0", "w-1", "w-2"])
    first = trending.run(pg, ts, alias, now=now)
    assert first["updated"] == 3
    # move that run an hour back, and its writes and the indexing two hours back: older than the
    # watermark less its 15-minute margin (the trigger that keeps updated_at current is off for it)
    with pg.cursor() as cur:
        cur.execute("UPDATE engagement_runs SET started_at = started_at - interval '1 hour'")
        cur.execute("ALTER TABLE news_features DISABLE TRIGGER trg_news_features_updated_at")
        cur.execute("UPDATE news_features SET updated_at = updated_at - interval '2 hours'")
        cur.execute("ALTER TABLE news_features ENABLE TRIGGER trg_news_features_updated_at")
        cur.execute("UPDATE news SET indexed_at = indexed_at - interval '2 hours'")
    pg.commit()
    quiet = trending.run(pg, ts, alias, now=now)
    assert (quiet["changed"], quiet["updated"]) == (0, 0)  # nothing new since the watermark
    # a late article of w-0's theme, 30 hours old: in w-0's week, not its day; only w-0 changes
    add_article(pg, "w-late", now - 30 * H, "16")
    moved = trending.run(pg, ts, alias, now=now)
    assert moved["changed_ids"] == ["w-0"] and moved["updated"] == 1
    assert document(ts, alias, "w-0")["trending_score"] == trending_score(1, 2) == 3.5
