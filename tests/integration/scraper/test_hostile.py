"""A hostile listing scraped into real PostgreSQL: the good articles stored, every bad page
recorded with a category, off-site links dropped and counted, nothing raised.

The site is :class:`dgb_dev.hostile.HostileSite` on 127.0.0.1 (configured as the mirror, so the
URL guard allows it); its off-site links (metadata address, PostgreSQL's port, a private
address, another site) are only written in the listing, never connected to.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from dgb.agencies import load_agencies
from dgb.fetch import Fetcher
from dgb.scraper.models import Article
from dgb.scraper.run import scrape_agency
from dgb.scraper.store import save_articles
from dgb_dev.hostile import LISTING_PATH, OFF_SITE_LINKS, HostileSite, hostile_pages
from tests.support.fetch import FAST

pytestmark = pytest.mark.stack


@pytest.fixture
def hostile_site(monkeypatch):
    with HostileSite() as site:
        monkeypatch.setenv("DGB_SOURCE_MODE", "mirror")
        monkeypatch.setenv("DGB_MIRROR_URL", site.base)
        yield site


def test_hostile_listing_keeps_the_good_articles_and_categorises_the_bad(pg, hostile_site):
    pages = hostile_pages()
    mec = replace(load_agencies(base_url=hostile_site.base)["mec"], site_kind="html")
    with Fetcher(replace(FAST, total_timeout=30.0, read_timeout=30.0)) as f:
        report = scrape_agency(pg, mec, f)  # never raises for a bad page
    expected_bad = Counter(p.expect for p in pages if p.expect != "stored")
    assert report.status == "partial" and report.pages == 1
    assert report.problems == dict(expected_bad)
    assert report.article_errors == sum(expected_bad.values())
    assert report.off_site_dropped == len(OFF_SITE_LINKS) + 1  # the items and the next-page link
    with pg.cursor() as cur:
        cur.execute("SELECT url, title, content FROM news WHERE agency_key = 'mec'")
        stored = {url.rsplit("/", 1)[1]: (title, content) for url, title, content in cur.fetchall()}
    assert {p.slug: p.title for p in pages if p.expect == "stored"} == {k: v[0] for k, v in stored.items()}
    assert len(report.new) == len(stored)
    assert "\x00" not in stored["byte-nulo"][1] and "depois do byte nulo" in stored["byte-nulo"][1]
    assert len(stored["texto-sem-pontuacao"][1]) <= 200_000
    # only the listing, robots.txt and the on-site article pages were requested
    paths = set(hostile_site.requests)
    assert paths <= {LISTING_PATH, "/www.gov.br/robots.txt"} | {f"{LISTING_PATH}/{p.slug}" for p in pages}
    with pg.cursor() as cur:
        cur.execute("SELECT status, error_category, error_message FROM scrape_runs WHERE agency_key = 'mec'")
        status, category, message = cur.fetchone()
    assert status == "partial" and category in ("html_changed", "unknown", "url_broken")
    assert f"off_site_dropped={len(OFF_SITE_LINKS) + 1}" in message and "too_deep=3" in message


def test_one_article_the_database_refuses_is_rolled_back_alone(pg):
    now = datetime.now(UTC)
    arts = [
        Article(
            url=f"https://www.gov.br/mec/n/{i}",
            agency="mec",
            title=f"Artigo {i}",
            content="corpo",
            published_at=now,
        )
        for i in range(3)
    ]
    arts[1].content = "corpo com \x00 depois da fronteira"  # bypasses the model's clean-up on purpose
    saved = save_articles(pg, "mec", "MEC", arts)
    assert len(saved.new) == 2 and len(saved.errors) == 1
    [err] = saved.errors
    assert (err.category, err.kind) == ("unknown", "store_error") and "/n/1" in str(err)
    with pg.cursor() as cur:
        cur.execute("SELECT url FROM news ORDER BY url")
        assert [r[0].rsplit("/", 1)[1] for r in cur.fetchall()] == ["0", "2"]
        cur.execute("SELECT count(*) FROM outbox")
        assert cur.fetchone()[0] == 2  # no event for the refused one
