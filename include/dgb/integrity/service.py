"""The integrity service: check one article fully, or a tier's due articles in a run.

One check (:func:`check_article`):

1. content (conditional GET, see :mod:`dgb.integrity.checks`);
2. on ``modified``: :func:`dgb.scraper.store.save_articles` with ``source="integrity"`` updates
   the row, writes one ``news_update_history`` row per changed field, bumps the version, resets
   the downstream stage state (theme, summary, embedding) and enqueues a ``dgb.news.scraped``
   event in the outbox, in one transaction, so enrichment, embedding and indexing follow;
3. moved (issue 16): the article answered at another URL (a redirect, or the agency's Plone 6
   search found it) -> ``news.url`` is updated and one ``news_update_history`` row
   (``field_changed='url'``) recorded, before a modified article is saved; outcome ``moved``;
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
   breakers, in one transaction.

A transient failure (429/503 after backoff, timeout, anti-bot) is outcome ``error``: the stored
ETag/Last-Modified, flags and article are kept, ``consecutive_failures`` grows and the next
check is pushed back. New validators are stored only once the article row reflects the page,
so a failed save can never hide a change behind a later 304.

Every log line carries ``unique_id=`` and ``outcome=``.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from psycopg.rows import dict_row

from dgb.db import transaction
from dgb.fetch import Fetcher
from dgb.integrity.checks import ContentResult, ImageResult, check_content, check_image
from dgb.integrity.evidence import BreakerChange, Evidence, RemovalPolicy, evaluate_breakers, host_of, weigh
from dgb.integrity.tiers import BudgetPolicy, Schedule, assign_tiers, choose, due_articles, load_candidates
from dgb.pipeline.definitions import ENRICH, params
from dgb.scraper import store
from dgb.urlpolicy import current_unique_id

log = logging.getLogger("dgb.integrity")

OUTCOMES = ("unchanged", "modified", "moved", "suspect_removed", "removed", "image_broken", "error")

LOAD_SQL = """
SELECT n.id, n.unique_id, n.agency_key, n.agency_name, n.url, n.title, n.subtitle, n.content, n.image_url,
       n.published_at, n.updated_datetime, n.removed_at, n.image_broken, n.problem,
       a.site_kind,
       s.news_id AS state_news_id, s.tier, s.etag, s.last_modified, s.page_updated_at, s.checks,
       s.image_status, s.content_status, s.consecutive_failures, s.gone_since, s.gone_checks, s.gone_status
FROM news n
LEFT JOIN agencies a ON a.key = n.agency_key
LEFT JOIN integrity_state s ON s.news_id = n.id
WHERE n.unique_id = %s
"""


class ArticleNotFound(KeyError):
    pass


@dataclass
class CheckResult:
    unique_id: str
    news_id: int
    agency_key: str
    tier: str
    outcome: str
    content: ContentResult
    image: ImageResult | None
    # flag changes made: suspect_removed, removed, restored, moved, image_broken, image_ok
    flags: list[str] = field(default_factory=list)
    history_rows: int = 0
    event_enqueued: bool = False
    next_due_at: datetime | None = None
    consecutive_failures: int = 0
    bytes_fetched: int = 0
    duration_ms: int = 0
    error: str | None = None
    evidence: Evidence | None = None  # the gone streak, after a 404/410
    paused_by: tuple[str, ...] = ()  # tripped breakers ("agency:mec", "host:...")
    breaker_changes: list[BreakerChange] = field(default_factory=list)
    moved_from: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "unique_id": self.unique_id,
            "agency_key": self.agency_key,
            "tier": self.tier,
            "outcome": self.outcome,
            "content": self.content.as_dict(),
            "image": self.image.as_dict() if self.image else None,
            "flags": list(self.flags),
            "history_rows": self.history_rows,
            "event_enqueued": self.event_enqueued,
            "next_due_at": self.next_due_at.isoformat() if self.next_due_at else None,
            "consecutive_failures": self.consecutive_failures,
            "bytes_fetched": self.bytes_fetched,
            "duration_ms": self.duration_ms,
            "error": self.error,
            "evidence": None
            if self.evidence is None
            else {
                "since": self.evidence.since.isoformat(),
                "checks": self.evidence.checks,
                "confirmed": self.evidence.confirmed,
                "confirm_after": self.evidence.confirm_after.isoformat(),
            },
            "paused_by": list(self.paused_by),
            "breaker_changes": [c.as_dict() for c in self.breaker_changes],
            "moved_from": self.moved_from,
        }


def load_article(conn, unique_id: str) -> dict:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(LOAD_SQL, (unique_id,))
        row = cur.fetchone()
    conn.commit()  # no transaction left open while we wait on the network
    if row is None:
        raise ArticleNotFound(f"no article with unique_id {unique_id!r}")
    return row


def _outcome(content: ContentResult, image: ImageResult | None) -> str:
    """The outcome without the removal decision (a gone answer is weighed in :func:`_record`)."""
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
        content = check_content(fetcher, conn, row, row if row["state_news_id"] is not None else None)
        checked_at = now or datetime.now(UTC)
        history_rows, event, save_error, moved_from = 0, False, None, None
        if content.moved_to and content.status in ("unchanged", "modified"):
            moved_from = _move_url(conn, row, content, checked_at)
            history_rows += 1 if moved_from else 0
        if content.status == "modified" and content.article is not None:
            try:
                content.article.url = row["url"]
                saved = store.save_articles(
                    conn, row["agency_key"], row["agency_name"], [content.article], source="integrity"
                )
                if saved.errors:  # the one article was refused by the database
                    raise saved.errors[0]
                history_rows, event = history_rows + saved.history_rows, bool(saved.updated)
            except Exception as exc:
                conn.rollback()
                save_error = f"saving the modified article failed: {exc!r}"
                log.warning("integrity unique_id=%s outcome=error %s", unique_id, save_error)
                content = ContentResult(
                    "error",
                    bytes_fetched=content.bytes_fetched,
                    http_status=content.http_status,
                    etag=row["etag"],
                    last_modified=row["last_modified"],
                    error=save_error,
                    error_category="unknown",
                )
        want_image = image or content.status == "modified"
        image = None
        if content.status != "removed" and want_image:
            image_url = content.article.image_url if content.article is not None else row["image_url"]
            image = check_image(fetcher, image_url)
        outcome = _outcome(content, image)
        result = _record(
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


def _move_url(conn, row: dict, content: ContentResult, now: datetime) -> str | None:
    """Point the article at the URL it answers at now, with one history row; returns the old URL
    (None when another article of the agency already has the new URL: nothing is changed)."""
    new_url, old_url = content.moved_to, row["url"]
    with transaction(conn) as cur:
        cur.execute(
            "SELECT unique_id FROM news WHERE agency_key = %s AND url = %s AND id <> %s",
            (row["agency_key"], new_url, row["id"]),
        )
        taken = cur.fetchone()
        if taken is not None:
            log.warning(
                "integrity unique_id=%s moved to %s, but article %s already has that URL; URL kept",
                row["unique_id"],
                new_url,
                taken[0],
            )
            content.moved_to = None
            return None
        cur.execute(
            "UPDATE news SET url = %s, updated_at = %s, indexed_version = NULL WHERE id = %s",
            (new_url, now, row["id"]),
        )
        cur.execute(
            "INSERT INTO news_update_history (news_id, field_changed, old_value, new_value, source,"
            " detected_at) VALUES (%s, 'url', %s, %s, 'integrity', %s)",
            (row["id"], old_url, new_url, now),
        )
    log.info(
        "integrity unique_id=%s outcome=moved from=%s to=%s via=%s",
        row["unique_id"],
        old_url,
        new_url,
        content.found_via,
    )
    row["url"] = new_url
    return old_url


RESTORE_SQL = (
    "removed_at = NULL, problem_at = %(now)s, problem = CASE WHEN problem IN ('removed',"
    " 'suspect_removed') THEN (CASE WHEN image_broken THEN 'image_broken' END) ELSE problem END"
)


def _flag_updates(
    row: dict, content: ContentResult, image: ImageResult | None, evidence: Evidence | None
) -> list[tuple[str, str, bool]]:
    """(flag, SQL assignment list, whether the index must re-sync) for every flag change."""
    out = []
    if content.status == "removed" and evidence is not None:
        if evidence.confirmed and (row["removed_at"] is None or row["problem"] != "removed"):
            out.append(
                (
                    "removed",
                    "removed_at = coalesce(removed_at, %(now)s), problem = 'removed', problem_at = %(now)s",
                    True,
                )
            )
        elif not evidence.confirmed and row["removed_at"] is None and row["problem"] != "suspect_removed":
            out.append(
                (
                    "suspect_removed",
                    "problem_at = %(now)s, problem = CASE WHEN problem IS NULL OR"
                    " problem = 'image_broken' THEN 'suspect_removed' ELSE problem END",
                    False,
                )
            )
    elif content.status in ("unchanged", "modified"):
        if row["removed_at"] is not None:
            out.append(("restored", RESTORE_SQL, True))
        elif row["problem"] == "suspect_removed":
            out.append(("restored", RESTORE_SQL, False))
    if image is not None:
        if image.broken and not row["image_broken"]:
            out.append(
                (
                    "image_broken",
                    "image_broken = true, problem_at = CASE WHEN problem IS NULL THEN %(now)s"
                    " ELSE problem_at END, problem = coalesce(problem, 'image_broken')",
                    True,
                )
            )
        elif image.status in ("ok", "redirect", "no_image") and row["image_broken"]:
            out.append(
                (
                    "image_ok",
                    "image_broken = false, problem = CASE WHEN problem = 'image_broken' THEN NULL"
                    " ELSE problem END",
                    True,
                )
            )
    return out


def _record(
    conn,
    row: dict,
    content: ContentResult,
    image: ImageResult | None,
    outcome: str,
    schedule: Schedule,
    now: datetime,
    duration_ms: int,
    policy: RemovalPolicy | None = None,
) -> CheckResult:
    policy = policy or RemovalPolicy.from_env()
    failed = outcome == "error" or content.transient or (image is not None and image.transient)
    failures = (row["consecutive_failures"] or 0) + 1 if failed else 0
    tier = schedule.tier_for(row["published_at"], now).name
    next_due = schedule.next_due(row["published_at"], now, failures)
    if content.status in ("unchanged", "modified"):
        etag, last_modified = content.etag, content.last_modified
    else:
        etag, last_modified = row["etag"], row["last_modified"]
    errors = [e for e in (content.error, image.error if image is not None and image.transient else None) if e]
    last_error = "; ".join(errors)[:2000] or None
    nbytes = content.bytes_fetched + (image.bytes_fetched if image is not None else 0)
    host = host_of(row["url"])
    gone_since, gone_status = row.get("gone_since"), row.get("gone_status")
    gone_checks = row.get("gone_checks") or 0
    changed_at = None
    if content.status == "modified":  # dated by the page's own dateModified when it has a plausible one
        page = content.page_updated_at
        changed_at = page if page is not None and row["published_at"] <= page <= now else now
    with transaction(conn) as cur:
        paused_by, changes = evaluate_breakers(cur, row["agency_key"], host, content.http_status, now, policy)
        evidence = None
        if content.status == "removed":
            evidence = weigh(gone_since, gone_checks, content.http_status, now, policy, paused_by)
            gone_since, gone_checks, gone_status = evidence.since, evidence.checks, content.http_status
            if row["removed_at"] is None and not evidence.confirmed:
                outcome = "suspect_removed"
                if evidence.confirm_after > now:  # look again as soon as the evidence can be complete
                    next_due = min(next_due, evidence.confirm_after)
        elif content.status in ("unchanged", "modified"):
            gone_since, gone_checks, gone_status = None, 0, None
        flags = _flag_updates(row, content, image, evidence)
        for _, assignments, reindex in flags:
            cur.execute(
                f"UPDATE news SET {assignments}{', indexed_version = NULL' if reindex else ''}"
                " WHERE id = %(id)s",
                {"now": now, "id": row["id"]},
            )
        cur.execute(
            "INSERT INTO integrity_state (news_id, tier, last_checked_at, next_due_at, checks, etag,"
            " last_modified, page_updated_at, image_status, content_status, http_status,"
            " consecutive_failures, last_error,"
            " gone_since, gone_checks, gone_status, last_changed_at, first_modified_at, image_checked_at)"
            " VALUES (%(id)s, %(tier)s, %(now)s, %(due)s, 1, %(etag)s, %(lm)s, %(pu)s, %(img)s, %(cs)s,"
            " %(http)s, %(fails)s, %(err)s, %(gsince)s, %(gchecks)s, %(gstatus)s, %(changed)s, %(changed)s,"
            " %(imgat)s)"
            " ON CONFLICT (news_id) DO UPDATE SET tier = EXCLUDED.tier,"
            " last_checked_at = EXCLUDED.last_checked_at,"
            " next_due_at = EXCLUDED.next_due_at, checks = integrity_state.checks + 1, etag = EXCLUDED.etag,"
            " last_modified = EXCLUDED.last_modified,"
            " page_updated_at = coalesce(EXCLUDED.page_updated_at, integrity_state.page_updated_at),"
            " image_status = coalesce(EXCLUDED.image_status, integrity_state.image_status),"
            " content_status = EXCLUDED.content_status, http_status = EXCLUDED.http_status,"
            " consecutive_failures = EXCLUDED.consecutive_failures, last_error = EXCLUDED.last_error,"
            " gone_since = EXCLUDED.gone_since, gone_checks = EXCLUDED.gone_checks,"
            " gone_status = EXCLUDED.gone_status,"
            " last_changed_at = coalesce(EXCLUDED.last_changed_at, integrity_state.last_changed_at),"
            " first_modified_at = coalesce(integrity_state.first_modified_at, EXCLUDED.first_modified_at),"
            " image_checked_at = coalesce(EXCLUDED.image_checked_at, integrity_state.image_checked_at)",
            {
                "id": row["id"],
                "tier": tier,
                "now": now,
                "due": next_due,
                "etag": etag,
                "lm": last_modified,
                "pu": content.page_updated_at,
                "img": image.status if image is not None else None,
                "cs": content.status,
                "http": content.http_status,
                "fails": failures,
                "err": last_error,
                "gsince": gone_since,
                "gchecks": gone_checks,
                "gstatus": gone_status,
                "changed": changed_at,
                "imgat": now if image is not None and not image.transient else None,
            },
        )
        cur.execute(
            "INSERT INTO integrity_checks (news_id, agency_key, tier, checked_at, outcome, content_status,"
            " image_status, http_status, bytes, changed_fields, duration_ms, error, host)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                row["id"],
                row["agency_key"],
                tier,
                now,
                outcome,
                content.status,
                image.status if image is not None else None,
                content.http_status,
                nbytes,
                list(content.changed_fields),
                duration_ms,
                last_error,
                host,
            ),
        )
        cur.execute(
            "INSERT INTO integrity_daily (day, tier, agency_key, outcome, checks, bytes)"
            " VALUES (%s, %s, %s, %s, 1, %s)"
            " ON CONFLICT (day, tier, agency_key, outcome) DO UPDATE SET checks = integrity_daily.checks + 1,"
            " bytes = integrity_daily.bytes + EXCLUDED.bytes",
            (now.astimezone(UTC).date(), tier, row["agency_key"], outcome, nbytes),
        )
    if outcome == "suspect_removed" and paused_by:
        log.info("integrity unique_id=%s removal paused by %s", row["unique_id"], ",".join(paused_by))
    return CheckResult(
        unique_id=row["unique_id"],
        news_id=row["id"],
        agency_key=row["agency_key"],
        tier=tier,
        outcome=outcome,
        content=content,
        image=image,
        flags=[f for f, _, _ in flags],
        next_due_at=next_due,
        consecutive_failures=failures,
        bytes_fetched=nbytes,
        duration_ms=duration_ms,
        error=last_error,
        evidence=evidence,
        paused_by=paused_by,
        breaker_changes=changes,
    )


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


def record_failure(conn, news_id: int, unique_id: str, error: str, schedule: Schedule | None = None) -> None:
    """An unexpected exception while checking: push the article back, keep its state."""
    schedule = schedule or Schedule.from_env()
    now = datetime.now(UTC)
    with transaction(conn) as cur:
        cur.execute("SELECT published_at, agency_key FROM news WHERE id = %s", (news_id,))
        found = cur.fetchone()
        if found is None:
            return
        published, agency_key = found
        cur.execute("SELECT consecutive_failures FROM integrity_state WHERE news_id = %s", (news_id,))
        prev = cur.fetchone()
        failures = (prev[0] if prev else 0) + 1
        tier = schedule.tier_for(published, now).name
        cur.execute(
            "INSERT INTO integrity_state (news_id, tier, last_checked_at, next_due_at, checks,"
            " content_status, consecutive_failures, last_error) VALUES (%s, %s, %s, %s, 1, 'error', %s, %s)"
            " ON CONFLICT (news_id) DO UPDATE SET tier = EXCLUDED.tier,"
            " last_checked_at = EXCLUDED.last_checked_at,"
            " next_due_at = EXCLUDED.next_due_at, checks = integrity_state.checks + 1,"
            " content_status = 'error', consecutive_failures = EXCLUDED.consecutive_failures,"
            " last_error = EXCLUDED.last_error",
            (news_id, tier, now, schedule.next_due(published, now, failures), failures, error[:2000]),
        )
        cur.execute(
            "INSERT INTO integrity_checks (news_id, agency_key, tier, checked_at, outcome, content_status,"
            " error) VALUES (%s, %s, %s, %s, 'error', 'error', %s)",
            (news_id, agency_key, tier, now, error[:2000]),
        )
        cur.execute(
            "INSERT INTO integrity_daily (day, tier, agency_key, outcome, checks) VALUES (%s, %s, %s,"
            " 'error', 1) ON CONFLICT (day, tier, agency_key, outcome) DO UPDATE SET"
            " checks = integrity_daily.checks + 1",
            (now.date(), tier, agency_key),
        )
    log.error("integrity unique_id=%s outcome=error unexpected failure: %s", unique_id, error)


# -- system load (checks back off while the system is loaded) ---------------------------------


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


def backlog(conn, threshold: int | None = None, outbox_max_age_s: float | None = None) -> str | None:
    """Why the event pipeline is behind (so checks should yield), or None.

    * an outbox row still unpublished ``outbox_max_age_s`` after it was written
      (``DGB_INTEGRITY_OUTBOX_MAX_AGE_S``, default 60; 0 disables);
    * more than ``threshold`` articles waiting for enrichment (the enrich stage's sweep rule,
      :data:`dgb.pipeline.definitions.ENRICH`: pending and not held as poison)
      (``DGB_INTEGRITY_BACKLOG_MAX``, default 5000; 0 disables).
    Both read partial indexes and stop early, so this is cheap at any table size.
    """
    threshold = _env_int("DGB_INTEGRITY_BACKLOG_MAX", 5000) if threshold is None else threshold
    max_age = (
        float(_env_int("DGB_INTEGRITY_OUTBOX_MAX_AGE_S", 60))
        if outbox_max_age_s is None
        else outbox_max_age_s
    )
    reason = None
    with conn.cursor() as cur:
        if max_age > 0:
            cur.execute(
                "SELECT min(created_at), count(*) FROM (SELECT created_at FROM outbox"
                " WHERE published_at IS NULL AND failed_at IS NULL"
                " AND created_at < now() - make_interval(secs => %s)"
                " LIMIT 1000) old",
                (max_age,),
            )
            oldest, stale = cur.fetchone()
            if stale:
                reason = (
                    f"{stale}{'+' if stale >= 1000 else ''} outbox event(s)"
                    f" unpublished for over {max_age:.0f} s"
                )
        if reason is None and threshold > 0:
            cur.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM news WHERE {ENRICH.sweep} LIMIT %(limit)s) p",
                {**params(None), "limit": threshold + 1},
            )
            pending = cur.fetchone()[0]
            if pending > threshold:
                reason = f"more than {threshold} articles pending enrichment"
    conn.commit()
    return reason


def database_load(conn, max_active: int | None = None, max_lock_waits: int | None = None) -> str | None:
    """Why the database is too loaded for integrity checks now, or None: more than ``max_active``
    other sessions running a statement on this database (``DGB_LOAD_MAX_ACTIVE``, default 40;
    0 disables) or more than ``max_lock_waits`` lock requests waiting (``DGB_LOAD_MAX_LOCK_WAITS``,
    default 20; 0 disables). Reads ``pg_stat_activity`` / ``pg_locks`` (cheap, no table access)."""
    max_active = _env_int("DGB_LOAD_MAX_ACTIVE", 40) if max_active is None else max_active
    max_lock_waits = _env_int("DGB_LOAD_MAX_LOCK_WAITS", 20) if max_lock_waits is None else max_lock_waits
    reason = None
    with conn.cursor() as cur:
        if max_active > 0:
            cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND state = 'active' AND pid <> pg_backend_pid()"
            )
            active = cur.fetchone()[0]
            if active > max_active:
                reason = f"{active} active database sessions (more than {max_active})"
        if reason is None and max_lock_waits > 0:
            cur.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
            waiting = cur.fetchone()[0]
            if waiting > max_lock_waits:
                reason = f"{waiting} lock requests waiting (more than {max_lock_waits})"
    conn.commit()
    return reason


def system_load(conn, **thresholds: Any) -> str | None:
    """Why integrity checks should wait now (event pipeline backlog, then database load), or
    None. One home for the load decision: the DAGs' load sensor
    (``dgb_airflow.sensors.load.PipelineLoadSensor``) polls it, and runs re-check it between checks.
    ``thresholds``: ``backlog_threshold``, ``outbox_max_age_s``, ``max_active``, ``max_lock_waits``."""
    reason = backlog(conn, thresholds.get("backlog_threshold"), thresholds.get("outbox_max_age_s"))
    return reason or database_load(conn, thresholds.get("max_active"), thresholds.get("max_lock_waits"))


def purge_old_checks(conn, days: int | None = None, batch: int = 10_000) -> int:
    """Drop ``integrity_checks`` rows older than ``DGB_INTEGRITY_LOG_DAYS`` (default 14); the
    daily roll-up keeps the counts."""
    days = _env_int("DGB_INTEGRITY_LOG_DAYS", 14) if days is None else days
    if days <= 0:
        return 0
    with transaction(conn) as cur:
        cur.execute(
            "DELETE FROM integrity_checks WHERE id IN (SELECT id FROM integrity_checks"
            " WHERE checked_at < now() - make_interval(days => %s) LIMIT %s)",
            (days, batch),
        )
        return cur.rowcount


# -- a tier run ----------------------------------------------------------------------------------


@dataclass
class TierRunSummary:
    tier: str
    due: int = 0
    checked: int = 0
    placed: int = 0
    outcomes: Counter = field(default_factory=Counter)
    bytes_fetched: int = 0
    seconds: float = 0.0
    skipped_backlog: bool = False
    note: str | None = None
    breaker_changes: list[BreakerChange] = field(default_factory=list)
    paused: Counter = field(default_factory=Counter)  # suspect articles whose removal a breaker paused

    def as_dict(self) -> dict[str, Any]:
        return {
            "tier": self.tier,
            "due": self.due,
            "checked": self.checked,
            "placed": self.placed,
            "outcomes": {o: self.outcomes.get(o, 0) for o in OUTCOMES},
            "bytes_fetched": self.bytes_fetched,
            "seconds": round(self.seconds, 3),
            "skipped_backlog": self.skipped_backlog,
            "note": self.note,
            "breaker_changes": [c.as_dict() for c in self.breaker_changes],
            "removals_paused": dict(self.paused),
        }


def run_tier(
    conn,
    fetcher: Fetcher,
    tier: str,
    limit: int | None = None,
    backlog_threshold: int | None = None,
    *,
    schedule: Schedule | None = None,
    outbox_max_age_s: float | None = None,
    max_seconds: float | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    recheck_every: int = 50,
    policy: RemovalPolicy | None = None,
    clock: Callable[[], datetime] | None = None,
) -> TierRunSummary:
    """Check the tier's due articles (at most ``limit``), yielding when the pipeline is behind.
    ``clock`` (default: the wall clock) dates the due set and every check."""
    schedule = schedule or Schedule.from_env()
    policy = policy or RemovalPolicy.from_env()
    schedule.tier(tier)  # unknown tier -> KeyError now
    limit = schedule.batch_size if limit is None else limit
    summary = TierRunSummary(tier=tier)
    t0 = time.monotonic()
    reason = backlog(conn, backlog_threshold, outbox_max_age_s)
    if reason:
        summary.skipped_backlog, summary.note = True, f"skipped_backlog: {reason}"
        log.info("integrity tier=%s outcome=skipped_backlog %s", tier, reason)
        return summary
    now = clock() if clock is not None else None
    summary.placed = assign_tiers(conn, schedule, now)
    due = due_articles(conn, tier, limit, now)
    summary.due = len(due)
    for i, item in enumerate(due):
        if max_seconds is not None and time.monotonic() - t0 > max_seconds:
            summary.note = f"stopped after {max_seconds:.0f} s with {len(due) - i} due articles left"
            break
        if i and recheck_every and i % recheck_every == 0:
            reason = backlog(conn, backlog_threshold, outbox_max_age_s)
            if reason:
                summary.skipped_backlog, summary.note = True, f"skipped_backlog: {reason} (after {i} checks)"
                log.info("integrity tier=%s outcome=skipped_backlog %s after %d checks", tier, reason, i)
                break
        try:
            result = check_article(
                conn,
                fetcher,
                item.unique_id,
                schedule=schedule,
                policy=policy,
                now=clock() if clock is not None else None,
            )
        except ArticleNotFound:
            continue
        except Exception as exc:
            conn.rollback()
            record_failure(conn, item.news_id, item.unique_id, repr(exc), schedule)
            summary.checked += 1
            summary.outcomes["error"] += 1
            continue
        _tally(summary, result, on_result)
    _purge_after_run(conn)
    summary.seconds = time.monotonic() - t0
    log.info("integrity tier=%s run: %s", tier, summary.as_dict())
    return summary


# -- a budget run (issue 14) ---------------------------------------------------------------------


def _tally(summary, result: CheckResult, on_result: Callable[[CheckResult], None] | None) -> None:
    """Count one check's result in a run summary (tier or budget run) and hand it to ``on_result``."""
    summary.checked += 1
    summary.outcomes[result.outcome] += 1
    summary.bytes_fetched += result.bytes_fetched
    summary.breaker_changes.extend(result.breaker_changes)
    if result.outcome == "suspect_removed" and result.paused_by:
        summary.paused.update(result.paused_by)
    if on_result is not None:
        try:
            on_result(result)
        except Exception:
            log.debug("on_result callback failed", exc_info=True)


def _purge_after_run(conn) -> None:
    """Trim old ``integrity_checks`` rows after a run; a failure only logs (the run's work is kept)."""
    try:
        purge_old_checks(conn)
    except Exception:
        conn.rollback()
        log.warning("integrity: purging old check rows failed", exc_info=True)


def integrity_budget_rps(policy: BudgetPolicy | None = None) -> float:
    """Requests/s the integrity checks may spend on the host now.

    The single seam with the shared per-host budget (``dgb.hostbudget``): today the configured
    share (``DGB_INTEGRITY_BUDGET_RPS``, default 1.7 = 2 req/s for www.gov.br minus ~0.27 for the
    listings of 160 agencies every 10 min); wired to the host budget's rate query, it becomes
    what the host allows integrity after listings. Each request itself still takes its turn in
    the fetch path (``Fetcher``), where the host budget hands out tokens."""
    return (policy or BudgetPolicy.from_env()).budget_rps


@dataclass
class BudgetRunSummary:
    capacity: float = 0.0  # requests the budget allowed this run
    candidates: int = 0
    planned: int = 0
    planned_by_reason: dict[str, int] = field(default_factory=dict)
    checked: int = 0
    requests: int = 0  # content checks + image checks made
    placed: int = 0
    outcomes: Counter = field(default_factory=Counter)
    bytes_fetched: int = 0
    seconds: float = 0.0
    stopped_load: bool = False
    note: str | None = None
    breaker_changes: list[BreakerChange] = field(default_factory=list)
    paused: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "capacity": round(self.capacity, 1),
            "candidates": self.candidates,
            "planned": self.planned,
            "planned_by_reason": dict(self.planned_by_reason),
            "checked": self.checked,
            "requests": self.requests,
            "placed": self.placed,
            "outcomes": {o: self.outcomes.get(o, 0) for o in OUTCOMES},
            "bytes_fetched": self.bytes_fetched,
            "seconds": round(self.seconds, 3),
            "stopped_load": self.stopped_load,
            "note": self.note,
            "breaker_changes": [c.as_dict() for c in self.breaker_changes],
            "removals_paused": dict(self.paused),
        }


PLAN_REASONS = ("fresh", "forced", "score")


def run_budget(
    conn,
    fetcher: Fetcher,
    *,
    policy: BudgetPolicy | None = None,
    schedule: Schedule | None = None,
    removal: RemovalPolicy | None = None,
    budget_rps: float | None = None,
    max_seconds: float | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    recheck_every: int = 50,
    load_thresholds: dict[str, Any] | None = None,
    clock: Callable[[], datetime] | None = None,
) -> BudgetRunSummary:
    """One run of the budget scheduler: take what the budget allows in the slot
    (``budget_rps * slot``, :func:`dgb.integrity.tiers.choose` over every article) and check
    it in the chosen order, stopping at ``max_seconds`` or when :func:`system_load` says the
    system is loaded (re-asked every ``recheck_every`` checks; the DAG's load sensor waits
    before a run starts). ``clock`` dates the plan and every check."""
    import numpy as np

    policy = policy or BudgetPolicy.from_env()
    schedule = schedule or Schedule.from_env()
    removal = removal or RemovalPolicy.from_env()
    rps = integrity_budget_rps(policy) if budget_rps is None else budget_rps
    summary = BudgetRunSummary(capacity=policy.capacity(budget_rps=rps))
    t0 = time.monotonic()
    now = clock() if clock is not None else datetime.now(UTC)
    summary.placed = assign_tiers(conn, schedule, now)
    cands = load_candidates(conn, now, policy)
    summary.candidates = len(cands)
    plan = choose(cands, now.timestamp(), summary.capacity, policy)
    summary.planned = len(plan)
    summary.planned_by_reason = {
        name: int(np.count_nonzero(plan.reason == i)) for i, name in enumerate(PLAN_REASONS)
    }
    ids = [int(cands.news_id[i]) for i in plan.index]
    with conn.cursor() as cur:
        cur.execute("SELECT id, unique_id FROM news WHERE id = ANY(%s)", (ids,))
        uid = dict(cur.fetchall())
    conn.commit()
    for n, (news_id, with_image) in enumerate(zip(ids, plan.image, strict=True)):
        if max_seconds is not None and time.monotonic() - t0 > max_seconds:
            summary.note = f"stopped after {max_seconds:.0f} s with {len(ids) - n} planned checks left"
            break
        if n and recheck_every and n % recheck_every == 0:
            reason = system_load(conn, **(load_thresholds or {}))
            if reason:
                summary.stopped_load, summary.note = True, f"stopped_load: {reason} (after {n} checks)"
                log.info("integrity budget run stopped_load %s after %d checks", reason, n)
                break
        unique_id = uid.get(news_id)
        if unique_id is None:
            continue
        try:
            result = check_article(
                conn,
                fetcher,
                unique_id,
                schedule=schedule,
                policy=removal,
                now=clock() if clock is not None else None,
                image=bool(with_image),
            )
        except ArticleNotFound:
            continue
        except Exception as exc:
            conn.rollback()
            record_failure(conn, news_id, unique_id, repr(exc), schedule)
            summary.checked += 1
            summary.requests += 1
            summary.outcomes["error"] += 1
            continue
        summary.requests += 1 + (result.image is not None)
        _tally(summary, result, on_result)
    _purge_after_run(conn)
    summary.seconds = time.monotonic() - t0
    log.info("integrity budget run: %s", summary.as_dict())
    return summary
