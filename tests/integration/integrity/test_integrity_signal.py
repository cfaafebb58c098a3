"""The change signal of Plone 6 agencies (issue 36) against a real PostgreSQL and the local gov.br
site over loopback: one @search sorted by ``modified`` finds an edit, its article is checked and the
change recorded, the unchanged articles are not fetched one by one, the watermark advances, a quiet
round costs one request, a failed read leaves every article to the normal checks, and a classic
HTML agency keeps its per-article checks. Requests are counted by the site's own request log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dgb import db
from dgb.integrity.runs import run_budget
from dgb.integrity.signal import signal_url
from dgb.integrity.tiers import BudgetPolicy
from tests.support.articles import mirrored_agency
from tests.support.integrity import checker, scrape_site
from tests.support.sql import all_rows, one_row

pytestmark = pytest.mark.stack

T0 = datetime.now(UTC).replace(microsecond=0)
PUBLISHED = T0 - timedelta(days=10)  # age band 2-30 days: re-checked within 24 h
PLONE6 = [
    (
        "mulheres",
        f"noticia-{i}",
        f"Ministério anuncia ação número {i} para mulheres",
        PUBLISHED - timedelta(hours=i),
    )
    for i in range(6)
]
CLASSIC = [
    ("mec", f"aviso-{i}", f"MEC publica aviso número {i}", PUBLISHED - timedelta(hours=i)) for i in range(2)
]
POLICY = BudgetPolicy(budget_rps=10.0, slot_seconds=60.0)


@pytest.fixture(autouse=True)
def _clean(pg):
    with db.transaction(pg) as cur:
        cur.execute("TRUNCATE integrity_checks, integrity_daily, integrity_signal RESTART IDENTITY")
        cur.execute("DELETE FROM agencies WHERE key IN ('mec', 'mulheres')")
    yield


@pytest.fixture
def site(mirror, pg):
    site_, server, base = mirror([(a, s, t, p.isoformat()) for a, s, t, p in PLONE6 + CLASSIC])
    scrape_site(pg, base, "mulheres", "plone6_api")
    scrape_site(pg, base, "mec")
    with db.transaction(pg) as cur:  # the event pipeline is not behind
        cur.execute("UPDATE news SET enriched_at = now()")
        cur.execute("UPDATE outbox SET published_at = now()")
    agencies = [mirrored_agency(base, "mulheres", "plone6_api"), mirrored_agency(base, "mec")]
    return site_, server, base, agencies


def _round(pg, server, base, agencies, at, **kw):
    """One budget run at ``at``; (its summary, the site's requests during it by route kind, robots.txt
    aside)."""
    before = dict(server.requests.snapshot()["total"])
    with checker(base) as f:
        out = run_budget(pg, f, policy=POLICY, clock=lambda: at, agencies=agencies, **kw)
    after = server.requests.snapshot()["total"]
    asked = {k: n - before.get(k, 0) for k, n in after.items() if n - before.get(k, 0)}
    asked.pop("robots", None)  # each new fetcher reads robots.txt once
    return out, asked


def _watermark(pg):
    return one_row(pg, "SELECT watermark, covered_since, reads, failures FROM integrity_signal")


def _history(pg):
    return all_rows(
        pg,
        "SELECT n.url, h.field_changed, h.source FROM news_update_history h JOIN news n ON n.id = h.news_id"
        " ORDER BY h.id",
    )


def test_one_search_finds_the_edit_and_spares_the_unchanged_articles(pg, site):
    site_, server, base, agencies = site
    assert "sort_on=modified" in signal_url(agencies[0]) and "fullobjects" not in signal_url(agencies[0])

    # round 1: the first read starts the watermark; every article is checked one by one (nothing known yet)
    first, asked = _round(pg, server, base, agencies, T0)
    assert first.signal["requests"] == 1 and first.signal["restarted"] == ["mulheres"]
    assert asked == {"api_search": 1, "api_item": 6, "article": 2, "image": 8}, asked
    watermark, covered, reads, _ = _watermark(pg)
    assert covered == T0 and reads == 1

    # an edit on the site: one search finds it; its article is checked (whole) and the change recorded
    edited = site_.edit("mulheres", "noticia-3", title="Ministério anuncia ação número 3 (corrigida)")
    second, asked = _round(pg, server, base, agencies, T0 + timedelta(hours=1))
    assert second.signal["marked"] == 1 and second.signal["checked_first"] == 1
    assert second.outcomes["modified"] == 1
    # the 5 unchanged Plone 6 articles are not fetched; the classic agency keeps its per-article checks
    assert asked == {"api_search": 1, "api_item": 1, "image": 1, "article": 2}, asked
    assert second.signal["skipped"] == 5
    assert _history(pg) == [(f"{agencies[0].url}/noticia-3", "title", "integrity")]
    new_watermark, covered, _, _ = _watermark(pg)
    assert new_watermark == edited.modified_at > watermark and covered == T0  # the chain goes on
    assert one_row(pg, "SELECT count(*) FROM integrity_state WHERE signal_modified_at IS NOT NULL")[0] == 0

    # a quiet round: one request for the Plone 6 agency, its articles still spared
    third, asked = _round(pg, server, base, agencies, T0 + timedelta(hours=2))
    assert asked == {"api_search": 1, "article": 2}, asked
    assert third.signal["marked"] == 0 and third.outcomes["modified"] == 0
    assert _watermark(pg)[0] == new_watermark

    # without the signal the same round fetches every Plone 6 article one by one
    off, asked = _round(pg, server, base, agencies, T0 + timedelta(hours=3), modified_signal=False)
    assert off.signal is None and asked == {"api_item": 6, "article": 2}, asked


def test_a_failed_read_leaves_every_article_to_the_normal_checks(pg, site):
    site_, server, base, agencies = site
    _round(pg, server, base, agencies, T0)
    site_.edit("mulheres", "noticia-1", content="Texto novo da matéria, revisto pela assessoria.")
    search = "/" + signal_url(agencies[0]).split("/", 3)[3].split("?")[0]
    server.faults.add({"path_prefix": search, "fault": "503"})
    failed, asked = _round(pg, server, base, agencies, T0 + timedelta(hours=1))
    assert failed.signal["failed"] == ["mulheres"] and failed.signal["skipped"] == 0
    # nothing lost: every Plone 6 article is checked one by one, and the edit is found that way
    assert asked["api_item"] == 6 and asked["article"] == 2, asked
    assert failed.outcomes["modified"] == 1
    assert _history(pg) == [(f"{agencies[0].url}/noticia-1", "content", "integrity")]
    _, covered, reads, failures = _watermark(pg)
    assert covered == T0 and reads == 2 and failures == 1  # the watermark and coverage are kept

    server.faults.clear()  # the next read reaches back to the watermark: the chain was not broken
    again, asked = _round(pg, server, base, agencies, T0 + timedelta(hours=2))
    assert again.signal["restarted"] == [] and again.signal["marked"] == 0
    assert asked == {"api_search": 1, "article": 2}, asked


def test_a_check_that_fails_keeps_the_mark(pg, site):
    site_, server, base, agencies = site
    _round(pg, server, base, agencies, T0)
    site_.edit("mulheres", "noticia-2", subtitle="Nova linha fina")
    item = f"/www.gov.br/mulheres/++api++/{site_.agency_for('mulheres').path}/noticia-2"
    server.faults.add({"path_prefix": item, "fault": "503"})
    broken, _ = _round(pg, server, base, agencies, T0 + timedelta(hours=1))
    assert broken.signal["marked"] == 1 and broken.outcomes["error"] >= 1
    marked = one_row(
        pg,
        "SELECT s.signal_modified_at IS NOT NULL FROM integrity_state s JOIN news n ON n.id = s.news_id"
        " WHERE n.url LIKE '%/noticia-2'",
    )[0]
    assert marked  # never skipped while marked: the scheduler checks it again
    server.faults.clear()
    later, _ = _round(pg, server, base, agencies, T0 + timedelta(hours=2))
    assert later.outcomes["modified"] == 1
    assert _history(pg) == [(f"{agencies[0].url}/noticia-2", "subtitle", "integrity")]
