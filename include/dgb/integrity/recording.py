"""Recording one check: flags, ``integrity_state``, ``integrity_checks`` and the daily roll-up.

:func:`record` writes everything a check found in one transaction, in named steps:

1. :func:`_entry` - what the check writes, worked out before the transaction (tier, next due
   time, consecutive failures, validators, the error, bytes, when the page changed);
2. the agency's and host's removal breakers (:func:`dgb.integrity.evidence.evaluate_breakers`);
3. :func:`_weigh_gone_streak` - a 404/410 extends the gone streak and is weighed
   (:func:`dgb.integrity.evidence.weigh`): unconfirmed, the article is ``suspect_removed``;
   a normal answer ends the streak;
4. :func:`_apply_flags` - the flag changes (:func:`_flag_updates`) on ``news``;
5. :func:`_upsert_state` - the article's ``integrity_state`` row (ending the change signal's
   mark, :mod:`dgb.integrity.signal`, once the page read is at least as new);
6. :func:`_log_check` - one ``integrity_checks`` row and the ``integrity_daily`` roll-up.

:func:`record_failure` records an unexpected exception instead (the article is pushed back).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from dgb.db import transaction
from dgb.integrity.checks import ContentResult, ImageResult
from dgb.integrity.evidence import Evidence, RemovalPolicy, evaluate_breakers, host_of, next_look, weigh
from dgb.integrity.result import CheckResult
from dgb.integrity.tiers import Schedule

log = logging.getLogger("dgb.integrity")

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


@dataclass
class _Entry:
    """What one check writes: worked out before the transaction (:func:`_entry`), the outcome,
    next due time and gone streak completed inside it (:func:`_weigh_gone_streak`)."""

    outcome: str
    tier: str
    next_due: datetime
    failures: int
    etag: str | None
    last_modified: str | None
    last_error: str | None
    nbytes: int
    host: str
    changed_at: datetime | None
    gone_since: datetime | None
    gone_checks: int
    gone_status: int | None
    evidence: Evidence | None = None


def _entry(
    row: dict,
    content: ContentResult,
    image: ImageResult | None,
    outcome: str,
    schedule: Schedule,
    now: datetime,
) -> _Entry:
    failed = outcome == "error" or content.transient or (image is not None and image.transient)
    failures = (row["consecutive_failures"] or 0) + 1 if failed else 0
    if content.status in ("unchanged", "modified"):
        etag, last_modified = content.etag, content.last_modified
    else:
        etag, last_modified = row["etag"], row["last_modified"]
    errors = [e for e in (content.error, image.error if image is not None and image.transient else None) if e]
    changed_at = None
    if content.status == "modified":  # dated by the page's own dateModified when it has a plausible one
        page = content.page_updated_at
        changed_at = page if page is not None and row["published_at"] <= page <= now else now
    return _Entry(
        outcome=outcome,
        tier=schedule.tier_for(row["published_at"], now).name,
        next_due=schedule.next_due(row["published_at"], now, failures),
        failures=failures,
        etag=etag,
        last_modified=last_modified,
        last_error="; ".join(errors)[:2000] or None,
        nbytes=content.bytes_fetched + (image.bytes_fetched if image is not None else 0),
        host=host_of(row["url"]),
        changed_at=changed_at,
        gone_since=row.get("gone_since"),
        gone_checks=row.get("gone_checks") or 0,
        gone_status=row.get("gone_status"),
    )


def _weigh_gone_streak(
    entry: _Entry,
    row: dict,
    content: ContentResult,
    now: datetime,
    policy: RemovalPolicy,
    paused_by: tuple[str, ...],
) -> None:
    """A gone answer extends the streak and is weighed; a normal answer ends it."""
    if content.status == "removed":
        evidence = weigh(entry.gone_since, entry.gone_checks, content.http_status, now, policy, paused_by)
        entry.evidence = evidence
        entry.gone_since, entry.gone_checks, entry.gone_status = (
            evidence.since,
            evidence.checks,
            content.http_status,
        )
        if row["removed_at"] is None and not evidence.confirmed:
            entry.outcome = "suspect_removed"
            look = next_look(evidence, content.http_status, now, policy)
            if look > now:  # when the next gone answer can move the streak on, not before
                entry.next_due = look
    elif content.status in ("unchanged", "modified"):
        entry.gone_since, entry.gone_checks, entry.gone_status = None, 0, None


def _apply_flags(cur, row: dict, flags: list[tuple[str, str, bool]], now: datetime) -> None:
    for _, assignments, reindex in flags:
        cur.execute(
            f"UPDATE news SET {assignments}{', indexed_version = NULL' if reindex else ''} WHERE id = %(id)s",
            {"now": now, "id": row["id"]},
        )


def _upsert_state(
    cur, row: dict, content: ContentResult, image: ImageResult | None, entry: _Entry, now: datetime
) -> None:
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
        " image_checked_at = coalesce(EXCLUDED.image_checked_at, integrity_state.image_checked_at),"
        # the change signal's mark ends with a check that read the page at least that new (or found
        # it gone): a failed check, or a page older than the search said, keeps it
        " signal_modified_at = CASE WHEN EXCLUDED.content_status IN ('unchanged', 'modified', 'removed')"
        " AND (EXCLUDED.page_updated_at IS NULL"
        " OR EXCLUDED.page_updated_at >= integrity_state.signal_modified_at)"
        " THEN NULL ELSE integrity_state.signal_modified_at END",
        {
            "id": row["id"],
            "tier": entry.tier,
            "now": now,
            "due": entry.next_due,
            "etag": entry.etag,
            "lm": entry.last_modified,
            "pu": content.page_updated_at,
            "img": image.status if image is not None else None,
            "cs": content.status,
            "http": content.http_status,
            "fails": entry.failures,
            "err": entry.last_error,
            "gsince": entry.gone_since,
            "gchecks": entry.gone_checks,
            "gstatus": entry.gone_status,
            "changed": entry.changed_at,
            "imgat": now if image is not None and not image.transient else None,
        },
    )


def _log_check(
    cur,
    row: dict,
    content: ContentResult,
    image: ImageResult | None,
    entry: _Entry,
    now: datetime,
    duration_ms: int,
) -> None:
    cur.execute(
        "INSERT INTO integrity_checks (news_id, agency_key, tier, checked_at, outcome, content_status,"
        " image_status, http_status, bytes, changed_fields, duration_ms, error, host)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            row["id"],
            row["agency_key"],
            entry.tier,
            now,
            entry.outcome,
            content.status,
            image.status if image is not None else None,
            content.http_status,
            entry.nbytes,
            list(content.changed_fields),
            duration_ms,
            entry.last_error,
            entry.host,
        ),
    )
    cur.execute(
        "INSERT INTO integrity_daily (day, tier, agency_key, outcome, checks, bytes)"
        " VALUES (%s, %s, %s, %s, 1, %s)"
        " ON CONFLICT (day, tier, agency_key, outcome) DO UPDATE SET checks = integrity_daily.checks + 1,"
        " bytes = integrity_daily.bytes + EXCLUDED.bytes",
        (now.astimezone(UTC).date(), entry.tier, row["agency_key"], entry.outcome, entry.nbytes),
    )


def record(
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
    """Record one check (``outcome`` without the removal decision, which is made here) in one
    transaction; the result tells what was found and changed."""
    policy = policy or RemovalPolicy.from_env()
    entry = _entry(row, content, image, outcome, schedule, now)
    with transaction(conn) as cur:
        paused_by, changes = evaluate_breakers(
            cur, row["agency_key"], entry.host, content.http_status, now, policy
        )
        _weigh_gone_streak(entry, row, content, now, policy, paused_by)
        flags = _flag_updates(row, content, image, entry.evidence)
        _apply_flags(cur, row, flags, now)
        _upsert_state(cur, row, content, image, entry, now)
        _log_check(cur, row, content, image, entry, now, duration_ms)
    if entry.outcome == "suspect_removed" and paused_by:
        log.info("integrity unique_id=%s removal paused by %s", row["unique_id"], ",".join(paused_by))
    return CheckResult(
        unique_id=row["unique_id"],
        news_id=row["id"],
        agency_key=row["agency_key"],
        tier=entry.tier,
        outcome=entry.outcome,
        content=content,
        image=image,
        flags=[f for f, _, _ in flags],
        next_due_at=entry.next_due,
        consecutive_failures=entry.failures,
        bytes_fetched=entry.nbytes,
        duration_ms=duration_ms,
        error=entry.last_error,
        evidence=entry.evidence,
        paused_by=paused_by,
        breaker_changes=changes,
    )


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
