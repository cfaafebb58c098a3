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
    assert _marks(pg) == 0  # read past it: cleared
    with Fetcher(FAST) as f:
        third = scrape_agency(pg, mec, f)
    assert third.new == [] and third.pages == 1 and third.status == "success"


class Killed(BaseException):
    """A process death at that point: nothing after it runs (not even ``except Exception``)."""


class DiesOnPageTwo:
    """The real fetcher; ``fail`` is raised when the run asks for listing page 2 (page 1's articles
    are committed by then)."""

    def __init__(self, inner: Fetcher, fail: BaseException):
        self.inner, self.fail = inner, fail

    def get(self, url, *args, **kwargs):
        if "b_start" in url:
            raise self.fail
        return self.inner.get(url, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _known_then_burst(pg, mirror):
    """mec's articles stored by a first run, then 35 new ones: page 1 holds burst-34 .. burst-5,
    page 2 starts with burst-4."""
    site, server, base = mirror(ARTICLES)
    mec = mirrored_agency(base, "mec")
    with Fetcher(FAST) as f:
        scrape_agency(pg, mec, f)
    now = datetime.now(UTC)
    for i in range(35):  # burst-0 the oldest
        at = (now - timedelta(minutes=35 - i)).isoformat()
        site.publish(article_dict("mec", f"burst-{i}", f"Notícia de rajada número {i} do ministério", at))
    return mec


def _burst_stored(pg) -> int:
    return _rows(pg, "SELECT count(*) FROM news WHERE url LIKE '%/burst-%'")[0][0]


def _marks(pg) -> int:
    return _rows(pg, "SELECT count(*) FROM scrape_reread")[0][0]


@pytest.mark.parametrize(
    "death",
    [
        pytest.param(Killed(), id="process-killed"),  # kill -9 of the task; the host rebooting
        pytest.param(ConnectionError("connection refused"), id="unexpected-error"),  # PostgreSQL crashing
    ],
)
def test_a_run_that_dies_after_committing_a_page_leaves_the_rest_to_the_next_run(pg, mirror, death):
    """Seed 28's chaos run: PostgreSQL was killed while a run read its second listing page. The
    first page's articles were stored; the run died before it could leave a mark, and every later
    run stopped at the fence of those stored articles: 13 articles never read."""
    mec = _known_then_burst(pg, mirror)
    with Fetcher(FAST) as f, pytest.raises(type(death)):
        scrape_agency(pg, mec, DiesOnPageTwo(f, death))
    assert _burst_stored(pg) == 30  # page 1 committed
    assert _marks(pg) == 1  # written before that commit
    with Fetcher(FAST) as f:
        again = scrape_agency(pg, mec, f)  # page 1 is all known: the fence alone would stop there
    assert again.status == "success" and len(again.new) == 5 and again.pages == 2, again
    assert _burst_stored(pg) == 35
    assert _marks(pg) == 0  # read past it: cleared
    with Fetcher(FAST) as f:
        third = scrape_agency(pg, mec, f)
    assert third.new == [] and third.pages == 1 and third.status == "success"


def test_a_listing_page_that_fails_after_a_committed_one_keeps_the_rest_marked(pg, mirror):
    from dgb.scrape_errors import NetworkError

    mec = _known_then_burst(pg, mirror)
    with Fetcher(FAST) as f:  # page 2 of the listing answers 503 after retries
        first = scrape_agency(pg, mec, DiesOnPageTwo(f, NetworkError("HTTP 503")))
    assert first.status == "partial" and len(first.new) == 30 and first.error_category == "network_error"
    assert _marks(pg) == 1  # kept: page 2 was not read
    with Fetcher(FAST) as f:
        again = scrape_agency(pg, mec, f)
    assert again.status == "success" and len(again.new) == 5 and _marks(pg) == 0, again


def test_a_run_that_reads_every_page_leaves_no_mark(pg, mirror):
    mec = _known_then_burst(pg, mirror)
    with Fetcher(FAST) as f:
        whole = scrape_agency(pg, mec, f)
    assert whole.status == "success" and len(whole.new) == 35 and whole.pages == 2
    assert _marks(pg) == 0  # the mark written ahead of page 1 replaced at the end
