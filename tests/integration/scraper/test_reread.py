"""An article a regular run lists but cannot fetch is read again by the next run (dgb.scraper.run,
the ``scrape_reread`` mark), on the local site and real PostgreSQL. Seed 26's chaos hour lost one:
moved without a redirect while a run paged, it answered 404; the run stored the newer articles
around it, and every later run stopped at the third known one above it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dgb.fetch import Fetcher
from dgb.scraper.run import scrape_agency
from tests.support.articles import ARTICLES, article_dict, mirrored_agency
from tests.support.fetch import FAST
from tests.support.sql import all_rows as _rows

pytestmark = pytest.mark.stack


class MovedMeanwhile:
    """The real fetcher; the site moves ``slug`` (no redirect) just before the run first asks for it."""

    def __init__(self, inner: Fetcher, site, slug: str):
        self.inner, self.site, self.slug, self.moved = inner, site, slug, False

    def get(self, url, *args, **kwargs):
        if not self.moved and url.endswith(f"/{self.slug}"):
            self.moved = True
            self.site.move("mec", self.slug, f"{self.slug}-outro-endereco", redirect=False)
        return self.inner.get(url, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _publish_four(site, minutes_ago: float = 10) -> None:
    now = datetime.now(UTC)
    for i in range(4):  # nova-0 the oldest
        at = (now - timedelta(minutes=minutes_ago - i)).isoformat()
        site.publish(article_dict("mec", f"nova-{i}", f"Notícia nova número {i} do ministério", at))


def test_an_article_a_run_could_not_fetch_is_read_again_at_its_new_address(pg, mirror):
    site, server, base = mirror(ARTICLES)
    mec = mirrored_agency(base, "mec")
    with Fetcher(FAST) as f:
        scrape_agency(pg, mec, f)
    _publish_four(site)
    with Fetcher(FAST) as f:
        first = scrape_agency(pg, mec, MovedMeanwhile(f, site, "nova-0"))
    assert first.status == "partial" and len(first.new) == 3, first  # nova-0 answered 404
    marks = _rows(pg, "SELECT agency_key FROM scrape_reread")
    with Fetcher(FAST) as f:
        again = scrape_agency(pg, mec, f)  # nova-1..3 are known: the fence alone would stop there
    assert len(again.new) == 1 and again.status == "success", again
    assert marks == [("mec",)]  # the first run left its mark where it skipped nova-0
    urls = [u for (u,) in _rows(pg, "SELECT url FROM news WHERE url LIKE '%nova-0%'")]
    assert len(urls) == 1 and urls[0].endswith("/nova-0-outro-endereco")
    assert _rows(pg, "SELECT count(*) FROM scrape_reread")[0][0] == 0  # read past it: cleared
    with Fetcher(FAST) as f:
        third = scrape_agency(pg, mec, f)
    assert third.new == [] and third.pages == 1 and third.status == "success"
