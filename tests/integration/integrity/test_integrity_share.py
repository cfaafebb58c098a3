"""Integrity's share of the host budget (dgb.integrity.share, issue 27) against a real PostgreSQL:
what the learnt cadence plans and the scrapes measurably take is left out of the budget run's plan."""

from __future__ import annotations

import pytest

from dgb import db
from dgb.integrity.runs import integrity_budget_rps, run_budget
from dgb.integrity.share import integrity_share
from dgb.integrity.tiers import BudgetPolicy
from tests.support.integrity import checker

pytestmark = pytest.mark.stack


@pytest.fixture(autouse=True)
def _clean(pg, monkeypatch):
    monkeypatch.setenv("DGB_HOST_BUDGETS", "www.gov.br=2/2")
    monkeypatch.delenv("DGB_HOST_RPS", raising=False)
    monkeypatch.delenv("DGB_HOST_BUDGET", raising=False)
    monkeypatch.delenv("DGB_INTEGRITY_MIN_RPS", raising=False)
    monkeypatch.delenv("DGB_SCRAPE_LISTING_SHARE", raising=False)
    with db.transaction(pg) as cur:
        cur.execute("TRUNCATE scrape_cadence, host_grants")
    yield
    with db.transaction(pg) as cur:
        cur.execute("TRUNCATE scrape_cadence, host_grants")


def _cadences(pg, n: int, interval_s: float, *, stale: bool = False) -> None:
    with db.transaction(pg) as cur:
        cur.execute(
            "INSERT INTO scrape_cadence (agency_key, interval_s, reason, updated_at)"
            " SELECT 'share_' || g || %s, %s, 'busy',"
            "        now() - CASE WHEN %s THEN interval '2 hours' ELSE interval '1 minute' END"
            "   FROM generate_series(1, %s) g",
            ("_old" if stale else "", interval_s, stale, n),
        )


def _scrape_grants(pg, n: int, priority: int = 0) -> None:
    """``n`` grants spread over the last 10 minutes."""
    with db.transaction(pg) as cur:
        cur.execute(
            "INSERT INTO host_grants (host, at, priority)"
            " SELECT 'www.gov.br', now() - make_interval(secs => g * 590.0 / %s), %s"
            "   FROM generate_series(1, %s) g",
            (n, priority, n),
        )


def test_nothing_scraping_leaves_integrity_the_whole_host(pg):
    share = integrity_share(pg)
    assert share.source == "host" and share.rps == pytest.approx(2.0)
    assert share.listings_planned_rps == 0 and share.scrape_measured_rps == 0


def test_the_learnt_cadence_plan_is_left_to_the_listings(pg):
    _cadences(pg, 30, 60.0)  # 30 agencies polled every minute: 0.5 req/s
    _cadences(pg, 400, 600.0, stale=True)  # last hour's rows are not the current plan
    share = integrity_share(pg)
    assert share.listings_planned_rps == pytest.approx(0.5, abs=1e-3)
    assert share.rps == pytest.approx(1.5, abs=1e-3)


def test_the_plan_counts_at_most_the_dispatchers_listing_share(pg):
    _cadences(pg, 200, 60.0)  # 3.3 req/s wanted; the dispatcher starts at most 0.75 x 2 req/s
    share = integrity_share(pg)
    assert share.listings_planned_rps == pytest.approx(1.5, abs=1e-3)
    assert share.rps == pytest.approx(0.5, abs=1e-3)


def test_measured_scrapes_beyond_the_plan_count(pg):
    _cadences(pg, 6, 60.0)  # plans 0.1 req/s, but a backlog of new articles takes 1.2 req/s
    _scrape_grants(pg, 720)
    _scrape_grants(pg, 300, priority=1)  # integrity's own grants are not taken away from it
    share = integrity_share(pg)
    assert share.scrape_measured_rps == pytest.approx(1.2, abs=1e-3)
    assert share.rps == pytest.approx(0.8, abs=1e-3)


def test_a_saturated_host_still_leaves_the_floor(pg, monkeypatch):
    _scrape_grants(pg, 1300)
    assert integrity_share(pg).rps == pytest.approx(0.1)
    monkeypatch.setenv("DGB_INTEGRITY_MIN_RPS", "0.3")
    assert integrity_share(pg).rps == pytest.approx(0.3)


def test_a_pinned_rate_and_the_budget_off(pg, monkeypatch):
    _scrape_grants(pg, 1000)
    assert integrity_share(pg, 1.7).rps == 1.7 and integrity_share(pg, 1.7).source == "configured"
    monkeypatch.setenv("DGB_INTEGRITY_BUDGET_RPS", "0.9")
    assert integrity_budget_rps(BudgetPolicy.from_env(), pg) == 0.9
    monkeypatch.delenv("DGB_INTEGRITY_BUDGET_RPS")
    monkeypatch.setenv("DGB_HOST_BUDGET", "0")
    share = integrity_share(pg)
    assert share.source == "default" and share.rps == 1.7
    assert integrity_budget_rps(BudgetPolicy.from_env()) == 1.7  # without a connection


def test_a_budget_run_plans_with_its_share(pg, mirror):
    _, _, base = mirror([])
    _cadences(pg, 60, 60.0)  # 1 req/s of listings planned: 1 req/s left
    with checker(base) as f:
        out = run_budget(pg, f, policy=BudgetPolicy(slot_seconds=30.0))
    assert out.capacity == pytest.approx(30.0, abs=0.1)
    assert out.share["source"] == "host" and out.share["rps"] == pytest.approx(1.0, abs=1e-3)
    assert out.as_dict()["share"]["listings_planned_rps"] == pytest.approx(1.0, abs=1e-3)
