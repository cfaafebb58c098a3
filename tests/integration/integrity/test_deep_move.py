"""A move without a redirect deep in an agency's listing (issue 39's seed 30): the article was
rewritten (title and text) and then given a new address, 404 at the old one, with dozens of newer
articles above it, so neither the Plone 6 search by the stored title nor the scraper's runs (they
stop at the fence of known addresses) find it. Integrity reads the listing at the article's place
and follows it there; a genuinely withdrawn article is not mistaken for a move. On the local site
and a real PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest

from dgb import db
from dgb.fetch import Fetcher
from dgb.integrity.article_check import check_article
from dgb.integrity.evidence import RemovalPolicy
from dgb.scraper.run import scrape_agency
from dgb.urlpolicy import UrlPolicy, guarded_transport
from tests.support.articles import article_dict, mirrored_agency
from tests.support.fetch import FAST
from tests.support.sql import all_rows

pytestmark = pytest.mark.stack

N = 70  # more than two classic pages (30) and two Plone 6 pages (25)
NOW = datetime.now(UTC).replace(second=0, microsecond=0)  # whole minutes: the same-minute cases are exact


def _articles(agency: str) -> list[tuple[str, str, str, str]]:
    return [
        (
            agency,
            f"nota-{i:02d}",
            f"Nota número {i} sobre o programa",
            (NOW - timedelta(minutes=20 * i)).isoformat(),
        )
        for i in range(N)
    ]


def _fetcher(base: str) -> Fetcher:
    pol = UrlPolicy(allowed_hosts=["gov.br", "*.gov.br", urlsplit(base).netloc], allow_loopback=True)
    return Fetcher(FAST, url_guard=pol.guard, transport=guarded_transport(pol), sleep=lambda s: None)


@pytest.fixture
def stored(pg, mirror):
    """The local site with ``N`` articles of ``mec`` as the given site kind, all stored."""

    def make(kind: str, extra=()):
        with db.transaction(pg) as cur:
            cur.execute("DELETE FROM agencies WHERE key = 'mec'")
        site, server, base = mirror(_articles("mec") + list(extra))
        with _fetcher(base) as f:
            report = scrape_agency(pg, mirrored_agency(base, "mec", kind), f)
        assert report.status == "success" and len(report.new) == N + len(extra), report
        return site, server, base

    return make


def _check(pg, base, slug):
    [(uid,)] = all_rows(pg, "SELECT unique_id FROM news WHERE url LIKE %s", f"%/{slug}")
    with _fetcher(base) as f:
        result = check_article(pg, f, uid, now=NOW + timedelta(minutes=1), policy=RemovalPolicy())
        return uid, result, f.stats.requests


@pytest.mark.parametrize("kind", ["html", "plone6_api"])
def test_a_rewritten_article_moved_without_redirect_deep_in_its_listing_is_followed(pg, stored, kind):
    site, server, base = stored(kind)
    slug = "nota-47"  # on the second page of either kind, 47 newer articles above it
    site.edit(
        "mec", slug, title="Um título inteiramente novo", content="Um texto todo reescrito pela redação."
    )
    site.move("mec", slug, "um-titulo-inteiramente-novo", redirect=False)
    uid, result, requests = _check(pg, base, slug)
    assert result.outcome == "moved" and result.content.found_via == "listing", result
    assert result.content.moved_to.endswith("/um-titulo-inteiramente-novo") and "moved" in result.flags
    [(url, title, removed_at, problem)] = all_rows(
        pg, "SELECT url, title, removed_at, problem FROM news WHERE unique_id = %s", uid
    )
    assert url == result.content.moved_to and title == "Um título inteiramente novo"
    assert removed_at is None and problem is None
    assert all_rows(pg, "SELECT count(*) FROM news")[0][0] == N  # no second row
    # the old address, the search by title, at most two listing pages, the new page and its image:
    # the listing around the article's place, not every page
    assert requests <= 6


def test_a_withdrawn_article_deep_in_its_listing_stays_a_suspect(pg, stored):
    site, server, base = stored("html")
    site.remove("mec", "nota-52", 404)
    uid, result, _ = _check(pg, base, "nota-52")
    assert result.outcome == "suspect_removed" and result.content.moved_to is None, result
    [(url, problem)] = all_rows(pg, "SELECT url, problem FROM news WHERE unique_id = %s", uid)
    assert url.endswith("/nota-52") and problem == "suspect_removed"


def test_a_deep_move_next_to_an_unstored_article_of_the_same_minute_is_not_guessed(pg, stored):
    """Two addresses the pipeline does not know, published in the stored article's minute: either
    may be it, so none is taken (the removal evidence goes on; nothing is pointed at a stranger)."""
    site, server, base = stored("html")
    site.edit("mec", "nota-40", title="Outro título", content="Outro texto.")
    site.move("mec", "nota-40", "outro-titulo", redirect=False)
    published = (NOW - timedelta(minutes=20 * 40, seconds=-20)).isoformat()
    site.publish(article_dict("mec", "vizinha-do-mesmo-minuto", "Uma vizinha do mesmo minuto", published))
    uid, result, _ = _check(pg, base, "nota-40")
    assert result.outcome == "suspect_removed" and result.content.moved_to is None, result


@pytest.mark.parametrize(("kind", "apart_s"), [("plone6_api", 43), ("html", 20)])
def test_a_withdrawn_article_is_not_taken_for_a_neighbour_that_moved(pg, stored, kind, apart_s):
    """Issue 39's seed 31: two stored articles of one agency published ``apart_s`` seconds apart
    (43 s: the next minute, as in the run; 20 s: the same minute, as a classic listing shows it);
    the first is withdrawn, the second moved without a redirect. The withdrawn one stays a
    suspect (not pointed at its neighbour's new address); the moved one is followed."""
    at = (NOW - timedelta(minutes=20 * 40 + 10)).replace(second=30)
    pair = [
        ("mec", "retirada", "Uma nota que será retirada", at.isoformat()),
        ("mec", "mudada", "Uma nota que muda de endereço", (at + timedelta(seconds=apart_s)).isoformat()),
    ]
    site, server, base = stored(kind, extra=pair)
    site.remove("mec", "retirada", 410)
    site.move("mec", "mudada", "mudada-nova", redirect=False)
    _, gone, _ = _check(pg, base, "retirada")
    assert gone.outcome == "suspect_removed" and gone.content.moved_to is None, gone
    _, moved, _ = _check(pg, base, "mudada")
    assert moved.outcome == "moved" and moved.content.moved_to.endswith("/mudada-nova"), moved
    rows = all_rows(pg, "SELECT title, url FROM news WHERE title LIKE 'Uma nota%' ORDER BY title")
    assert [(t, u.rsplit("/", 1)[1]) for t, u in rows] == [
        ("Uma nota que muda de endereço", "mudada-nova"),
        ("Uma nota que será retirada", "retirada"),
    ]
