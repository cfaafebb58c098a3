"""Helpers of the integrity tests on the local gov.br site: a checker fetching through the URL guard
(the site's loopback host allowed), the site's agencies scraped, articles found or inserted."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

from dgb import db
from dgb.agencies import load_agencies
from dgb.fetch import Fetcher
from dgb.scraper.run import scrape_agency
from dgb.urlpolicy import UrlPolicy, guarded_transport

from .fetch import FAST
from .sql import one_row


def _agency(base, key, kind=None):
    a = load_agencies(base_url=base)[key]
    return replace(a, site_kind=kind) if kind else a


def _policy(base) -> UrlPolicy:
    return UrlPolicy(allowed_hosts=["gov.br", "*.gov.br", urlsplit(base).netloc], allow_loopback=True)


def checker(base, sleep=None, policy=FAST) -> Fetcher:
    pol = _policy(base)
    kw = {"sleep": sleep} if sleep else {}
    return Fetcher(policy, url_guard=pol.guard, transport=guarded_transport(pol), **kw)


def scrape_site(pg, base, key="mec", kind=None):
    with Fetcher(FAST) as f:
        report = scrape_agency(pg, _agency(base, key, kind), f)
    assert report.status == "success", report
    return report


def uid_of(conn, slug):
    return one_row(conn, "SELECT unique_id FROM news WHERE url LIKE %s", f"%/{slug}")[0]


def insert_news(conn, uid, url, image_url=None, agency="mec", published=None, title="Artigo"):
    published = published or datetime.now(UTC) - timedelta(days=1)
    with db.transaction(conn) as cur:
        cur.execute(
            "INSERT INTO news (unique_id, agency_key, agency_name, title, url, image_url, content,"
            " published_at) VALUES (%s, %s, %s, %s, %s, %s, 'texto', %s) RETURNING id",
            (uid, agency, agency.upper(), title, url, image_url, published),
        )
        return cur.fetchone()[0]
