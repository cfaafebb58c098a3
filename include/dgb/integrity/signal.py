"""The change signal of Plone 6 agencies (issue 36): one request tells which articles changed.

Checking an article costs a request of www.gov.br's shared budget, changed or not. A Plone 6
agency's own search, sorted by modification date, lists its recently modified news items with their
``modified`` date in one request (:func:`signal_url`: ``@search?portal_type=News Item&
sort_on=modified&sort_order=descending&b_size=25&metadata_fields=modified``, the folder the scraper
reads). Each budget run (:func:`dgb.integrity.runs.run_budget`) reads it once per Plone 6 agency
with stored articles, through the run's fetcher (the host budget, integrity priority):

1. **Changed articles are marked.** A listed item whose ``modified`` is later than what we stored
   (the last check's page date, else the scrape's ``updated_datetime``) gets
   ``integrity_state.signal_modified_at``/``signal_seen_at`` (migration 0019); :func:`marked` gives
   them to the run, which checks them first, whole (no validators: the page is known to differ).
   The mark stays until a check reads a page at least that new (:mod:`dgb.integrity.recording`),
   so a failed check loses nothing: the article stays marked, and is never skipped.
2. **The watermark.** ``integrity_signal`` keeps per agency the newest ``modified`` listed. A read
   must reach back to it (an item older than it, or the end of the results); then every change
   since the previous read was listed. ``covered_since`` is when that chain began: the first
   successful read, or a read that could not reach back (more than a page of changes) restarts it.
3. **Unchanged articles are skipped** (:func:`skippable`): an article of an agency whose read
   succeeded this run, under the searched folder, not marked, last checked successfully at or
   after ``covered_since``, has not changed since that check. The signal says nothing of removals,
   moves or broken images, so the article is skipped only while its last check is younger than
   its age band's detection target (:data:`dgb.integrity.tiers.AGE_BANDS`: 20 min under 3 h, ...,
   30 days past 90 days) and only when the run would not check its image anyway.

A read that fails (an error answer, a timeout, JSON that is not a search, items without
``modified`` or not in descending order: a site that ignores the sort) changes nothing: no article
is skipped for that agency, every due article is checked one by one as without the signal.
Classic HTML and EBC agencies have no such search and are always checked one by one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from dgb.db import transaction
from dgb.fetch import Fetcher
from dgb.integrity.tiers import AGE_BANDS, Candidates, band_for
from dgb.scrape_errors import ScrapeError
from dgb.scraper.markup import decode_bytes
from dgb.scraper.plone6 import parse_plone6_search
from dgb.scraper.run import listing_url

log = logging.getLogger("dgb.integrity")

PAGE_SIZE = 25


def signal_url(agency) -> str:
    """The agency's search sorted by modification date, newest first, summaries with ``modified``
    (the listing's folder and query, ``sort_on`` changed, no ``fullobjects``)."""
    parts = urlsplit(listing_url(agency))
    query = dict(parse_qsl(parts.query))
    query.pop("fullobjects", None)
    query.update(
        sort_on="modified",
        sort_order="descending",
        b_start="0",
        b_size=str(PAGE_SIZE),
        metadata_fields="modified",
    )
    return urlunsplit(parts._replace(query=urlencode(query)))


def folder_of(agency) -> str:
    """The public URL prefix of the articles the agency's search covers."""
    return agency.url.rstrip("/") + "/"


@dataclass
class AgencyRead:
    """One agency's read this run."""

    key: str
    status: str  # "ok", "restarted" (first read, or could not reach back), "failed"
    listed: int = 0
    marked: list[int] = field(default_factory=list)  # news ids found changed
    error: str | None = None
    covered_since: datetime | None = None  # None: nothing can be skipped for this agency
    folder: str = ""


@dataclass
class SignalRound:
    """The reads of one run."""

    reads: list[AgencyRead] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return len(self.reads)

    @property
    def covered(self) -> dict[str, tuple[str, datetime]]:
        """agency -> (folder, covered_since), for agencies whose read succeeded."""
        return {r.key: (r.folder, r.covered_since) for r in self.reads if r.covered_since is not None}

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "failed": sorted(r.key for r in self.reads if r.status == "failed"),
            "restarted": sorted(r.key for r in self.reads if r.status == "restarted"),
            "marked": sum(len(r.marked) for r in self.reads),
        }


def plone6_agencies(conn, agencies) -> list:
    """The active Plone 6 agencies among ``agencies`` with at least one stored article, the one
    read longest ago first."""
    chosen = {a.key: a for a in agencies if a.site_kind == "plone6_api" and a.active}
    if not chosen:
        return []
    with conn.cursor() as cur:
        cur.execute(  # the longest unread first: a run with room for fewer reads serves each in turn
            "SELECT k FROM unnest(%s::text[]) AS k LEFT JOIN integrity_signal g ON g.agency_key = k"
            " WHERE EXISTS (SELECT 1 FROM news WHERE agency_key = k) ORDER BY g.updated_at NULLS FIRST, k",
            (sorted(chosen),),
        )
        keys = [r[0] for r in cur.fetchall()]
    conn.commit()
    return [chosen[k] for k in keys]


def _listed(fetcher: Fetcher, agency, url: str) -> tuple[list[tuple[str, datetime]], bool]:
    """(url, modified) of the search's items, newest first, and whether more pages follow.
    Raises ``ValueError`` for an answer that cannot serve as a signal."""
    resp = fetcher.get(url, headers={"Accept": "application/json"}, raise_for_status=False)
    if resp.status != 200:
        raise ValueError(f"HTTP {resp.status}")
    page = parse_plone6_search(decode_bytes(resp.content, resp.charset), url, agency.key)
    items = [(i.url, i.updated_at) for i in page.items]
    if page.errors or any(m is None for _, m in items):
        raise ValueError("items without a modification date")
    if any(later > earlier for (_, earlier), (_, later) in pairwise(items)):
        raise ValueError("items not sorted by modification date")
    return items, page.next_url is not None


def _mark_changed(cur, key: str, items: list[tuple[str, datetime]], now: datetime) -> list[int]:
    """Mark the listed articles whose ``modified`` is later than what we stored; their news ids."""
    if not items:
        return []
    cur.execute(
        "SELECT n.id, n.url, coalesce(s.page_updated_at, n.updated_datetime) FROM news n"
        " JOIN integrity_state s ON s.news_id = n.id WHERE n.agency_key = %s AND n.url = ANY(%s)",
        (key, [u for u, _ in items]),
    )
    stored = {url: (news_id, known) for news_id, url, known in cur.fetchall()}
    marked = []
    for url, modified in items:
        news_id, known = stored.get(url, (None, None))
        if news_id is not None and (known is None or modified > known):
            cur.execute(
                "UPDATE integrity_state SET signal_modified_at = greatest(signal_modified_at, %s),"
                " signal_seen_at = %s WHERE news_id = %s",
                (modified, now, news_id),
            )
            marked.append(news_id)
    return marked


def read_agency(conn, fetcher: Fetcher, agency, now: datetime) -> AgencyRead:
    """One agency's read: list, mark, advance the watermark (one transaction after the request)."""
    url = signal_url(agency)
    with conn.cursor() as cur:
        cur.execute(
            "SELECT url, watermark, covered_since FROM integrity_signal WHERE agency_key = %s", (agency.key,)
        )
        row = cur.fetchone()
    conn.commit()  # no transaction open while we wait on the network
    same = row is not None and row[0] == url
    watermark, covered = (row[1], row[2]) if same else (None, None)
    try:
        items, more = _listed(fetcher, agency, url)
    except (ScrapeError, ValueError) as exc:
        conn.rollback()
        with transaction(conn) as cur:
            _record(cur, agency.key, url, now, error=str(exc)[:500])
        log.warning("integrity signal agency=%s failed: %s", agency.key, exc)
        return AgencyRead(agency.key, "failed", error=str(exc)[:500], folder=folder_of(agency))
    if watermark is not None:
        reached = more is False or any(m < watermark for _, m in items)
        items = [(u, m) for u, m in items if m >= watermark]
    else:
        reached = False
    status = "ok" if reached and covered is not None else "restarted"
    covered = covered if status == "ok" else now
    newest = max([m for _, m in items] + ([watermark] if watermark else []), default=None)
    with transaction(conn) as cur:
        marked = _mark_changed(cur, agency.key, items, now)
        _record(cur, agency.key, url, now, watermark=newest, covered_since=covered, changes=len(marked))
    log.info(
        "integrity signal agency=%s %s listed=%d marked=%d watermark=%s",
        agency.key,
        status,
        len(items),
        len(marked),
        newest.isoformat() if newest else "-",
    )
    return AgencyRead(agency.key, status, len(items), marked, covered_since=covered, folder=folder_of(agency))


def _record(cur, key, url, now, *, error=None, watermark=None, covered_since=None, changes=0) -> None:
    """Upsert the agency's row: a failed read keeps its watermark and coverage and counts a failure."""
    sql = (
        "INSERT INTO integrity_signal AS s (agency_key, url, watermark, covered_since, last_read_at,"
        " last_error, last_error_at, reads, failures, changes)"
        " VALUES (%(key)s, %(url)s, %(wm)s, %(cov)s, %(read)s, %(err)s, %(err_at)s, 1, %(failed)s,"
        " %(changes)s) ON CONFLICT (agency_key) DO UPDATE SET reads = s.reads + 1,"
        " failures = s.failures + EXCLUDED.failures,"
        " changes = s.changes + EXCLUDED.changes, updated_at = now(),"
        " last_error = coalesce(EXCLUDED.last_error, s.last_error),"
        " last_error_at = coalesce(EXCLUDED.last_error_at, s.last_error_at),"
        " last_read_at = coalesce(EXCLUDED.last_read_at, s.last_read_at),"
        + (
            " url = s.url, watermark = s.watermark, covered_since = s.covered_since"
            if error
            else " url = EXCLUDED.url, watermark = EXCLUDED.watermark, covered_since = EXCLUDED.covered_since"
        )
    )
    params = {
        "key": key,
        "url": url,
        "wm": watermark,
        "cov": covered_since,
        "read": None if error else now,
        "err": error,
        "err_at": now if error else None,
        "failed": 1 if error else 0,
        "changes": changes,
    }
    cur.execute(sql, params)


def read_signals(conn, fetcher: Fetcher, agencies, now: datetime, limit: int | None = None) -> SignalRound:
    """This run's reads, one per Plone 6 agency with stored articles (at most ``limit``)."""
    out = SignalRound()
    for agency in plone6_agencies(conn, agencies)[: limit if limit is not None else None]:
        out.reads.append(read_agency(conn, fetcher, agency, now))
    return out


MARKED_SQL = (
    "SELECT s.news_id, n.unique_id FROM integrity_state s JOIN news n ON n.id = s.news_id"
    " WHERE s.signal_modified_at IS NOT NULL"
    " AND (s.last_checked_at IS NULL OR s.last_checked_at < s.signal_seen_at)"
    " ORDER BY s.signal_seen_at, s.news_id LIMIT %s"
)


def marked(conn, limit: int) -> list[tuple[int, str]]:
    """(news id, unique id) of the articles marked since their last check, oldest mark first. A
    mark whose check failed stays (the article is never skipped) but is left to the scheduler."""
    with conn.cursor() as cur:
        cur.execute(MARKED_SQL, (max(0, int(limit)),))
        rows = cur.fetchall()
    conn.commit()
    return [(int(i), u) for i, u in rows]


SKIPPABLE_SQL = (
    "SELECT s.news_id, n.agency_key, n.url, n.published_at, s.last_checked_at"
    " FROM integrity_state s JOIN news n ON n.id = s.news_id"
    " JOIN integrity_signal g ON g.agency_key = n.agency_key"
    " WHERE n.agency_key = ANY(%(keys)s) AND s.signal_modified_at IS NULL"
    " AND s.content_status IN ('unchanged', 'modified') AND s.gone_since IS NULL AND n.removed_at IS NULL"
    " AND s.last_checked_at >= g.covered_since"
)


def skippable(conn, signals: SignalRound, now: datetime, bands=AGE_BANDS) -> set[int]:
    """News ids this run need not check for edits (see the module docstring, point 3)."""
    covered = signals.covered
    if not covered:
        return set()
    with conn.cursor() as cur:
        cur.execute(SKIPPABLE_SQL, {"keys": sorted(covered)})
        rows = cur.fetchall()
    conn.commit()
    out = set()
    for news_id, key, url, published, checked in rows:
        folder, since = covered[key]
        if checked < since or not url.startswith(folder):
            continue
        if now - checked < band_for(max(now - published, timedelta(0)), bands).target:
            out.add(int(news_id))
    return out


def without(c: Candidates, drop: set[int], keep_image_due: Any = None) -> Candidates:
    """``c`` without the news ids in ``drop``; those whose image is due (``keep_image_due``, a bool
    array over ``c``) are kept: the run checks them anyway."""
    import numpy as np

    if not drop or not len(c):
        return c
    mask = ~np.isin(c.news_id, np.fromiter(drop, dtype=np.int64, count=len(drop)))
    if keep_image_due is not None:
        mask |= keep_image_due
    return Candidates(**{name: getattr(c, name)[mask] for name in c.__dataclass_fields__})
