"""Removal needs evidence (issue 16): when a 404/410 may hide an article, and when it may not.

One answer from one request is not evidence that a government article was withdrawn: sites
have outages, misconfigurations and URL migrations. So:

* **Confirmation.** A 404 or 410 makes the article ``suspect_removed`` (``news.problem``; still
  indexed and searchable, listed for operators). It is hidden (``removed_at`` set, deleted from
  Typesense by the index stage) only when the gone answer is seen again: at least
  ``confirm_checks`` gone answers in a row, the last at least ``delay`` after the first
  (404: 2 answers >= 6 h apart; 410 Gone, an explicit statement, 2 answers >= 15 min apart).
  The service re-checks a suspect article when its delay is up, whatever its tier. Any normal
  answer (200/304, or the article found at a new URL) ends the streak and lifts the flag.
* **Breaker.** Per agency and per host: when at least ``breaker_min_checks`` checks in the last
  ``breaker_window`` include at least ``breaker_ratio`` answering 404/410 or 5xx, the scope is
  *tripped*: removals there pause (gone answers still make articles suspect, never hidden). A
  tripped scope clears once its last ``breaker_reset_ok`` checks all answered normally (< 400);
  after that only checks made since the clearing count towards a new trip (hysteresis).
  State lives in ``integrity_breakers``; each trip and clearing is returned to the caller (the
  operator sends a StatsD counter) and logged.

Settings (environment, read by :func:`dgb.config.integrity.removal_policy`; see docs/configuration.md):
``DGB_INTEGRITY_REMOVAL_CONFIRM_CHECKS`` (2), ``DGB_INTEGRITY_REMOVAL_DELAY_S`` (21600),
``DGB_INTEGRITY_GONE_CONFIRM_CHECKS`` (2), ``DGB_INTEGRITY_GONE_DELAY_S`` (900),
``DGB_INTEGRITY_BREAKER_WINDOW_S`` (3600), ``DGB_INTEGRITY_BREAKER_MIN_CHECKS`` (20),
``DGB_INTEGRITY_BREAKER_RATIO`` (0.2), ``DGB_INTEGRITY_BREAKER_RESET_OK`` (5).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from dgb.config import integrity as config_integrity

log = logging.getLogger("dgb.integrity.evidence")

SCOPES = ("agency", "host")

# a check answer that counts against a scope's health: gone, or the server failing
BAD_SQL = "(http_status IN (404, 410) OR http_status >= 500)"


def is_bad(http_status: int | None) -> bool:
    return http_status is not None and (http_status in (404, 410) or http_status >= 500)


def is_normal(http_status: int | None) -> bool:
    return http_status is not None and http_status < 400


@dataclass(frozen=True)
class RemovalPolicy:
    confirm_checks: int = 2  # 404 answers in a row before an article is hidden
    delay_s: int = 6 * 3600  # ... the last at least this long after the first
    gone_confirm_checks: int = 2  # the same for 410 Gone
    gone_delay_s: int = 15 * 60
    breaker_window_s: int = 3600
    breaker_min_checks: int = 20
    breaker_ratio: float = 0.2
    breaker_reset_ok: int = 5  # normal answers in a row that clear a tripped scope

    @classmethod
    def from_env(cls) -> RemovalPolicy:
        return cls(**config_integrity.removal_policy())

    def needs(self, http_status: int | None) -> tuple[int, timedelta]:
        """(gone answers in a row, minimum span first -> last) that confirm a removal."""
        if http_status == 410:
            return self.gone_confirm_checks, timedelta(seconds=self.gone_delay_s)
        return self.confirm_checks, timedelta(seconds=self.delay_s)


@dataclass(frozen=True)
class Evidence:
    """The gone streak after this check, and what it allows."""

    since: datetime  # first gone answer of the streak
    checks: int  # gone answers in the streak, this one included
    confirmed: bool  # enough evidence, and removals are not paused: hide it
    confirm_after: datetime  # when the delay is up (the service re-checks then)
    paused_by: tuple[str, ...]  # tripped scopes ("agency:mec", "host:www.gov.br") that paused it


def weigh(
    since: datetime | None,
    checks: int | None,
    http_status: int | None,
    now: datetime,
    policy: RemovalPolicy,
    paused_by: tuple[str, ...] = (),
) -> Evidence:
    """Add this gone answer to the article's streak (``since``/``checks`` as stored, None/0 when
    the last answer was normal) and decide whether the removal is confirmed."""
    first = since if since is not None and since <= now else now
    count = (checks or 0) + 1
    need, delay = policy.needs(http_status)
    enough = count >= need and now - first >= delay
    return Evidence(
        since=first,
        checks=count,
        confirmed=enough and not paused_by,
        confirm_after=first + delay,
        paused_by=tuple(paused_by),
    )


def next_look(evidence: Evidence, http_status: int | None, now: datetime, policy: RemovalPolicy) -> datetime:
    """When an unconfirmed gone streak is worth checking again: when one more answer can move it on.

    The gone answers still needed are spread over what is left of the delay, the last at its end,
    so a 410 seen once is looked at again when its 15 minutes are up, not at its age tier's next due
    time (a check before then confirms nothing). A streak short of answers after its delay is up
    gets them at the policy's own spacing (delay / answers needed). A streak with enough answers
    and its delay up, yet not confirmed (a tripped breaker paused it), gets ``now``: nothing to wait
    for, so the caller keeps its tier's schedule."""
    need, delay = policy.needs(http_status)
    left = need - evidence.checks
    if left <= 0:
        return max(evidence.confirm_after, now)
    wait = (evidence.confirm_after - now) / left
    return now + (wait if wait > timedelta(0) else delay / need)


def host_of(url: str | None) -> str | None:
    try:
        return (urlsplit(url or "").netloc or "").lower() or None
    except ValueError:
        return None


@dataclass(frozen=True)
class BreakerChange:
    scope: str
    key: str
    event: str  # "tripped" or "cleared"
    checks: int
    bad_checks: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "key": self.key,
            "event": self.event,
            "checks": self.checks,
            "bad_checks": self.bad_checks,
        }


def evaluate_breakers(
    cur, agency_key: str, host: str | None, http_status: int | None, now: datetime, policy: RemovalPolicy
) -> tuple[tuple[str, ...], list[BreakerChange]]:
    """Update the agency's and the host's breaker with this check's answer (not inserted yet:
    it is counted here) inside the caller's transaction. Returns the scopes tripped after it
    (``"agency:<key>"``, ``"host:<host>"``) and the trips/clearings it caused."""
    tripped: list[str] = []
    changes: list[BreakerChange] = []
    column = {"agency": "agency_key", "host": "host"}
    for scope, key in (("agency", agency_key), ("host", host)):
        if not key:
            continue
        cur.execute(
            "SELECT tripped, cleared_at FROM integrity_breakers WHERE scope = %s AND key = %s FOR UPDATE",
            (scope, key),
        )
        row = cur.fetchone()
        is_tripped, cleared_at = (row[0], row[1]) if row else (False, None)
        if is_tripped:
            need = policy.breaker_reset_ok
            cur.execute(
                f"SELECT http_status FROM integrity_checks WHERE {column[scope]} = %s"
                " AND checked_at <= %s ORDER BY checked_at DESC, id DESC LIMIT %s",
                (key, now, need - 1),
            )
            recent = [http_status] + [r[0] for r in cur.fetchall()]
            if len(recent) >= need and all(is_normal(s) for s in recent):
                cur.execute(
                    "UPDATE integrity_breakers SET tripped = false, cleared_at = %s, updated_at = %s,"
                    " reason = %s WHERE scope = %s AND key = %s",
                    (now, now, f"cleared: {need} normal answers in a row", scope, key),
                )
                changes.append(BreakerChange(scope, key, "cleared", len(recent), 0))
                log.warning(
                    "integrity breaker cleared scope=%s key=%s: %d normal answers in a row; removals resume",
                    scope,
                    key,
                    need,
                )
            else:
                tripped.append(f"{scope}:{key}")
            continue
        start = now - timedelta(seconds=policy.breaker_window_s)
        if cleared_at is not None and cleared_at > start:
            start = cleared_at
        cur.execute(
            f"SELECT count(*), count(*) FILTER (WHERE {BAD_SQL}) FROM integrity_checks"
            f" WHERE {column[scope]} = %s AND checked_at > %s AND checked_at <= %s",
            (key, start, now),
        )
        n, bad = cur.fetchone()
        n, bad = n + 1, bad + (1 if is_bad(http_status) else 0)
        if n >= policy.breaker_min_checks and bad >= policy.breaker_ratio * n:
            reason = (
                f"{bad} of {n} checks since {start.isoformat(timespec='seconds')} answered 404/410/5xx"
                f" (>= {policy.breaker_ratio:.0%} of >= {policy.breaker_min_checks})"
            )
            cur.execute(
                "INSERT INTO integrity_breakers (scope, key, tripped, tripped_at, checks, bad_checks, reason,"
                " updated_at) VALUES (%s, %s, true, %s, %s, %s, %s, %s)"
                " ON CONFLICT (scope, key) DO UPDATE SET tripped = true, tripped_at = EXCLUDED.tripped_at,"
                " checks = EXCLUDED.checks, bad_checks = EXCLUDED.bad_checks, reason = EXCLUDED.reason,"
                " updated_at = EXCLUDED.updated_at, trips = integrity_breakers.trips + 1"
                " WHERE NOT integrity_breakers.tripped RETURNING 1",
                (scope, key, now, n, bad, reason, now),
            )
            tripped.append(f"{scope}:{key}")
            if cur.fetchone() is not None:  # this check tripped it (not a concurrent run first)
                changes.append(BreakerChange(scope, key, "tripped", n, bad))
                log.warning(
                    "integrity breaker tripped scope=%s key=%s: %s; removals paused", scope, key, reason
                )
    return tuple(tripped), changes


def tripped_breakers(conn) -> list[dict[str, Any]]:
    """The scopes whose removals are paused now (for ``dgb status``, the report and the UI)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT scope, key, tripped_at, checks, bad_checks, reason, trips FROM integrity_breakers"
            " WHERE tripped ORDER BY scope, key"
        )
        rows = cur.fetchall()
    conn.commit()
    return [
        {
            "scope": s,
            "key": k,
            "tripped_at": t.isoformat() if t else None,
            "checks": n,
            "bad_checks": b,
            "reason": r,
            "trips": trips,
        }
        for s, k, t, n, b, r, trips in rows
    ]
