"""One integrity check of one article (:func:`check_article`): fetch, compare, record.

1. content (conditional GET, see :mod:`dgb.integrity.checks`; a plain GET for an article the
   change signal marked, :mod:`dgb.integrity.signal`: its page is known to differ);
2. on ``modified``: :func:`dgb.scraper.store.save_articles` with ``source="integrity"`` updates
   the row, writes one ``news_update_history`` row per changed field, bumps the version, resets
   the downstream stage state (theme, summary, embedding) and enqueues a ``dgb.news.scraped``
   event in the outbox, in one transaction, so enrichment, embedding and indexing follow;
3. moved (issue 16, :mod:`dgb.integrity.moves`): the article answered at another URL (a
   redirect, or the agency's Plone 6 search found it) -> ``news.url`` is updated and one
   ``news_update_history`` row (``field_changed='url'``) recorded, before a modified article is
   saved; outcome ``moved``;
4. the image (skipped when the page answered 404/410), HEAD then GET+Range;
5. flags, weighed by :mod:`dgb.integrity.evidence`: a 404/410 makes the article
   ``suspect_removed`` (still indexed); only a confirmed removal (the gone answer again after
   the delay, removals not paused by the agency's or host's breaker) sets ``news.removed_at``,
   ``problem='removed'``. Broken image -> ``image_broken``, ``problem='image_broken'`` (unless a
   problem is already set); normal answers clear them (``restored``). A change of what the
   index shows sets ``indexed_version = NULL`` so the index stage, which builds documents whole
   from PostgreSQL (and deletes removed ones), re-syncs the row: a restored article is re-added
   through that normal path; nothing else is enqueued;
6. ``integrity_state`` (tier, next due time, validators, statuses, consecutive failures, the
   gone streak), one ``integrity_checks`` row and the ``integrity_daily`` roll-up, and the
   breakers, in one transaction (steps 5 and 6: :mod:`dgb.integrity.recording`).

A transient failure (429/503 after backoff, timeout, anti-bot) is outcome ``error``: the stored
ETag/Last-Modified, flags and article are kept, ``consecutive_failures`` grows and the next
check is pushed back. New validators are stored only once the article row reflects the page,
so a failed save can never hide a change behind a later 304.

Every log line carries ``unique_id=`` and ``outcome=``.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from psycopg.rows import dict_row

from dgb.fetch import Fetcher
from dgb.integrity.checks import ContentResult, ImageResult, check_content, check_image
from dgb.integrity.evidence import RemovalPolicy
from dgb.integrity.moves import move_url
from dgb.integrity.recording import record
from dgb.integrity.result import CheckResult
from dgb.integrity.tiers import Schedule
from dgb.scraper import store
from dgb.urlpolicy import current_unique_id

log = logging.getLogger("dgb.integrity")

LOAD_SQL = """
SELECT n.id, n.unique_id, n.agency_key, n.agency_name, n.url, n.title, n.subtitle, n.content, n.image_url,
       n.published_at, n.updated_datetime, n.removed_at, n.image_broken, n.problem,
       a.site_kind, a.url AS agency_url,
       s.news_id AS state_news_id, s.tier, s.etag, s.last_modified, s.page_updated_at, s.checks,
       s.image_status, s.content_status, s.consecutive_failures, s.gone_since, s.gone_checks, s.gone_status,
       s.signal_modified_at
FROM news n
LEFT JOIN agencies a ON a.key = n.agency_key
LEFT JOIN integrity_state s ON s.news_id = n.id
WHERE n.unique_id = %s
"""


class ArticleNotFound(KeyError):
    pass


def load_article(conn, unique_id: str) -> dict:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(LOAD_SQL, (unique_id,))
        row = cur.fetchone()
    conn.commit()  # no transaction left open while we wait on the network
    if row is None:
        raise ArticleNotFound(f"no article with unique_id {unique_id!r}")
    return row


def _outcome(content: ContentResult, image: ImageResult | None) -> str:
    """The outcome without the removal decision (a gone answer is weighed in
    :func:`dgb.integrity.recording.record`)."""
    if content.status == "removed":
        return "removed"
    if content.moved_to:
        return "moved"
    if content.status == "modified":
        return "modified"
    if image is not None and image.broken:
        return "image_broken"
    if content.transient or (image is not None and image.transient):
        return "error"
    return "unchanged"


def check_article(
    conn,
    fetcher: Fetcher,
    unique_id: str,
    *,
    schedule: Schedule | None = None,
    now: datetime | None = None,
    policy: RemovalPolicy | None = None,
    image: bool = True,
) -> CheckResult:
    """Fully check one article now (content, then image) and record everything. ``now`` is the
    check's time as recorded (a controllable clock for tests and replays). ``image=False`` skips
    the image (the budget scheduler re-checks images less often than text); a changed page's
    image is checked anyway (its URL may have changed)."""
    schedule = schedule or Schedule.from_env()
    policy = policy or RemovalPolicy.from_env()
    token = current_unique_id.set(unique_id)
    t0 = time.monotonic()
    try:
        row = load_article(conn, unique_id)
        state = row if row["state_news_id"] is not None else None
        if state is not None and row["signal_modified_at"] is not None:
            state = {**row, "etag": None, "last_modified": None}  # known to differ: no 304 can stand
        content = check_content(fetcher, conn, row, state)
        checked_at = now or datetime.now(UTC)
        history_rows, event, moved_from = 0, False, None
        if content.moved_to and content.status in ("unchanged", "modified"):
            moved_from = move_url(conn, row, content, checked_at)
            history_rows += 1 if moved_from else 0
        if content.status == "modified" and content.article is not None:
            content, saved_rows, event = _save_modified(conn, row, content)
            history_rows += saved_rows
        want_image = image or content.status == "modified"
        image = None
        if content.status != "removed" and want_image:
            image_url = content.article.image_url if content.article is not None else row["image_url"]
            image = check_image(fetcher, image_url)
        outcome = _outcome(content, image)
        result = record(
            conn,
            row,
            content,
            image,
            outcome,
            schedule,
            checked_at,
            int((time.monotonic() - t0) * 1000),
            policy,
        )
        result.history_rows, result.event_enqueued, result.moved_from = history_rows, event, moved_from
        if moved_from:
            result.flags.append("moved")
        _log_result(result)
        return result
    finally:
        current_unique_id.reset(token)


def _save_modified(conn, row: dict, content: ContentResult) -> tuple[ContentResult, int, bool]:
    """Save the page's version of the article (at its stored URL): (content, history rows, whether
    an event was enqueued). A failed save turns the content result into an ``error`` that keeps
    the stored validators, so a later 304 cannot hide the change."""
    try:
        content.article.url = row["url"]
        saved = store.save_articles(
            conn, row["agency_key"], row["agency_name"], [content.article], source="integrity"
        )
        if saved.errors:  # the one article was refused by the database
            raise saved.errors[0]
        return content, saved.history_rows, bool(saved.updated)
    except Exception as exc:
        conn.rollback()
        save_error = f"saving the modified article failed: {exc!r}"
        log.warning("integrity unique_id=%s outcome=error %s", row["unique_id"], save_error)
        failed = ContentResult(
            "error",
            bytes_fetched=content.bytes_fetched,
            http_status=content.http_status,
            etag=row["etag"],
            last_modified=row["last_modified"],
            error=save_error,
            error_category="unknown",
        )
        return failed, 0, False


def _log_result(r: CheckResult) -> None:
    img = r.image.status if r.image is not None else "skipped"
    msg = (
        "integrity unique_id=%s outcome=%s tier=%s content=%s image=%s http=%s changed=%s flags=%s bytes=%d"
        " failures=%d"
    )
    args = (
        r.unique_id,
        r.outcome,
        r.tier,
        r.content.status,
        img,
        r.content.http_status,
        ",".join(r.content.changed_fields) or "-",
        ",".join(r.flags) or "-",
        r.bytes_fetched,
        r.consecutive_failures,
    )
    if r.outcome == "error":
        log.warning(msg + " error=%s", *args, r.error)
    else:
        log.info(msg, *args)
