"""Conditional listing polls (dgb.scraper.conditional through dgb.scraper.dispatch) against the
local gov.br site (ETag on every 200, 304 on a matching If-None-Match) and real PostgreSQL."""

from __future__ import annotations

import time

import pytest

from dgb import db
from dgb.fetch import Fetcher
from dgb.observe.cli import cadence_lines
from dgb.scraper.cadence import CadencePolicy
from dgb.scraper.conditional import ConditionalPolicy
from dgb.scraper.dags import ScrapeSpec
from dgb.scraper.dispatch import cadence_table, probe, probe_url, run_tick
from dgb.scraper.run import scrape_agency
from tests.support.articles import ARTICLES, article_dict, mirrored_agency
from tests.support.fetch import FAST

pytestmark = pytest.mark.stack

LONG = ConditionalPolicy(max_age_s=86400, max_hits=100)


def stored(conn, key: str) -> tuple | None:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT etag, stored_at IS NOT NULL, streak, hits, misses, full_polls FROM listing_validators"
            " WHERE agency_key = %s",
            (key,),
        )
        row = cur.fetchone()
    conn.rollback()
    return row


def answers(conn, agency, fetcher, n: int, policy=LONG, now=None) -> list[tuple[str, int]]:
    out = []
    for _ in range(n):
        p = probe(conn, agency, fetcher, now=now or time.time(), validators=policy)
        assert p.error is None
        out.append((p.answer, p.new))
    return out


@pytest.fixture
def mec_site(pg, mirror):
    site, server, base = mirror(ARTICLES)
    mec = mirrored_agency(base, "mec")
    with Fetcher(FAST) as f:
        assert len(scrape_agency(pg, mec, f).new) == 5  # every article of the listing stored
    return site, server, mec


def test_an_unchanged_listing_answers_304_and_is_no_news(pg, mec_site):
    site, server, mec = mec_site
    with Fetcher(FAST) as f:
        first = answers(pg, mec, f, 1)
        requests, size = f.stats.requests, f.stats.bytes
        again = answers(pg, mec, f, 2)
        assert f.stats.requests - requests == 2  # a 304 is still one request each
        assert f.stats.bytes == size  # ... but no listing bytes
        body = f.get(probe_url(mec))
    assert first == [("full", 0)]  # nothing stored yet: unconditional, its ETag kept (all known)
    assert again == [("hit", 0), ("hit", 0)]
    etag, held, streak, hits, misses, full = stored(pg, "mec")
    assert etag == body.headers["etag"] and held and (streak, hits, misses, full) == (2, 2, 0, 1)


def test_a_new_article_changes_the_etag_and_is_found_then_its_listing_is_read_whole_once(pg, mec_site):
    site, server, mec = mec_site
    with Fetcher(FAST) as f:
        assert answers(pg, mec, f, 2) == [("full", 0), ("hit", 0)]
        old = stored(pg, "mec")[0]
        site.publish(article_dict("mec", "nova-bolsa", "MEC lança nova bolsa", "2026-12-01T10:00:00-03:00"))
        assert answers(pg, mec, f, 1) == [("miss", 1)]  # the ETag moved: a 200, the news found
        # a listing with news keeps no validators: until a scrape stores it, every poll finds it
        assert stored(pg, "mec")[:2] == (None, False)
        assert answers(pg, mec, f, 1) == [("full", 1)]
        assert len(scrape_agency(pg, mec, f).new) == 1
        assert answers(pg, mec, f, 2) == [("full", 0), ("hit", 0)]
    assert stored(pg, "mec")[0] not in (None, old)


def test_a_site_without_validators_is_polled_whole_as_before(pg, mec_site):
    site, server, mec = mec_site
    server.faults.add({"path_prefix": "/www.gov.br/mec", "fault": "no_validators"})
    with Fetcher(FAST) as f:
        resp = f.get(probe_url(mec), headers={"If-None-Match": "*"})
        assert resp.status == 200 and "etag" not in resp.headers and "last-modified" not in resp.headers
        assert answers(pg, mec, f, 3) == [("full", 0)] * 3
        site.publish(article_dict("mec", "nova-bolsa", "MEC lança nova bolsa", "2026-12-01T10:00:00-03:00"))
        assert answers(pg, mec, f, 1) == [("full", 1)]
    assert stored(pg, "mec")[1:] == (False, 0, 0, 0, 4)


def test_validators_are_dropped_after_max_hits_304s_in_a_row_or_max_age(pg, mec_site):
    site, server, mec = mec_site
    streaky = ConditionalPolicy(max_age_s=86400, max_hits=2)
    now = float(int(time.time()))  # whole seconds: stored_at keeps microseconds
    with Fetcher(FAST) as f:
        # two 304s in a row, then a whole listing (validators renewed), then 304s again
        assert answers(pg, mec, f, 5, streaky, now) == [
            ("full", 0),
            ("hit", 0),
            ("hit", 0),
            ("full", 0),
            ("hit", 0),
        ]
        aging = ConditionalPolicy(max_age_s=600, max_hits=100)
        assert answers(pg, mec, f, 1, aging, now + 599) == [("hit", 0)]
        assert answers(pg, mec, f, 1, aging, now + 600) == [("full", 0)]  # stored at `now`: too old
        assert answers(pg, mec, f, 1, aging, now + 601) == [("hit", 0)]  # renewed at now + 600
        off = ConditionalPolicy(enabled=False)
        assert answers(pg, mec, f, 1, off, now + 602) == [("full", 0)]


def test_validators_survive_across_dispatcher_runs_and_show_in_status(pg, mec_site, pg_server):
    site, server, mec = mec_site
    agencies = {"mec": mec}
    specs = [ScrapeSpec("scrape_mec", ("mec",), None)]
    policy = CadencePolicy()
    now = time.time() + 2 * 3600
    with Fetcher(FAST) as f:
        first = run_tick(pg, specs, f, agencies.__getitem__, now=now, policy=policy, rps=2.0, validators=LONG)
    assert first.dag_ids == ["scrape_mec"] and first.triggered == []
    assert first.conditional == {"hit": 0, "miss": 0, "full": 1}
    # another dispatcher run: a new connection and fetcher, two hours on (mec due again)
    conn = db.connect(pg_server.pg_dsn())
    try:
        with Fetcher(FAST) as f:
            later = run_tick(
                conn, specs, f, agencies.__getitem__, now=now + 7200, policy=policy, rps=2.0, validators=LONG
            )
        assert later.dag_ids == ["scrape_mec"] and later.triggered == []
        assert later.conditional == {"hit": 1, "miss": 0, "full": 0}
        totals = cadence_table(conn)["conditional"]
    finally:
        conn.close()
    assert totals == {"hits": 1, "misses": 0, "full": 1, "hit_rate": 0.5, "listings_with_validators": 1}
    lines = cadence_lines(cadence_table(pg))
    assert "  conditional listing polls: 50% answered 304 (hits 1, misses 0, unconditional 1;" in lines[1]


def test_a_scrape_runs_first_page_is_conditional_and_shares_the_dispatchers_validators(pg, mirror):
    site, server, base = mirror(ARTICLES)
    mec = mirrored_agency(base, "mec")
    with Fetcher(FAST) as f:
        first = scrape_agency(pg, mec, f, validators=LONG)
        assert len(first.new) == 5 and not first.not_modified
        # a successful run keeps its first page's validators (not counted as a poll) ...
        assert stored(pg, "mec")[1:] == (True, 0, 0, 0, 0)
        # ... so the dispatcher's next poll of the same listing is a 304 at once
        assert answers(pg, mec, f, 1) == [("hit", 0)]
        again = scrape_agency(pg, mec, f, validators=LONG)
        assert again.not_modified and again.pages == 0 and again.status == "success"
        new = site.publish(
            article_dict("mec", "nova-bolsa", "MEC lança nova bolsa", "2026-12-01T10:00:00-03:00")
        )
        # an article that fails to store leaves the run partial: its validators are dropped
        path = site.article_url(base, new).removeprefix(base)
        server.faults.add({"path_prefix": path, "fault": "404"})
        partial = scrape_agency(pg, mec, f, validators=LONG)
        assert partial.status != "success" and partial.new == []
        assert stored(pg, "mec")[:2] == (None, False)
        assert [(p.answer, p.new) for p in [probe(pg, mec, f, validators=LONG)]] == [("full", 1)]
        server.faults.clear()
        assert len(scrape_agency(pg, mec, f, validators=LONG).new) == 1
        assert answers(pg, mec, f, 1) == [("hit", 0)]
