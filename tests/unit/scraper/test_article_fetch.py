"""How a failing article fetch is categorised: the site's answer (a network error) or its markup
(a parser's exception: ``html_changed``) versus the fetch's own machinery failing (the host
budget's database down during a PostgreSQL crash: ``unknown``, not a markup change)."""

from __future__ import annotations

from types import SimpleNamespace

import psycopg
import pytest

from dgb.scrape_errors import NetworkError, ScrapeError
from dgb.scraper.models import ListingItem
from dgb.scraper.run import _fetch_article

AGENCY = SimpleNamespace(key="mec", site_kind="plone_classic")
ITEM = ListingItem(title="Aviso", url="http://127.0.0.1:9/mec/noticias/aviso")


class _Fetcher:
    def __init__(self, outcome):
        self.outcome = outcome

    def get(self, url):
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


def _error(outcome) -> ScrapeError:
    with pytest.raises(ScrapeError) as info:
        _fetch_article(AGENCY, ITEM, _Fetcher(outcome))
    return info.value


def test_a_database_error_inside_the_fetch_is_not_a_markup_change():
    err = _error(psycopg.OperationalError("connection to server at 127.0.0.1, port 5432 failed"))
    assert (err.category, err.kind) == ("unknown", "unknown")
    assert "OperationalError fetching http://127.0.0.1:9/mec/noticias/aviso" in str(err)


def test_the_sites_own_failure_keeps_its_category():
    err = _error(NetworkError("HTTP 503 for the article"))
    assert err.category == "network_error"
