"""The two checks of an article, cheapest signal first. Neither writes to the database.

Image (:func:`check_image`): HEAD; when the server refuses HEAD (405/501/403/400, which many
servers answer to HEAD while GET works), or answers 2xx without a content type, a GET of the
first KiB (``Range: bytes=0-1023``).
Redirects are followed by the fetcher within its cap, each hop through the URL guard.

==============  ==================================================================================
``ok``          2xx and an ``image/*`` content type, at the stored URL
``redirect``    2xx image, but reached through redirect(s): works, the stored URL is stale
``broken``      4xx (after the GET fallback), a 2xx that is not an image, too many redirects,
                or a URL the policy refuses (private/loopback/non-allowlisted target)
``timeout``     the host did not answer in time (transient: no flag)
``error``       429/5xx after the fetcher's retries and backoff, connection errors, anti-bot
                pages (transient: no flag)
``no_image``    the article has no image
==============  ==================================================================================

Content (:func:`check_content`): conditional GET with ``If-None-Match`` (stored ETag) and
``If-Modified-Since`` (stored Last-Modified): 304 -> ``unchanged`` without a body. 404/410 ->
``removed``. 200 -> parsed with the scraper's own parser for the agency's site kind (gov.br HTML,
Plone 6 API, EBC) and compared on extracted, normalised fields (``store.changed_fields``:
title, subtitle, content, image), so rotating widgets or markup churn are not changes. The
page's own updated date (JSON-LD ``dateModified`` / "Atualizado em") is read and reported.
Anything else (429/5xx after retries, anti-bot, unparsable page, refused URL) -> ``error``.

Moved, not removed (issue 16): a 200 reached through redirect(s) at another URL that parses as
the same article (not both title and content differ, or the page carries the stored publication
time) sets ``moved_to`` (the page's new URL, ``found_via="redirect"``). A 404/410 of a gov.br
(Plone) article is followed by the look-ups of :mod:`dgb.integrity.lookups`: the agency's Plone 6
search by title, then its listing at the article's place by date. A page they name is fetched and
compared by the same rule (``found_via="plone6_search"`` or ``"listing"``). A ``removed`` result
is only an answer: the service decides, with more evidence, whether the article is really gone
(see :mod:`dgb.integrity.evidence`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from dgb.fetch import Fetcher, Response, wire_bytes
from dgb.integrity.lookups import find_in_listing, find_plone6_page, page_url, same_publication
from dgb.integrity.lookups import row_get as _get
from dgb.scrape_errors import NetworkError, ScrapeError, UrlBrokenError
from dgb.scraper import store
from dgb.scraper.models import Article
from dgb.urlpolicy import UrlRefused

HEAD_REFUSED = frozenset({400, 403, 405, 501})
RANGE_HEADER = {"Range": "bytes=0-1023"}
IMAGE_STATUSES = ("ok", "redirect", "broken", "timeout", "error", "no_image")
CONTENT_STATUSES = ("unchanged", "modified", "removed", "error")


def _is_timeout(exc: BaseException) -> bool:
    cause = exc.__cause__
    return (
        isinstance(cause, httpx.TimeoutException)
        or "timeout" in str(exc).lower()
        or "not complete after" in str(exc)
    )


# -- image ---------------------------------------------------------------------------------------


@dataclass
class ImageResult:
    status: str
    http_status: int | None = None
    content_type: str | None = None
    url: str | None = None
    final_url: str | None = None
    method: str | None = None
    redirects: list[str] = field(default_factory=list)
    bytes_fetched: int = 0
    error: str | None = None

    @property
    def broken(self) -> bool:
        return self.status == "broken"

    @property
    def transient(self) -> bool:
        return self.status in ("timeout", "error")

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "http_status": self.http_status,
            "content_type": self.content_type,
            "url": self.url,
            "final_url": self.final_url,
            "method": self.method,
            "redirects": list(self.redirects),
            "bytes_fetched": self.bytes_fetched,
            "error": self.error,
        }


def check_image(fetcher: Fetcher, url: str | None) -> ImageResult:
    """Is the article's image still served? See the module docstring for the statuses."""
    if not url or not str(url).strip():
        return ImageResult("no_image")
    before = fetcher.stats.bytes
    resp: Response | None = None
    method = "HEAD"
    try:
        resp = fetcher.get(url, method="HEAD", raise_for_status=False)
        head_untyped = 200 <= resp.status < 300 and not resp.headers.get("content-type")
        if resp.status in HEAD_REFUSED or head_untyped:  # refused, or a HEAD that says too little
            method = "GET"
            resp = fetcher.get(url, method="GET", headers=dict(RANGE_HEADER), raise_for_status=False)
    except UrlRefused as exc:
        return ImageResult(
            "broken", url=url, method=method, error=str(exc), bytes_fetched=fetcher.stats.bytes - before
        )
    except NetworkError as exc:
        status = "timeout" if _is_timeout(exc) else "error"
        return ImageResult(
            status, url=url, method=method, error=str(exc), bytes_fetched=fetcher.stats.bytes - before
        )
    except UrlBrokenError as exc:  # too many redirects / redirect loop; robots disallow
        status = "error" if "robots" in str(exc) else "broken"
        return ImageResult(
            status, url=url, method=method, error=str(exc), bytes_fetched=fetcher.stats.bytes - before
        )
    except ScrapeError as exc:  # anti-bot page, response over the size cap...
        return ImageResult(
            "error", url=url, method=method, error=str(exc), bytes_fetched=fetcher.stats.bytes - before
        )
    ctype = (resp.headers.get("content-type") or "").split(";")[0].strip().lower() or None
    nbytes = fetcher.stats.bytes - before + wire_bytes(resp) - len(resp.content)
    common = {
        "http_status": resp.status,
        "content_type": ctype,
        "url": url,
        "final_url": resp.url,
        "method": method,
        "redirects": list(resp.redirects),
        "bytes_fetched": nbytes,
    }
    if 200 <= resp.status < 300:
        if ctype and ctype.startswith("image/"):
            return ImageResult("redirect" if resp.redirects else "ok", **common)
        return ImageResult(
            "broken", error=f"HTTP {resp.status} but content type {ctype or 'missing'}", **common
        )
    if resp.status == 429 or resp.status >= 500 or resp.status == 408:
        return ImageResult("error", error=f"HTTP {resp.status}", **common)
    return ImageResult("broken", error=f"HTTP {resp.status}", **common)


# -- content -------------------------------------------------------------------------------------


@dataclass
class ContentResult:
    status: str
    changed_fields: list[str] = field(default_factory=list)
    bytes_fetched: int = 0
    http_status: int | None = None
    etag: str | None = None
    last_modified: str | None = None
    page_updated_at: datetime | None = None
    date_moved: bool = False  # the page's own "updated" date moved since we stored it
    not_modified: bool = False  # answered 304
    final_url: str | None = None
    fetched_url: str | None = None
    article: Article | None = None
    error: str | None = None
    error_category: str | None = None
    moved_to: str | None = None  # the article answers at this other URL now (redirect / Plone 6)
    found_via: str | None = None  # "redirect" or "plone6_search" when moved_to is set

    @property
    def transient(self) -> bool:
        return self.status == "error"

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "changed_fields": list(self.changed_fields),
            "bytes_fetched": self.bytes_fetched,
            "http_status": self.http_status,
            "etag": self.etag,
            "last_modified": self.last_modified,
            "page_updated_at": self.page_updated_at.isoformat() if self.page_updated_at else None,
            "date_moved": self.date_moved,
            "not_modified": self.not_modified,
            "final_url": self.final_url,
            "fetched_url": self.fetched_url,
            "error": self.error,
            "error_category": self.error_category,
            "moved_to": self.moved_to,
            "found_via": self.found_via,
        }


def site_kind(conn, agency_key: str, url: str) -> str:
    """The agency's site kind (``html``, ``plone6_api``, ``ebc``): the agencies table, else the
    agency catalogue, else the URL."""
    if conn is not None:
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT site_kind FROM agencies WHERE key = %s", (agency_key,))
                row = cur.fetchone()
            if row and row[0]:
                return row[0]
        except Exception:
            conn.rollback()
    kind = _catalogue_kinds().get(agency_key)
    if kind:
        return kind
    parts = urlsplit(url)
    first = parts.path.lstrip("/").split("/", 1)[0]
    host = (parts.hostname or "").lower()
    if host.endswith("ebc.com.br") or first.lower().endswith("ebc.com.br"):
        return "ebc"
    return "html"


@lru_cache(maxsize=1)
def _catalogue_kinds() -> dict[str, str]:
    """Site kinds of the agency catalogue (used when the agencies table has no row)."""
    try:
        from dgb.agencies import load_agencies

        return {key: a.site_kind for key, a in load_agencies().items()}
    except Exception:
        return {}


def plone6_api_url(url: str, agency_key: str) -> str | None:
    """``.../<agency>/pt-br/x/slug`` -> ``.../<agency>/++api++/pt-br/x/slug`` (Plone 6 REST)."""
    parts = urlsplit(url)
    segments = parts.path.strip("/").split("/")
    if agency_key not in segments:
        return None
    at = segments.index(agency_key)
    path = "/" + "/".join(segments[: at + 1] + ["++api++"] + segments[at + 1 :])
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def same_article(changed: list[str], published_same: bool = False) -> bool:
    """Is a page found at another URL the same article? Yes when it carries the stored article's
    publication time (``published_same``: an editor who rewrote the title and the text, and so
    the URL, as Plone does on a rename); otherwise not when both title and content differ (a
    redirect to a home page or to another article)."""
    return published_same or not {"title", "content"} <= set(changed)


def parse_page(
    kind: str, resp: Response, url: str, agency_key: str, published_fallback: datetime | None
) -> Article:
    """The scraper's parser for this site kind, on the fetched bytes, as the stored URL."""
    from dgb.scraper.markup import decode_bytes

    if kind == "plone6_api":
        from dgb.scraper.plone6 import parse_plone6_article

        art = parse_plone6_article(decode_bytes(resp.content, resp.charset), resp.url, agency_key)
    elif kind == "ebc":
        from dgb.scraper.ebc import parse_ebc_article

        art = parse_ebc_article(
            decode_bytes(resp.content, resp.charset), url, agency_key, published_fallback=published_fallback
        )
    else:
        from dgb.scraper.article import parse_article_bytes

        art = parse_article_bytes(
            resp.content, url, agency_key, charset=resp.charset, published_fallback=published_fallback
        )
    art.url = url
    if art.published_at is None and published_fallback is not None:
        art.with_published_at(published_fallback)
    return art


def _page_published_same(kind: str, resp: Response, url: str, agency_key: str, published: Any) -> bool:
    """Does the page itself (not the stored time given as its fallback) carry the stored
    article's publication time? Parsed again without the fallback: only for a redirect whose page
    differs in both title and content, which is rare."""
    try:
        own = parse_page(kind, resp, url, agency_key, None).published_at
    except Exception:
        return False
    return same_publication(published, own)


def stored_fields(news_row: Any) -> dict[str, Any]:
    return {f: _get(news_row, f) for f in store.CHANGE_FIELDS}


def article_fields(art: Article) -> dict[str, Any]:
    return {"title": art.title, "subtitle": art.subtitle, "content": art.content, "image_url": art.image_url}


def check_content(fetcher: Fetcher, conn, news_row: Any, state_row: Any = None) -> ContentResult:
    """Has the article changed, or gone, at the source? See the module docstring."""
    url = _get(news_row, "url")
    agency_key = _get(news_row, "agency_key")
    published = _get(news_row, "published_at")
    if isinstance(news_row, dict) and "site_kind" in news_row:  # the caller already joined agencies
        kind = news_row["site_kind"] or site_kind(None, agency_key, url)
    else:
        kind = site_kind(conn, agency_key, url)
    fetch_url = (plone6_api_url(url, agency_key) if kind == "plone6_api" else None) or url
    if kind == "plone6_api" and fetch_url == url:
        kind = "html"
    etag, last_modified = _get(state_row, "etag"), _get(state_row, "last_modified")
    headers: dict[str, str] = {}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    before = fetcher.stats.bytes
    try:
        resp = fetcher.get(fetch_url, headers=headers, raise_for_status=False)
    except ScrapeError as exc:
        return ContentResult(
            "error",
            bytes_fetched=fetcher.stats.bytes - before,
            etag=etag,
            last_modified=last_modified,
            fetched_url=fetch_url,
            error=str(exc),
            error_category="url_refused" if isinstance(exc, UrlRefused) else exc.category,
        )
    nbytes = fetcher.stats.bytes - before + wire_bytes(resp) - len(resp.content)
    new_etag = resp.headers.get("etag")
    new_lm = resp.headers.get("last-modified")
    common = {
        "bytes_fetched": nbytes,
        "http_status": resp.status,
        "final_url": resp.url,
        "fetched_url": fetch_url,
    }
    if resp.status == 304:
        return ContentResult(
            "unchanged",
            not_modified=True,
            etag=new_etag or etag,
            last_modified=new_lm or last_modified,
            page_updated_at=_get(state_row, "page_updated_at"),
            **common,
        )
    if resp.status in (404, 410):
        gone = ContentResult("removed", etag=etag, last_modified=last_modified, **common)
        if kind == "ebc" or not _lookups_allowed(news_row):
            return gone
        return _look_elsewhere(fetcher, conn, {**_as_dict(news_row), "site_kind": kind}, gone)
    if not (200 <= resp.status < 300):
        category = "network_error" if resp.status in (408, 429) or resp.status >= 500 else "url_broken"
        return ContentResult(
            "error",
            etag=etag,
            last_modified=last_modified,
            error=f"HTTP {resp.status}",
            error_category=category,
            **common,
        )
    try:
        art = parse_page(kind, resp, url, agency_key, published)
    except ScrapeError as exc:
        return ContentResult(
            "error",
            etag=etag,
            last_modified=last_modified,
            error=str(exc),
            error_category=exc.category,
            **common,
        )
    except Exception as exc:
        return ContentResult(
            "error",
            etag=etag,
            last_modified=last_modified,
            error=f"parser failed: {exc!r}",
            error_category="unknown",
            **common,
        )
    changed = store.changed_fields(stored_fields(news_row), article_fields(art))
    page_updated = art.updated_at
    known_updated = _get(state_row, "page_updated_at") or _get(news_row, "updated_datetime")
    date_moved = bool(page_updated and known_updated and page_updated != known_updated)
    moved_to = page_url(resp.url) if resp.redirects else None
    if moved_to == url:
        moved_to = None
    elsewhere = moved_to or (None if _lookups_allowed(news_row) else url)  # a redirect's or a look-up's page
    if elsewhere is not None and not (
        same_article(changed) or _page_published_same(kind, resp, url, agency_key, published)
    ):
        how = "redirected to" if moved_to else "found at"
        return ContentResult(
            "error",
            etag=etag,
            last_modified=last_modified,
            error=f"{how} {elsewhere}, which is not the same article",
            error_category="url_broken",
            **common,
        )
    return ContentResult(
        "modified" if changed else "unchanged",
        changed_fields=changed,
        etag=new_etag,
        last_modified=new_lm,
        page_updated_at=page_updated,
        date_moved=date_moved,
        article=art,
        moved_to=moved_to,
        found_via="redirect" if moved_to else None,
        **common,
    )


def _look_elsewhere(fetcher: Fetcher, conn, news_row: dict, gone: ContentResult) -> ContentResult:
    """After a 404/410: the page the look-ups find for the article (:mod:`dgb.integrity.lookups`:
    the Plone 6 search by title, then the listing at the article's place), fetched and compared
    (the same article: see :func:`same_article`, or its own publication time), as a move; else the
    gone answer. Each look-up's requests are added to the bytes fetched."""
    for via, lookup in (("plone6_search", find_plone6_page), ("listing", _listing_lookup(conn))):
        found, extra = lookup(fetcher, news_row)
        gone.bytes_fetched += extra
        if found is None:
            continue
        moved = check_content(fetcher, conn, {**news_row, "url": found, "_no_lookup": True}, None)
        gone.bytes_fetched += moved.bytes_fetched
        if moved.status in ("unchanged", "modified"):
            moved.bytes_fetched = gone.bytes_fetched
            moved.moved_to, moved.found_via = found, via
            return moved
    return gone


def _listing_lookup(conn):
    return lambda fetcher, row: find_in_listing(fetcher, conn, row)


def _as_dict(row: Any) -> dict:
    if isinstance(row, dict):
        return dict(row)
    return {
        k: _get(row, k)
        for k in (
            "url",
            "agency_key",
            "agency_name",
            "title",
            "subtitle",
            "content",
            "image_url",
            "published_at",
            "updated_datetime",
            "site_kind",
            "agency_url",
        )
    }


def _lookups_allowed(row: Any) -> bool:
    return not (isinstance(row, dict) and row.get("_no_lookup"))
