"""Where a gone article may have gone: the look-ups after a 404/410 of a gov.br (Plone) article.

A Plone rename without a redirect leaves the old address answering 404 while the article lives on
at a new one. Before such an answer counts towards a removal, two look-ups name a candidate
address, each costing one or two requests of the host budget:

1. :func:`find_plone6_page`: the agency's Plone 6 search by the stored title
   (``++api++/@search?Title=<title>``); an item with that title and publication day.
2. :func:`find_in_listing`: the agency's own listing, at the article's place in it. A listing is
   newest first, so the article sits below the agency's live stored articles that are newer than
   it: their count, rounded down to a page, names the page (``?b_start:int=N`` on a classic
   listing of 30 a page, ``b_start=N`` on the Plone 6 search the scraper reads, 25 a page). The
   page's dates say whether the place is on it or on a neighbour (one more page at most). Items
   the pipeline stores are not candidates: their address is stored, or their title is another
   stored article's of around the same day (that one moved too). Of the rest, the candidate is the
   item with the stored title, or else the only item that shows the stored publication time (to
   the second when the listing shows seconds, else to the minute): an editor rewrote the title
   (and so the address) before integrity saw the edit. Two such items are not guessed between.
   This finds an article moved deep in its listing, below where the scraper reads.

A candidate is only a guess: :func:`dgb.integrity.checks.check_content` fetches it and compares it
with the stored article (the same title or text, or the page's own publication time) before it
counts as a move.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from psycopg.pq import TransactionStatus

from dgb.agencies import load_agencies
from dgb.fetch import Fetcher, Response, wire_bytes
from dgb.scrape_errors import ScrapeError
from dgb.scraper.dates import parse_iso_datetime
from dgb.scraper.listing import parse_listing_page
from dgb.scraper.markup import decode_bytes
from dgb.scraper.run import PLONE6_PAGE_SIZE, listing_url
from dgb.scraper.sites import is_on_site, own_sites

LISTING_PAGE_SIZE = {"html": 30, "plone6_api": PLONE6_PAGE_SIZE}
LISTING_PAGES = 2  # the estimated page and at most one neighbour


def row_get(row: Any, key: str, default=None):
    """A column of a stored row (a dict or an object with attributes); ``default`` when absent."""
    if row is None:
        return default
    if isinstance(row, dict):
        return row.get(key, default)
    return getattr(row, key, default)


def page_url(fetched: str) -> str:
    """The public URL of a fetched page (a Plone 6 API URL without its ``/++api++`` segment)."""
    parts = urlsplit(fetched)
    path = parts.path.replace("/++api++/", "/", 1)
    if path.endswith("/++api++"):
        path = path[: -len("/++api++")]
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def same_publication(stored: Any, page: Any) -> bool:
    """Do the stored article and a page give the same publication time (within the minute a
    listing or a page shows it to)? Unknown on either side: no."""
    if stored is None or page is None:
        return False
    try:
        return abs((stored - page).total_seconds()) < 60
    except TypeError:  # one side without a time zone: not comparable
        return False


def norm_title(text: str | None) -> str:
    return " ".join((text or "").split()).casefold()


def _cost(fetcher: Fetcher, before: int, resp: Response | None) -> int:
    """Bytes of one request: the fetcher's count since ``before``, with the response's head."""
    extra = wire_bytes(resp) - len(resp.content) if resp is not None else 0
    return fetcher.stats.bytes - before + extra


# -- 1. the Plone 6 search by title ---------------------------------------------------------------


def plone6_search_url(url: str, agency_key: str, title: str) -> str | None:
    """The agency's Plone 6 search for news items titled ``title`` (the agency's site root)."""
    parts = urlsplit(url)
    segments = parts.path.strip("/").split("/")
    if agency_key not in segments or not (title or "").strip():
        return None
    at = segments.index(agency_key)
    path = "/" + "/".join(segments[: at + 1] + ["++api++", "@search"])
    query = f"portal_type=News%20Item&b_size=10&Title={quote(title.strip())}"
    return urlunsplit((parts.scheme, parts.netloc, path, query, ""))


def find_plone6_page(fetcher: Fetcher, news_row: Any) -> tuple[str | None, int]:
    """The public URL of the Plone 6 item with the article's title and publication day, or None;
    and the bytes the look-up cost. One request; any failure means "not found"."""
    url, agency_key, title = (
        row_get(news_row, "url"),
        row_get(news_row, "agency_key"),
        row_get(news_row, "title"),
    )
    published = row_get(news_row, "published_at")
    search = plone6_search_url(url, agency_key, title)
    if search is None:
        return None, 0
    before = fetcher.stats.bytes
    try:
        resp = fetcher.get(search, headers={"Accept": "application/json"}, raise_for_status=False)
    except ScrapeError:
        return None, fetcher.stats.bytes - before
    nbytes = _cost(fetcher, before, resp)
    if resp.status != 200:
        return None, nbytes
    try:
        items = json.loads(resp.content).get("items") or []
    except (ValueError, AttributeError):
        return None, nbytes
    want_day = published.date() if isinstance(published, datetime) else None
    for item in items:
        if not isinstance(item, dict) or norm_title(item.get("title")) != norm_title(title):
            continue
        found = item.get("@id")
        if not isinstance(found, str) or not found or page_url(found) == url:
            continue
        if not is_on_site(found, own_sites(url)):  # a search answer naming another site: not it
            continue
        effective = item.get("effective") or item.get("created")
        if want_day is not None and isinstance(effective, str):
            day = parse_iso_datetime(effective)
            if day is not None and abs((day.date() - want_day).days) > 1:
                continue
        return page_url(found), nbytes
    return None, nbytes


# -- 2. the listing, at the article's place -------------------------------------------------------


@dataclass(frozen=True)
class Listed:
    """One item of a listing page: its address, title and publication time as listed."""

    url: str
    title: str
    published_at: datetime | None


def listing_page_url(kind: str, listing: str, agency_key: str, start: int) -> str:
    """The listing page that begins at item ``start``: a classic listing's ``?b_start:int=N``, or
    the scraper's Plone 6 search (newest first) with summaries and their ``effective`` only."""
    if kind == "plone6_api":
        parts = urlsplit(listing_url(SimpleNamespace(key=agency_key, url=listing, site_kind=kind)))
        query = dict(parse_qsl(parts.query))
        query.pop("fullobjects", None)
        query.update(b_start=str(start), metadata_fields="effective")
        return urlunsplit(parts._replace(query=urlencode(query)))
    parts = urlsplit(listing)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "b_start:int"]
    if start > 0:
        query.append(("b_start:int", str(start)))
    return urlunsplit(parts._replace(query=urlencode(query, safe=":"), fragment=""))


def listed_items(kind: str, resp: Response, agency_key: str) -> list[Listed]:
    """The items of one listing page on the page's own site (the scraper's parser for a classic
    page; a Plone 6 search's ``@id``, ``title`` and ``effective``). Raises ``ScrapeError`` or
    ``ValueError`` on a page that is not a listing."""
    text = decode_bytes(resp.content, resp.charset)
    if kind != "plone6_api":
        page = parse_listing_page(text, resp.url, agency_key)
        return [Listed(i.url, i.title, i.published_at) for i in page.items]
    data = json.loads(text)
    raw = data.get("items") if isinstance(data, dict) else None
    if not isinstance(raw, list):
        raise ValueError(f"Plone 6 search {resp.url[:200]}: no 'items' list")
    out, sites = [], own_sites(resp.url)
    for item in raw:
        if isinstance(item, dict) and isinstance(item.get("@id"), str) and is_on_site(item["@id"], sites):
            effective = item.get("effective") if isinstance(item.get("effective"), str) else None
            out.append(
                Listed(page_url(item["@id"]), str(item.get("title") or ""), parse_iso_datetime(effective))
            )
    return out


def shown_same(stored: datetime | None, listed: datetime | None) -> bool:
    """Does a listing show the stored publication time? To the second when it shows seconds (a
    Plone 6 ``effective``), else to the minute (a classic listing's ``16h40``). Pure."""
    if stored is None or listed is None:
        return False
    try:
        if listed.second or listed.microsecond:
            return abs((stored - listed).total_seconds()) < 1
        return stored - timedelta(seconds=stored.second, microseconds=stored.microsecond) == listed
    except TypeError:  # one side without a time zone: not comparable
        return False


def pick(
    items: list[Listed],
    title: str | None,
    published: datetime,
    gone_url: str,
    known: set[str],
    taken: set[str] = frozenset(),
) -> str | None:
    """The candidate among a listing's items for a gone article, or None. Items the pipeline
    stores are not candidates: their address is ``known``, or their title is ``taken`` by another
    stored article of the agency published around the same day (one that has moved too). Among
    the rest: the item with the stored title and publication day, else the only item that shows
    the stored publication time (:func:`shown_same`). Pure."""
    fresh = [
        i
        for i in {i.url: i for i in items}.values()
        if i.url != gone_url and i.url not in known and norm_title(i.title) not in taken
    ]
    for i in fresh:
        day_ok = i.published_at is None or abs((i.published_at.date() - published.date()).days) <= 1
        if norm_title(i.title) == norm_title(title) and day_ok:
            return i.url
    timed = [i.url for i in fresh if shown_same(published, i.published_at)]
    return timed[0] if len(timed) == 1 else None


def neighbour(items: list[Listed], published: datetime, start: int, size: int) -> int | None:
    """The start of the page to read next for an article published at ``published``, given one
    read page beginning at ``start``: the earlier page when the article is newer than the page
    (or at its top edge), the later one when older (or at its bottom edge), None when it is
    inside the page or no such page exists. Pure."""
    times = [i.published_at for i in items if i.published_at is not None]
    if not times:
        return None
    newest, oldest = max(times), min(times)
    later = start + size if len(items) >= size else None
    earlier = max(0, start - size) if start > 0 else None
    above, below = (published - newest).total_seconds(), (oldest - published).total_seconds()
    if above >= 60:  # newer than every item of the page: its place is on an earlier page
        return earlier
    if below >= 60:  # older than every item: a later page
        return later
    if above > -60:  # within the minute of the page's top: maybe just above it
        return earlier
    if below > -60:  # within the minute of the page's bottom: maybe just below it
        return later
    return None


def _newer_live(conn, agency_key: str, published: datetime) -> int:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM news WHERE agency_key = %s AND published_at > %s AND removed_at IS NULL",
            (agency_key, published),
        )
        return int(cur.fetchone()[0])


def _stored_near(conn, agency_key: str, gone_url: str, published: datetime, urls: list[str]):
    """What the pipeline stores that a listed item could be: the listed addresses it knows, and
    the (normalised) titles of the agency's other articles published within a day of the gone one."""
    with conn.cursor() as cur:
        cur.execute("SELECT url FROM news WHERE agency_key = %s AND url = ANY(%s)", (agency_key, urls))
        known = {r[0] for r in cur.fetchall()}
        cur.execute(
            "SELECT title FROM news WHERE agency_key = %s AND url <> %s AND published_at BETWEEN %s AND %s",
            (agency_key, gone_url, published - timedelta(days=1), published + timedelta(days=1)),
        )
        taken = {norm_title(r[0]) for r in cur.fetchall()}
    return known, taken


def _agency_url(conn, agency_key: str) -> str | None:
    with conn.cursor() as cur:
        cur.execute("SELECT url FROM agencies WHERE key = %s", (agency_key,))
        found = cur.fetchone()
    if found:
        return found[0]
    agency = load_agencies().get(agency_key)
    return agency.url if agency is not None else None


def listing_on_site(article_url: str, listing: str, agency_key: str) -> str | None:
    """The agency's listing (its catalogue URL) on the site the article is served from: the
    article URL up to the agency's segment, then the listing's path after it (so a mirror or a
    rewritten host is followed, and the look-up never leaves the article's site)."""
    art, lst = urlsplit(article_url), urlsplit(listing)
    art_segments, lst_segments = art.path.strip("/").split("/"), lst.path.strip("/").split("/")
    if agency_key not in art_segments or agency_key not in lst_segments:
        return None
    head = art_segments[: art_segments.index(agency_key) + 1]
    tail = lst_segments[lst_segments.index(agency_key) + 1 :]
    return urlunsplit((art.scheme, art.netloc, "/" + "/".join(head + tail), lst.query, ""))


def _reading(conn, read, *args):
    """Run ``read(conn, *args)`` without leaving a transaction open across the network wait that follows
    (committed when none was open before); a database error means "not found"."""
    idle = conn.info.transaction_status == TransactionStatus.IDLE
    try:
        value = read(conn, *args)
    except Exception:
        if idle:
            conn.rollback()
        return None
    if idle:
        conn.commit()
    return value


def find_in_listing(fetcher: Fetcher, conn, news_row: Any) -> tuple[str | None, int]:
    """The address the agency's listing shows the gone article at now, or None; and the bytes it
    cost. Reads the page at the article's estimated place and at most one neighbour (see the
    module doc); a failed request or an unreadable page means "not found"."""
    kind, agency_key = row_get(news_row, "site_kind"), row_get(news_row, "agency_key")
    published, gone_url = row_get(news_row, "published_at"), row_get(news_row, "url")
    if kind not in LISTING_PAGE_SIZE or not isinstance(published, datetime) or conn is None:
        return None, 0
    catalogued = row_get(news_row, "agency_url") or _reading(conn, _agency_url, agency_key)
    listing = listing_on_site(gone_url, catalogued, agency_key) if catalogued and gone_url else None
    newer = _reading(conn, _newer_live, agency_key, published)
    if not listing or newer is None:
        return None, 0
    size = LISTING_PAGE_SIZE[kind]
    start: int | None = (newer // size) * size
    seen: list[Listed] = []
    read: set[int] = set()
    nbytes = 0
    while start is not None and start not in read and len(read) < LISTING_PAGES:
        read.add(start)
        before = fetcher.stats.bytes
        try:
            resp = fetcher.get(listing_page_url(kind, listing, agency_key, start), raise_for_status=False)
        except ScrapeError:
            nbytes += fetcher.stats.bytes - before
            break
        nbytes += _cost(fetcher, before, resp)
        if resp.status != 200:
            break
        try:
            items = listed_items(kind, resp, agency_key)
        except (ScrapeError, ValueError):
            break
        seen += items
        stored = _reading(conn, _stored_near, agency_key, gone_url, published, [i.url for i in seen])
        if stored is None:
            return None, nbytes
        found = pick(seen, row_get(news_row, "title"), published, gone_url, *stored)
        if found is not None:
            return found, nbytes
        start = neighbour(items, published, start, size)
    return None, nbytes
