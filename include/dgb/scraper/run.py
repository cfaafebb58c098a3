"""One scrape run of one agency: listing pages -> articles -> storage (+ outbox), reported.

Listing pages are walked newest first.

* A **regular run** fetches only the articles it does not know: a known URL is never re-read
  (edits are the integrity checks' job, under the same per-host budget), and the run stops at the
  ``fence``-th (3rd) consecutive known URL (more than one, so a pinned or re-dated item at the top
  does not end the run before the new ones below it). With nothing new, a run costs one listing
  request per agency (plus robots.txt, cached per task). Plone 6 API listings carry whole
  articles, so their known items are still compared for edits at no request cost. A regular run
  reads ``max_pages`` (3) listing pages: an agency never scraped before gets its latest pages,
  not its whole history. An agency with stored articles whose 3 pages held no fence (it
  published more than 3 pages since its last run: a burst) is read on until the fence, at most
  ``catchup_max_pages`` (30): stopping at 3 pages left the older new articles unseen for good,
  since no later regular run reads that deep. A run that reaches that cap too says so
  (``RunReport.gap``, a warning): older new articles may remain for a backfill.
* Listings page by offset, so articles published while a run pages push the items it already
  took onto the next page. Those are passed without counting towards the fence: counted, they
  ended the run before the older new articles below them, which no later run reads.
* An article a regular run lists but cannot fetch (a 503 after retries, a timeout, a 404 of an
  address moved while the run paged) leaves the agency a **mark** at its listing date
  (``scrape_reread``): later regular runs read past the fence, up to ``catchup_max_pages``, until
  they pass that date, so the article (or its new address) is read again; the run that passes it
  with nothing skipped clears it. Without the mark the articles stored around a skipped one put it
  below every later run's stop (the chaos hour of seed 26 lost one so). A mark older than
  ``reread_max_age`` (a day) is given up with a warning (``RunReport.gap``; a backfill reads it).
* The mark is also **written ahead**: before a regular run commits a page's articles and goes on
  to the next page, it marks the page's oldest listing date. A run that dies there (kill -9, its
  database crashing, the host rebooting) leaves its newer articles stored above a stretch nobody
  read, and every later run would stop at their fence; the mark sends the next run past them. A run
  that ends normally replaces it with the mark it really leaves (none, when nothing was skipped).
  The chaos run of seed 28 lost 13 articles of one agency so: PostgreSQL was killed while a run
  read its second page.
* A **backfill** (``start_date`` given) walks back until articles are older than ``start_date``
  (up to ``backfill_max_pages``) and re-reads known articles in the window so their edits are
  stored (``allow_update: false`` leaves them as they are).

Each listing page's articles are stored in one transaction (one savepoint per article). A failing
article - fetch, parse (any exception, not only ScrapeError) or store - is skipped and reported
with its category and counted by kind in ``RunReport.problems`` (the run is then ``partial``); the
other articles and agencies go on. A parser's unexpected exception is ``html_changed``; one the
fetch itself raises outside the site's answer (the host budget's database down) is ``unknown``.
A failing listing page ends the run with that page's error category, keeping what earlier pages
stored.

Same-site rule: the listing parsers drop listing items and next-page links that are not on the
agency's own site (:func:`own_sites`: its configured listing URL's host, with its ``www.`` twin;
under the mirror, the mirrored host; :mod:`dgb.scraper.sites`) - other hosts, internal
addresses, ``file://``, ``javascript:`` - unfetched, and the run counts them in
``RunReport.off_site_dropped`` (logged with the report, stored with the run's figures). Every
fetch also passes the URL guard (:mod:`dgb.urlpolicy`) in the fetcher.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from urllib.parse import urlencode, urlsplit, urlunsplit

from dgb.fetch import Fetcher
from dgb.scrape_errors import (
    EmptyContentError,
    HtmlChangedError,
    ScrapeError,
    UnknownScrapeError,
    as_scrape_error,
)
from dgb.scraper import conditional, relocate, store
from dgb.scraper.article import parse_article_bytes
from dgb.scraper.ebc import parse_ebc_article, parse_ebc_listing
from dgb.scraper.identity import BRASILIA
from dgb.scraper.listing import parse_listing_page
from dgb.scraper.markup import decode_bytes
from dgb.scraper.models import Article, ListingItem, ListingPage
from dgb.scraper.plone6 import parse_plone6_search
from dgb.scraper.sites import own_sites as sites_of

log = logging.getLogger(__name__)

PLONE6_PAGE_SIZE = 25


@dataclass(frozen=True)
class ScrapeParams:
    start_date: date | None = None
    end_date: date | None = None
    allow_update: bool = True
    fence: int = 3
    max_pages: int = 3  # regular runs; a backfill may walk up to backfill_max_pages
    catchup_max_pages: int = 30  # a regular run of a known agency with no fence in max_pages
    backfill_max_pages: int = 200
    reread_max_age: timedelta = timedelta(days=1)  # a skipped article's mark is given up after this

    @property
    def backfill(self) -> bool:
        return self.start_date is not None

    @classmethod
    def from_params(cls, params: dict | None) -> ScrapeParams:
        """From DAG params / trigger conf: ``start_date``, ``end_date`` (YYYY-MM-DD), ``allow_update``."""
        params = params or {}

        def day(name: str) -> date | None:
            value = params.get(name)
            if value in (None, ""):
                return None
            if isinstance(value, date):
                return value
            try:
                return date.fromisoformat(str(value)[:10])
            except ValueError as exc:
                raise ValueError(f"{name} must be a date YYYY-MM-DD, got {value!r}") from exc

        start, end = day("start_date"), day("end_date")
        if start and end and end < start:
            raise ValueError(f"end_date {end} is before start_date {start}")
        allow = params.get("allow_update", True)
        if isinstance(allow, str):
            allow = allow.strip().lower() not in ("0", "false", "no")
        return cls(start_date=start, end_date=end, allow_update=bool(allow))


@dataclass
class RunReport:
    agency: str
    status: str = "success"
    error_category: str | None = None
    error_message: str | None = None
    pages: int = 0
    scraped: int = 0
    new: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: int = 0
    known_skipped: int = 0  # known URLs a regular run passed without re-reading them
    article_errors: int = 0
    problems: dict[str, int] = field(default_factory=dict)  # article errors by kind (errors.KINDS...)
    off_site_dropped: int = 0  # listing items / next links on another site, not followed
    moved: int = 0  # listed at a new address, stored at an old one that moved: relocated (relocate)
    move_undecided: int = 0  # the same, the old address gave no clear answer: left for a later run
    not_modified: bool = False  # the first listing page answered 304: nothing new, nothing read
    gap: bool = False  # catchup_max_pages read without meeting a known article: some may be unseen
    seconds: float = 0.0

    def as_dict(self) -> dict:
        out = asdict(self)
        out["new"], out["updated"] = len(self.new), len(self.updated)
        return out

    def article_failed(self, exc: ScrapeError, agency_key: str) -> None:
        """Record one article's failure: counted by kind, the run's first error kept."""
        self.article_errors += 1
        self.problems[exc.kind] = self.problems.get(exc.kind, 0) + 1
        self.status = "partial"
        self.error_category = self.error_category or exc.category
        self.error_message = self.error_message or str(exc)
        log.warning("agency %s: article skipped (%s): %s", agency_key, exc.kind, exc)

    def figures(self) -> str:
        """The per-kind problem counts, off-site drops, a listing gap and moves, as stored with the run
        ("" if none)."""
        parts = [f"{k}={v}" for k, v in sorted(self.problems.items())]
        if self.off_site_dropped:
            parts.append(f"off_site_dropped={self.off_site_dropped}")
        if self.gap:
            parts.append(f"listing_gap_after_pages={self.pages}")
        if self.moved:
            parts.append(f"moved={self.moved}")
        if self.move_undecided:
            parts.append(f"move_undecided={self.move_undecided}")
        return "; ".join(parts)


def listing_url(agency) -> str:
    """First listing URL: the HTML listing, or the Plone 6 ``@search`` API for plone6_api sites."""
    if agency.site_kind != "plone6_api":
        return agency.url
    parts = urlsplit(agency.url)
    segments = parts.path.strip("/").split("/")
    try:
        at = segments.index(agency.key)
    except ValueError as exc:
        raise ValueError(
            f"agency {agency.key}: URL path has no '{agency.key}' segment: {agency.url}"
        ) from exc
    path = "/" + "/".join(segments[: at + 1] + ["++api++"] + segments[at + 1 :] + ["@search"])
    query = urlencode(
        {
            "portal_type": "News Item",
            "sort_on": "effective",
            "sort_order": "descending",
            "b_start": 0,
            "b_size": PLONE6_PAGE_SIZE,
            "fullobjects": 1,
        }
    )
    return urlunsplit((parts.scheme, parts.netloc, path, query, ""))


def own_sites(agency) -> frozenset[str]:
    """The sites an agency's listing may link to: its configured listing URL's (and page URL's)
    site, each with its ``www.`` twin (:func:`dgb.scraper.sites.own_sites`)."""
    return sites_of(listing_url(agency), agency.url)


def _parse_listing(agency, resp, sites: frozenset[str]) -> ListingPage:
    """Parse one listing response; an unexpected exception becomes ``html_changed`` (parse_error)."""
    try:
        return _parse_listing_raw(agency, resp, sites)
    except Exception as exc:
        raise as_scrape_error(exc, where=f" parsing listing {resp.url[:300]}") from exc


def _parse_listing_raw(agency, resp, sites: frozenset[str]) -> ListingPage:
    if agency.site_kind == "plone6_api":
        return parse_plone6_search(decode_bytes(resp.content, resp.charset), resp.url, agency.key, sites)
    text = decode_bytes(resp.content, resp.charset)
    if agency.site_kind == "ebc":
        return parse_ebc_listing(text, resp.url, sites)
    return parse_listing_page(text, resp.url, agency.key, sites)


def _fetch_article(agency, item: ListingItem, fetcher: Fetcher) -> Article:
    if item.content is not None:  # Plone 6 API: the listing carries the whole article
        art = item.to_article(agency.key)
    else:
        try:
            resp = fetcher.get(item.url)
        except ScrapeError:
            raise
        except Exception as exc:  # the fetch's own machinery (the host budget's database): not the markup
            what = f"{type(exc).__name__} fetching {item.url[:300]}: {str(exc)[:300]}"
            raise UnknownScrapeError(what) from exc
        if agency.site_kind == "ebc":
            art = parse_ebc_article(
                decode_bytes(resp.content, resp.charset),
                item.url,
                agency.key,
                published_fallback=item.published_at,
            )
        else:
            art = parse_article_bytes(
                resp.content, item.url, agency.key, charset=resp.charset, published_fallback=item.published_at
            )
    if art.published_at is None and item.published_at is not None:
        art.with_published_at(item.published_at)
    if art.published_at is None:
        raise HtmlChangedError(f"no publication date found for {item.url}")
    if not art.title.strip() or not (art.content or "").strip():
        raise EmptyContentError(f"article without title or body: {item.url}")
    return art


def scrape_agency(
    conn,
    agency,
    fetcher: Fetcher,
    params: ScrapeParams | None = None,
    run_id: str | None = None,
    record: bool = True,
    validators: conditional.ConditionalPolicy | None = None,
) -> RunReport:
    """With ``validators`` (the scrape DAGs pass the settings' policy) a regular run's first listing
    page is a conditional request (:mod:`dgb.scraper.conditional`, the validators shared with the
    dispatcher's poll of the same URL): a 304 ends the run with nothing new; after a successful run
    the first page's validators are kept, after any other they are dropped."""
    params = params or ScrapeParams()
    report = RunReport(agency=agency.key)
    started = datetime.now(UTC)
    t0 = time.monotonic()
    url: str | None = listing_url(agency)
    consecutive_known = 0
    max_pages = params.backfill_max_pages if params.backfill else params.max_pages
    had_articles: bool | None = None  # asked once, when a regular run's pages run out
    # listings page by offset: what is published while the run pages pushes items it already
    # took onto the next page; those are passed, never counted towards the fence
    taken: set[str] = set()
    sites = own_sites(agency)
    first: conditional.Fetched | None = None
    asked = time.time()
    # a regular run reads past the fence down to the mark an earlier run left at an article it skipped
    mark = None if params.backfill else store.reread_mark(conn, agency.key)
    passed_mark = mark is None
    skipped_at: list[datetime] = []  # listing dates of the articles this run could not fetch
    stored_mark = mark  # the mark in the database now (this run writes one ahead of a page it commits)
    unread = None
    if mark is not None:
        validators = None  # a 304 would end the run before the mark
    try:
        while url and report.pages < max_pages:
            if report.pages == 0 and validators is not None and not params.backfill:
                first = conditional.get(conn, fetcher, agency.key, url, asked, validators, counted=False)
                if first.response is None:
                    report.not_modified = True
                    log.info("agency %s: listing not modified (304): nothing new", agency.key)
                    break
                resp = first.response
            else:
                resp = fetcher.get(url)
            page = _parse_listing(agency, resp, sites)  # off-site links dropped
            report.pages += 1
            report.off_site_dropped += page.off_site_dropped
            for exc in page.errors:
                report.article_failed(exc, agency.key)
            if not page.items and report.pages == 1:
                log.info("agency %s: listing has no items", agency.key)
            known = store.known_urls(conn, agency.key, [i.url for i in page.items])
            batch: list[Article] = []
            stop = False
            for item in page.items:
                if item.url in taken:
                    continue
                taken.add(item.url)
                day = item.published_at.date() if item.published_at else None
                if params.end_date and day and day > params.end_date:
                    continue
                if params.start_date and day and day < params.start_date:
                    stop = True
                    break
                if mark is not None and item.published_at is not None and _aware(item.published_at) < mark:
                    passed_mark = True
                if item.url in known:
                    consecutive_known += 1
                    fenced = params.fence and consecutive_known >= params.fence
                    if not params.backfill and fenced and passed_mark:
                        stop = True
                        break
                    if not params.allow_update:
                        report.unchanged += 1
                        continue
                    if not params.backfill and item.content is None:
                        report.known_skipped += 1  # not re-read: the integrity checks own edits
                        continue
                else:
                    consecutive_known = 0
                try:
                    batch.append(_fetch_article(agency, item, fetcher))
                except Exception as exc:  # one bad page never stops the run (recorded, categorised)
                    report.article_failed(as_scrape_error(exc, where=f" in {item.url[:300]}"), agency.key)
                    if item.published_at is not None:
                        skipped_at.append(_aware(item.published_at))
            report.scraped += len(batch)
            if not params.backfill and not stop and page.next_url:
                ahead = _mark_ahead(page.items, skipped_at, mark, passed_mark)
                if ahead is not None and ahead != stored_mark:
                    conn.rollback()  # only this page's lookups are open
                    store.set_reread_mark(conn, agency.key, ahead)
                    stored_mark = ahead
            settled = relocate.settle(conn, agency.key, batch, fetcher)
            report.moved += len(settled.moved)
            report.move_undecided += len(settled.undecided)
            batch = settled.batch
            saved = store.save_articles(
                conn, agency.key, agency.name, batch, allow_update=params.allow_update
            )
            for exc in saved.errors:
                report.article_failed(exc, agency.key)
            report.new += saved.new
            report.updated += saved.updated
            report.unchanged += saved.unchanged
            if stop:
                break
            url = page.next_url
            if url and report.pages >= max_pages and not params.backfill:
                if had_articles is None:
                    had_articles = store.had_articles(conn, agency.key, report.new)
                if not passed_mark and max_pages < params.catchup_max_pages:
                    max_pages = params.catchup_max_pages  # down to an article an earlier run skipped
                    log.info("agency %s: reading on to %s, where a run skipped an article", agency.key, mark)
                elif had_articles and max_pages < params.catchup_max_pages:
                    max_pages = params.catchup_max_pages  # a burst: read on to the known ones
                    log.info(
                        "agency %s: %d pages all new; reading on to the known articles",
                        agency.key,
                        report.pages,
                    )
                elif had_articles or not passed_mark:
                    report.gap = True
                    log.warning(
                        "agency %s: %d listing pages read without meeting a known article"
                        " (or the place of one a run skipped):"
                        " older new articles may remain unseen (a backfill reads them)",
                        agency.key,
                        report.pages,
                    )
    except ScrapeError as exc:
        report.status = "failed" if not (report.new or report.updated) else "partial"
        report.error_category, report.error_message = exc.category, str(exc)
        log.warning("agency %s: scrape stopped: %s", agency.key, exc)
        unread = stored_mark  # a listing page failed: what the committed pages' mark holds stays unread
    except Exception as exc:
        report.status, report.error_category, report.error_message = "failed", "unknown", repr(exc)[:2000]
        report.seconds = time.monotonic() - t0
        if record:
            _record(conn, report, started, run_id)
        raise
    if not params.backfill:
        _keep_mark(conn, agency.key, report, params, (mark, passed_mark, skipped_at), stored_mark, unread)
    if first is not None and first.response is not None:
        conn.rollback()  # every page's articles are committed by store.save_articles
        ok = report.status == "success"
        conditional.record(conn, agency.key, first, asked, all_known=ok, counted=False)
    report.seconds = time.monotonic() - t0
    if record:
        _record(conn, report, started, run_id)
    return report


def _aware(when: datetime) -> datetime:
    """A listing date comparable with the stored mark (a naive one is Brasília time, as in dates)."""
    return when if when.tzinfo is not None else when.replace(tzinfo=BRASILIA)


def next_mark(mark, passed: bool, skipped, now: datetime, max_age: timedelta) -> tuple[datetime | None, bool]:
    """The agency's mark after a regular run, and whether one was given up: the oldest article this
    run skipped; an earlier mark this run did not read past stays; one older than ``max_age`` goes."""
    new = min(skipped, default=None)
    if not passed and mark is not None:
        new = mark if new is None else min(new, mark)
    if new is not None and new < now - max_age:
        return None, True
    return new, False


def _mark_ahead(items, skipped, mark, passed: bool) -> datetime | None:
    """The mark a run writes before it commits a page and reads on: the page's oldest listing date
    (the articles below it are not read yet), an article skipped so far, or the earlier mark while
    this run has not read past it; None when the page has no dated item and nothing else holds."""
    dated = [_aware(i.published_at) for i in items if i.published_at is not None]
    held = [*dated, *skipped]
    if mark is not None and not passed:
        held.append(mark)
    return min(held, default=None)


def _keep_mark(conn, key: str, report: RunReport, params: ScrapeParams, seen: tuple, stored, unread) -> None:
    """Store the mark a run leaves where it differs from the one stored now (``stored``: the
    start's, or one this run wrote ahead of a page). ``seen`` is (the start's mark, whether the run
    read past it, the listing dates it skipped): :func:`next_mark`. ``unread``: a mark that must
    stay because the run stopped before reading below it (a listing page failed)."""
    mark, passed, skipped = seen
    if unread is not None:
        skipped = [*skipped, unread]
    new, gave_up = next_mark(mark, passed, skipped, datetime.now(UTC), params.reread_max_age)
    if gave_up:
        report.gap = True
        log.warning("agency %s: an article skipped before %s was not read again: given up", key, mark)
    if new != stored:
        conn.rollback()  # every page's articles are committed by store.save_articles
        store.set_reread_mark(conn, key, new)


def _record(conn, report: RunReport, started: datetime, run_id: str | None) -> None:
    try:
        conn.rollback()
    except Exception:
        pass
    figures = report.figures()
    message = report.error_message
    if figures:
        message = f"{message} [{figures}]" if message else f"[{figures}]"
    store.record_run(
        conn,
        report.agency,
        status=report.status,
        error_category=report.error_category,
        error_message=message,
        scraped=report.scraped,
        saved=len(report.new),
        updated=len(report.updated),
        started_at=started,
        seconds=report.seconds,
        run_id=run_id,
    )
