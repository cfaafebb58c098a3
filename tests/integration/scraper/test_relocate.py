"""A listed article that is a stored one at a new address (dgb.scraper.relocate), on the local site
and real PostgreSQL: a move (301 or 404 at the old address) relocates the stored row, once, with its
history; a second article with the same title and date (the old address still answers) is stored
beside it."""

from __future__ import annotations

import pytest

from dgb.fetch import Fetcher
from dgb.scraper.run import scrape_agency
from tests.support.articles import ARTICLES, article_dict, mirrored_agency
from tests.support.fetch import FAST
from tests.support.sql import all_rows as _rows

pytestmark = pytest.mark.stack


@pytest.mark.parametrize("redirect", [True, False], ids=["301", "404"])
def test_a_move_seen_in_the_listing_relocates_the_stored_article(pg, mirror, redirect):
    site, server, base = mirror(ARTICLES)
    mec = mirrored_agency(base, "mec")
    with Fetcher(FAST) as f:
        scrape_agency(pg, mec, f)
    [(news_id, uid, old_url, version)] = _rows(
        pg, "SELECT id, unique_id, url, version FROM news WHERE url LIKE '%/pe-de-meia-paga'"
    )
    site.move("mec", "pe-de-meia-paga", "pe-de-meia-paga-estudantes", redirect=redirect)
    with Fetcher(FAST) as f:
        report = scrape_agency(pg, mec, f)
    assert report.moved == 1 and report.new == [] and report.status == "success", report
    assert _rows(pg, "SELECT count(*) FROM news")[0][0] == 5  # not stored twice
    [(url, same_uid, removed, indexed)] = _rows(
        pg, "SELECT url, unique_id, removed_at, indexed_version FROM news WHERE id = %s", news_id
    )
    assert url.endswith("/pe-de-meia-paga-estudantes") and same_uid == uid and removed is None
    assert indexed is None  # the index re-syncs the document at its new address
    history = _rows(pg, "SELECT field_changed, old_value, new_value, source FROM news_update_history")
    assert history == [("url", old_url, url, "scrape")]
    with Fetcher(FAST) as f:  # the next run: nothing more to do
        again = scrape_agency(pg, mec, f)
    assert again.moved == 0 and again.new == [] and _rows(pg, "SELECT count(*) FROM news")[0][0] == 5


def test_a_twin_at_another_address_is_stored_beside_the_first(pg, mirror):
    """Same agency, title and date, the first address still answering: two articles."""
    site, server, base = mirror(ARTICLES)
    mec = mirrored_agency(base, "mec")
    with Fetcher(FAST) as f:
        scrape_agency(pg, mec, f)
    site.publish(
        article_dict("mec", "enem-tem-recorde-2", "Enem tem recorde de inscritos confirmados", ARTICLES[1][3])
    )
    with Fetcher(FAST) as f:
        report = scrape_agency(pg, mec, f)
    assert report.moved == 0 and len(report.new) == 1, report
    title = "Enem tem recorde de inscritos confirmados"
    rows = _rows(pg, "SELECT unique_id, url FROM news WHERE title = %s", title)
    assert len(rows) == 2 and rows[0][0] != rows[1][0]
    assert _rows(pg, "SELECT count(*) FROM news_update_history")[0][0] == 0
