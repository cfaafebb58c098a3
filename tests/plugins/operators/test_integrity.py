"""IntegrityTierOperator (dgb_airflow.operators.integrity): ``execute`` re-checks a tier's due
articles on the local gov.br site through PostgreSQL, counting outcomes in Airflow's metrics."""

from __future__ import annotations

from datetime import UTC

import pytest

from dgb.fetch import Fetcher
from dgb.scraper.run import scrape_agency
from dgb_airflow.operators.integrity import IntegrityTierOperator
from tests.support.airflow_context import task_context
from tests.support.articles import ARTICLES, mirrored_agency
from tests.support.fetch import FAST


def _in_tier(published: str, tier: str) -> bool:
    from datetime import datetime

    from dgb.integrity.tiers import DEFAULT_TIERS

    age = (datetime.now(UTC) - datetime.fromisoformat(published)).total_seconds() / 86400
    return next(t for t in DEFAULT_TIERS if t.name == tier).contains(age)


MEC_8_30 = [a for a in ARTICLES if a[0] == "mec" and _in_tier(a[3], "8_30d")]


@pytest.fixture
def scraped_site(pg, mirror, monkeypatch):
    """mec's articles scraped from the site the checks reach (most are 8-30 days old)."""
    site, server, base = mirror(ARTICLES)
    with Fetcher(FAST) as f:
        scrape_agency(pg, mirrored_agency(base, "mec"), f)
    monkeypatch.setenv("DGB_SOURCE_MODE", "mirror")
    monkeypatch.setenv("DGB_MIRROR_URL", base)
    monkeypatch.setenv("DGB_FETCH_MIN_INTERVAL", "0")
    monkeypatch.setenv("DGB_HOST_RPS", "100")  # the host budget's 2/s is tested in test_hostbudget
    monkeypatch.setenv("DGB_INTEGRITY_OUTBOX_MAX_AGE_S", "0")  # unenriched rows are no backlog here
    monkeypatch.setenv("DGB_INTEGRITY_BACKLOG_MAX", "0")
    return site


def test_tier_run_checks_due_articles_and_counts_outcomes(pg, scraped_site, recorded_metrics):
    assert len(MEC_8_30) >= 2
    scraped_site.edit("mec", MEC_8_30[0][1], title="Título corrigido pela assessoria")
    out = IntegrityTierOperator(task_id="check_8_30d", tier="8_30d", limit=50).execute(task_context())
    assert out["tier"] == "8_30d" and out["checked"] == len(MEC_8_30)
    assert out["outcomes"]["modified"] == 1 and out["outcomes"]["unchanged"] == len(MEC_8_30) - 1
    counters = [(name, count, tags) for kind, name, count, tags in recorded_metrics if kind == "incr"]
    assert sum(c for n, c, _ in counters if n == "dgb.integrity.checks") == len(MEC_8_30)
    assert ("dgb.integrity.outcome.modified", 1, {"tier": "8_30d", "agency": "mec"}) in counters
    # checked now: nothing is due in this tier until its interval passed
    again = IntegrityTierOperator(task_id="check_8_30d", tier="8_30d", limit=50).execute(task_context())
    assert again["checked"] == 0


def test_a_tier_with_nothing_due_checks_nothing(pg, scraped_site):
    out = IntegrityTierOperator(task_id="check_0_2d", tier="0_2d").execute(task_context())
    assert out["checked"] == 0 and out["tier"] == "0_2d"


def test_budget_run_checks_within_the_budget_and_emits_band_gauges(pg, scraped_site, recorded_metrics):
    from dgb_airflow.operators.integrity import IntegrityBudgetOperator

    out = IntegrityBudgetOperator(task_id="check_budget", budget_rps=1.0).execute(task_context())
    mec = len([a for a in ARTICLES if a[0] == "mec"])
    assert out["capacity"] == 600.0 and out["checked"] == mec  # never checked: all fit in the slot
    assert out["requests"] <= out["capacity"] and out["outcomes"]["unchanged"] == mec
    assert [b["band"] for b in out["bands"]] == ["lt3h", "3h_2d", "2_30d", "30_90d", "gt90d"]
    gauges = {name: value for kind, name, value, _ in recorded_metrics if kind == "gauge"}
    assert gauges["dgb.integrity.budget.checked"] == mec
    covered = sum(b["covered"] for b in out["bands"])
    assert covered == mec and sum(v for n, v in gauges.items() if n.endswith(".covered")) == mec


def test_tier_run_under_backlog_is_skipped_not_a_success(pg, scraped_site, monkeypatch):
    from airflow.sdk.exceptions import AirflowSkipException

    from dgb import db

    monkeypatch.setenv("DGB_INTEGRITY_OUTBOX_MAX_AGE_S", "60")
    with db.transaction(pg) as cur:
        cur.execute("UPDATE outbox SET published_at = now()")
        cur.execute(
            "INSERT INTO outbox (topic, aggregate_id, payload, created_at) VALUES"
            " ('dgb.news.scraped', 'x', '{}', now() - interval '5 minutes')"
        )
    with pytest.raises(AirflowSkipException, match="skipped_backlog"):
        IntegrityTierOperator(task_id="check_8_30d", tier="8_30d", limit=50).execute(task_context())
