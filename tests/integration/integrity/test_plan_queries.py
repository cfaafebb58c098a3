"""The budget run's two queries over every article, on a real PostgreSQL: the candidates read in
batches through a server-side cursor come out the same as the rows, and the due-suspects query
finds its few rows through its partial index (migration 0022) instead of walking every due one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from dgb import db
from dgb.integrity import tiers
from dgb.integrity.tiers import BudgetPolicy, load_candidates, load_due_suspects

pytestmark = pytest.mark.stack

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
POLICY = BudgetPolicy(budget_rps=2.0, slot_seconds=60.0)


def _articles(pg, n: int) -> None:
    """``n`` articles (the enrol trigger gives each its integrity_state row), published an hour
    apart; one in three never checked, the rest checked ``id`` minutes before an hour ago; every
    fifth with an image; the one with id 7 removed."""
    with db.transaction(pg) as cur:
        cur.execute(
            "INSERT INTO news (unique_id, agency_key, agency_name, title, url, image_url, content,"
            " published_at, scraped_at)"
            " SELECT 'plan-' || g, 'ag' || (g %% 3), 'Agency', 'Notícia ' || g,"
            " 'https://www.gov.br/ag/pt-br/noticias/plan-' || g,"
            " CASE WHEN g %% 5 = 0 THEN 'https://www.gov.br/ag/img/' || g || '.jpg' END, 'texto',"
            " %(now)s - g * interval '1 hour', %(now)s"
            " FROM generate_series(1, %(n)s) g",
            {"now": NOW, "n": n},
        )
        cur.execute(
            "UPDATE integrity_state"
            " SET last_checked_at = %(now)s - interval '1 hour' - news_id * interval '1 minute',"
            " next_due_at = %(now)s + interval '1 day' WHERE news_id %% 3 <> 0",
            {"now": NOW},
        )
        cur.execute("UPDATE news SET removed_at = %s WHERE id = 7", (NOW,))


def test_candidates_read_in_batches_are_the_rows(pg, monkeypatch):
    _articles(pg, 50)
    whole = load_candidates(pg, NOW, POLICY)
    monkeypatch.setattr(tiers, "CANDIDATE_BATCH", 7)  # 50 rows: seven full batches and one of one
    batched = load_candidates(pg, NOW, POLICY)
    order_w, order_b = np.argsort(whole.news_id), np.argsort(batched.news_id)
    assert sorted(batched.news_id.tolist()) == [i for i in range(1, 51) if i != 7]  # the removed one out
    for field in ("news_id", "published", "last_checked", "has_image", "urgent", "agency_rate"):
        np.testing.assert_array_equal(getattr(whole, field)[order_w], getattr(batched, field)[order_b])
    by_id = dict(zip(batched.news_id.tolist(), range(len(batched)), strict=True))
    assert np.isnan(batched.last_checked[by_id[3]])  # never checked: NaN, not 0
    assert batched.last_checked[by_id[4]] == (NOW - timedelta(hours=1, minutes=4)).timestamp()
    assert batched.published[by_id[10]] == (NOW - timedelta(hours=10)).timestamp()
    assert batched.has_image[by_id[10]] and not batched.has_image[by_id[11]]
    assert batched.published.dtype == np.float64 and batched.news_id.dtype == np.int64
    with db.transaction(pg) as cur:  # the batches' cursor left no transaction or cursor open
        cur.execute("SELECT count(*) FROM pg_cursors")
        assert cur.fetchone()[0] == 0


def test_no_candidates_is_an_empty_plan_input(pg):
    cands = load_candidates(pg, NOW, POLICY)
    assert len(cands) == 0 and cands.published.dtype == np.float64
    assert len(tiers.choose(cands, NOW.timestamp(), 100.0, POLICY)) == 0


def test_due_suspects_are_found_through_their_partial_index(pg):
    _articles(pg, 20_000)
    with db.transaction(pg) as cur:  # every article due an hour ago; one in 1,000 a suspect
        cur.execute("UPDATE integrity_state SET next_due_at = %s", (NOW - timedelta(hours=1),))
        cur.execute(
            "UPDATE integrity_state SET gone_since = %(now)s - interval '20 minutes', gone_checks = 1,"
            " next_due_at = %(now)s - news_id * interval '1 second' WHERE news_id %% 1000 = 1",
            {"now": NOW},
        )
    pg.autocommit = True
    with pg.cursor() as cur:
        cur.execute("ANALYZE news")
        cur.execute("ANALYZE integrity_state")
    pg.autocommit = False
    found = load_due_suspects(pg, NOW, POLICY, 400)
    # the twenty suspects, the most overdue (the highest id) first
    assert [news_id for news_id, _ in found] == list(range(19_001, 0, -1000))
    with db.transaction(pg) as cur:
        cur.execute(
            "EXPLAIN " + tiers.DUE_SUSPECTS_SQL,
            {"now": NOW, "recent": NOW - timedelta(minutes=5), "limit": 400},
        )
        plan = "\n".join(r[0] for r in cur.fetchall())
    assert "integrity_state_suspects_due_idx" in plan, plan
