"""One request budget per host, shared by every task on every worker and executor (issue 14).

gov.br is one host (``www.gov.br``) for ~160 agencies, so politeness must hold for the whole
fleet, not per task. Every request a :class:`dgb.fetch.Fetcher` makes with a budget (scrape
listings, article pages, the Plone 6 API, robots.txt, integrity pages and image HEADs, every retry
and redirect hop) first takes, in PostgreSQL (the one store every worker shares):

* a **token**: tokens are spaced ``1 / rate_per_s`` apart (``host_budgets.next_at``; no burst),
  and no more than :func:`window_cap` tokens are granted in any ``DGB_HOST_WINDOW`` seconds (10;
  ``host_grants``): spacing alone allows ``w * rate + 1`` in a window of ``w`` seconds, and the
  network's jitter between a grant and its arrival can push one more into a window measured at the
  site, so the window keeps one token of margin (19 in any 10 s at 2/s; costs 5% only when
  saturated);
* an **in-flight slot**: a ``host_slots`` row with a lease. It is deleted when the request ends;
  a killed worker's slot is ignored (and swept) once ``lease_until`` has passed, so a dead task
  never leaks a slot for longer than the lease (default 90 s: longer than the fetch timeouts).

The host row is locked (``SELECT ... FOR UPDATE``) for the few statements of one attempt; times
are the database's ``clock_timestamp()``, so workers on different machines agree.

**Backoff for everyone.** A 429/503 with Retry-After sets ``backoff_until`` (capped at
``DGB_HOST_BACKOFF_MAX``): no task gets a token for that host before it. ``DGB_HOST_ERROR_STREAK``
(3) consecutive 5xx/408/429/network errors from any task set a backoff of ``5 s * 2^(n-3)``
(same cap); a normal answer resets the streak.

**Priority.** ``scrape`` (0: listing pages and the new articles they lead to) comes before
``integrity`` (1). A request may take a token only when no request of a higher priority is
waiting for that host (``host_waiters``, refreshed while waiting, expired if its process died),
and lower priorities may hold at most ``max_in_flight - reserved`` slots (``reserved`` default 1,
never the last slot of a 1-slot host), so a listing never waits behind integrity checks for a slot
either. Integrity therefore gets what scrapes leave; how much that is, each integrity run decides
with :mod:`dgb.integrity.share` (from the cadence's plan and the grants below).

**Configuration** (read by each process; the first use of a host in a process writes its limits
into ``host_budgets``, which every worker then obeys): ``DGB_HOST_RPS`` (2) and
``DGB_HOST_MAX_IN_FLIGHT`` (2) for any host, ``www.gov.br`` 2 requests/s and 2 in flight, per-host
overrides in ``DGB_HOST_BUDGETS="www.gov.br=2/2,agenciabrasil.ebc.com.br=1/1"``
(``host=rps[/in_flight]``). ``DGB_HOST_BUDGET=0`` turns the shared budget off (each fetcher then
spaces its own requests by ``DGB_FETCH_MIN_INTERVAL``). The local mirror (``127.0.0.1:<port>``) is a
host like any other.

The API (used by the fetcher and ``dgb status``)::

    budget = HostBudget(dsn)
    with budget.acquire("www.gov.br", "integrity", timeout=30) as slot:
        ...; slot.report(status=resp.status, retry_after=seconds)
    snapshot(conn)                             # per-host figures for status / UI
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

import psycopg

from dgb.config import http as config_http
from dgb.scrape_errors import NetworkError

log = logging.getLogger(__name__)

PRIORITIES: dict[str, int] = {"scrape": 0, "integrity": 1}
PRIORITY_NAMES: dict[int, str] = {v: k for k, v in PRIORITIES.items()}
GOV_BR = "www.gov.br"
GRANTS_KEPT_S = 600  # host_grants rows older than this are pruned (longer than any window)
RATE_WINDOW_S = 60  # window of the measured rate


class BudgetTimeout(NetworkError):
    """No token or slot for the host within the wait timeout (a network_error for the scraper)."""


@dataclass(frozen=True)
class HostLimits:
    rate_per_s: float
    max_in_flight: int
    reserved: int = 1  # slots only the top priority may take (capped at max_in_flight - 1)


def window_cap(rate_per_s: float, window_s: float) -> int:
    """Tokens a host may be granted in any ``window_s`` seconds at ``rate_per_s``: ``rate x window``,
    one fewer when that leaves at least 9 (margin for arrival jitter at the site), at least 1."""
    n = math.floor(rate_per_s * window_s + 1e-9)
    return n - 1 if n >= 10 else max(1, n)


def parse_host_budgets(raw: str) -> dict[str, tuple[float, int | None]]:
    """``"www.gov.br=2/2,127.0.0.1:8090=5"`` -> ``{host: (rps, in_flight or None)}``."""
    out: dict[str, tuple[float, int | None]] = {}
    for part in (p.strip() for p in raw.split(",")):
        if not part:
            continue
        host, sep, spec = part.partition("=")
        rps_text, _, flight_text = spec.partition("/")
        try:
            rps = float(rps_text)
            flight = int(flight_text) if flight_text.strip() else None
        except ValueError:
            rps, flight = -1.0, None
        if not sep or not host.strip() or rps <= 0 or (flight is not None and flight < 1):
            raise ValueError(
                f"DGB_HOST_BUDGETS: want host=requests_per_s[/max_in_flight] (rps > 0, in flight >= 1), "
                f"got {part!r}"
            )
        out[host.strip().lower()] = (rps, flight)
    return out


@dataclass(frozen=True)
class BudgetConfig:
    """Limits per host and the budget's timings; :meth:`from_env` reads the ``DGB_HOST_*`` settings."""

    default_rps: float = 2.0
    default_in_flight: int = 2
    reserved: int = 1
    overrides: dict[str, tuple[float, int | None]] = field(default_factory=lambda: {GOV_BR: (2.0, 2)})
    lease_s: float = 90.0  # an in-flight slot of a dead process is free again after this
    wait_timeout_s: float = 600.0  # acquire() gives up (BudgetTimeout) after this by default
    poll_s: float = 0.1  # re-check interval while waiting for a slot or a higher priority
    window_s: float = 10.0  # at most window_cap(rate, window_s) grants in any window_s (0: off)
    waiter_ttl_s: float = 5.0  # a waiter row not refreshed for this long is ignored
    error_streak: int = 3
    backoff_base_s: float = 5.0
    backoff_max_s: float = 300.0

    @classmethod
    def from_env(cls) -> BudgetConfig:
        overrides = {GOV_BR: (2.0, 2)}
        overrides.update(parse_host_budgets(config_http.host_budget_overrides()))
        return cls(overrides=overrides, **config_http.host_budget())

    def limits(self, host: str) -> HostLimits:
        rps, flight = self.overrides.get(host.lower(), (self.default_rps, self.default_in_flight))
        return HostLimits(rps, flight or self.default_in_flight, self.reserved)


def host_key(url: str) -> str:
    """The budget's key for a URL: its authority as requested (``www.gov.br``, ``127.0.0.1:8090``)."""
    return urlsplit(url).netloc.lower()


def priority_value(priority: str | int) -> int:
    if isinstance(priority, int):
        return priority
    try:
        return PRIORITIES[priority]
    except KeyError:
        raise ValueError(
            f"unknown request priority {priority!r}; expected one of {sorted(PRIORITIES)}"
        ) from None


def _is_error(status: int | None) -> bool:
    return status is None or status >= 500 or status in (408, 429)


@dataclass
class Slot:
    """One granted request: report its outcome with :meth:`report` (feeds the host-wide backoff)."""

    budget: HostBudget
    host: str
    priority: int
    id: int
    waited_s: float
    reported: bool = False

    def report(
        self, status: int | None = None, retry_after: float | None = None, *, error: bool = False
    ) -> None:
        """The answer: an HTTP ``status`` (with its Retry-After in seconds, if any), or ``error=True``
        for a network error. 429/503 + Retry-After and error streaks slow the host for everyone."""
        self.reported = True
        self.budget._report(self.host, None if error else status, retry_after)


class HostBudget:
    """Client of the shared budget; one per task (it holds one autocommit PostgreSQL connection,
    opened on first use, separate from the task's own transactions)."""

    def __init__(
        self,
        dsn: str,
        config: BudgetConfig | None = None,
        *,
        holder: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.dsn = dsn
        self.config = config or BudgetConfig.from_env()
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}"
        self._sleep = sleep
        self._conn = None
        self._configured: set[str] = set()

    # -- connection --------------------------------------------------------------------

    def _connection(self):
        if self._conn is None or self._conn.closed or self._conn.broken:
            from dgb import db

            self._conn = db.connect(self.dsn, autocommit=True, connect_timeout=10)
            self._configured.clear()
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> HostBudget:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- public ------------------------------------------------------------------------

    @contextmanager
    def acquire(
        self, host: str, priority: str | int = "scrape", timeout: float | None = None
    ) -> Iterator[Slot]:
        """Wait for a token and an in-flight slot of ``host`` (at most ``timeout`` s, else
        :class:`BudgetTimeout`), hold the slot for the block, free it on exit (even on error)."""
        slot = self.take(host, priority, timeout)
        try:
            yield slot
        finally:
            self.release(slot)

    def take(self, host: str, priority: str | int = "scrape", timeout: float | None = None) -> Slot:
        """:meth:`acquire` without the context: the caller must :meth:`release` the slot."""
        host = host.lower()
        prio = priority_value(priority)
        timeout = self.config.wait_timeout_s if timeout is None else timeout
        t0 = time.monotonic()
        deadline = t0 + timeout
        conn = self._connection()
        waiter: int | None = None
        try:
            while True:
                try:
                    granted, wait = self._attempt(conn, host, prio, waiter)
                except psycopg.OperationalError:
                    if not conn.broken:
                        raise
                    # the server restarted under us: one fresh connection (an old waiter row
                    # expires by itself; a new one is registered if we wait again)
                    log.warning("host budget: connection lost, reconnecting")
                    conn, waiter = self._connection(), None
                    granted, wait = self._attempt(conn, host, prio, waiter)
                if granted is not None:
                    return Slot(self, host, prio, granted, time.monotonic() - t0)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BudgetTimeout(
                        f"no request slot for {host} within {timeout:.0f}s"
                        f" (priority {PRIORITY_NAMES.get(prio, prio)})"
                    )
                if waiter is None:
                    waiter = self._register_waiter(conn, host, prio)
                # short sleeps: the waiter row stays fresh and a release is noticed soon
                self._sleep(max(0.005, min(wait, remaining, 1.0)))
        finally:
            if waiter is not None:
                try:
                    conn.execute("DELETE FROM host_waiters WHERE id = %s", (waiter,))
                except Exception:  # the row expires by itself
                    log.debug("could not delete waiter %s", waiter, exc_info=True)

    def release(self, slot: Slot) -> None:
        try:
            self._connection().execute("DELETE FROM host_slots WHERE id = %s", (slot.id,))
        except Exception:  # the lease expires by itself
            log.warning(
                "could not release slot %s of %s (its lease will expire)", slot.id, slot.host, exc_info=True
            )

    # -- robots.txt shared by every task (migration 0012) -------------------------------------

    ROBOTS_BODY_CAP = 500_000  # characters kept of one robots.txt (RFC 9309 asks for >= 500 KiB)

    def robots_get(self, robots_url: str, max_age_s: float) -> tuple[int, str] | None:
        """A robots.txt another task fetched less than ``max_age_s`` ago: ``(status, body)``, or
        None (none, too old, or the database unavailable: the caller fetches it itself)."""
        try:
            with self._connection().cursor() as cur:
                cur.execute(
                    "SELECT status, body FROM robots_cache WHERE robots_url = %s"
                    " AND fetched_at > now() - make_interval(secs => %s)",
                    (robots_url, float(max_age_s)),
                )
                row = cur.fetchone()
        except Exception as exc:  # never let the cache stop a fetch
            log.debug("robots cache read failed for %s: %s", robots_url, exc)
            return None
        return (int(row[0]), row[1]) if row else None

    def robots_put(self, robots_url: str, status: int, body: str) -> None:
        """Share a definite robots.txt answer (2xx or 4xx) with every task."""
        if not 200 <= status < 500:
            return
        try:
            with self._connection().cursor() as cur:
                cur.execute(
                    "INSERT INTO robots_cache (robots_url, status, body, fetched_at)"
                    " VALUES (%s, %s, %s, now()) ON CONFLICT (robots_url) DO UPDATE"
                    " SET status = EXCLUDED.status, body = EXCLUDED.body, fetched_at = EXCLUDED.fetched_at",
                    (robots_url, status, body[: self.ROBOTS_BODY_CAP] if status < 400 else ""),
                )
        except Exception as exc:
            log.debug("robots cache write failed for %s: %s", robots_url, exc)

    def snapshot(self, hosts: list[str] | None = None) -> list[dict]:
        return snapshot(self._connection(), hosts)

    # -- internals ---------------------------------------------------------------------

    def _ensure_host(self, conn, host: str) -> None:
        """First use of ``host`` in this process: write the configured limits into its row."""
        if host in self._configured:
            return
        lim = self.config.limits(host)
        conn.execute(
            "INSERT INTO host_budgets (host, rate_per_s, max_in_flight, reserved) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (host) DO UPDATE SET rate_per_s = EXCLUDED.rate_per_s,"
            " max_in_flight = EXCLUDED.max_in_flight, reserved = EXCLUDED.reserved, updated_at = now()"
            " WHERE (host_budgets.rate_per_s, host_budgets.max_in_flight, host_budgets.reserved)"
            " IS DISTINCT FROM (EXCLUDED.rate_per_s, EXCLUDED.max_in_flight, EXCLUDED.reserved)",
            (host, lim.rate_per_s, lim.max_in_flight, lim.reserved),
        )
        self._configured.add(host)

    def _register_waiter(self, conn, host: str, prio: int) -> int:
        return conn.execute(
            "INSERT INTO host_waiters (host, priority, holder, since, expires_at)"
            " VALUES (%s, %s, %s, clock_timestamp(), clock_timestamp() + make_interval(secs => %s))"
            " RETURNING id",
            (host, prio, self.holder, self.config.waiter_ttl_s),
        ).fetchone()[0]

    def _attempt(self, conn, host: str, prio: int, waiter: int | None) -> tuple[int | None, float]:
        """One locked look at the host: (slot id, 0) when granted, else (None, seconds to wait)."""
        self._ensure_host(conn, host)
        cfg = self.config
        with conn.transaction():
            if waiter is not None:
                conn.execute(
                    "UPDATE host_waiters SET expires_at = clock_timestamp() + make_interval(secs => %s)"
                    " WHERE id = %s",
                    (cfg.waiter_ttl_s, waiter),
                )
            rate, cap, reserved, token_wait, backoff_wait = conn.execute(
                "SELECT rate_per_s, max_in_flight, reserved,"
                " extract(epoch FROM greatest(next_at, clock_timestamp()) - clock_timestamp())::float8,"
                " extract(epoch FROM backoff_until - clock_timestamp())::float8"
                " FROM host_budgets WHERE host = %s FOR UPDATE",
                (host,),
            ).fetchone()
            if backoff_wait is not None and backoff_wait > 0:
                return None, backoff_wait
            in_flight, in_flight_low = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE priority > 0) FROM host_slots"
                " WHERE host = %s AND lease_until > clock_timestamp()",
                (host,),
            ).fetchone()
            if in_flight >= cap:
                return None, cfg.poll_s
            if prio > 0:
                low_cap = max(1, cap - min(reserved, cap - 1))
                if in_flight_low >= low_cap:
                    return None, cfg.poll_s
                higher_waiting = conn.execute(
                    "SELECT EXISTS (SELECT 1 FROM host_waiters WHERE host = %s AND priority < %s"
                    " AND expires_at > clock_timestamp())",
                    (host, prio),
                ).fetchone()[0]
                if higher_waiting:
                    return None, cfg.poll_s
            if token_wait is not None and token_wait > 0:
                return None, token_wait
            if cfg.window_s > 0:
                # the cap-th newest grant inside the window: the next token waits until it leaves
                row = conn.execute(
                    "SELECT extract(epoch FROM at + make_interval(secs => %(w)s) - clock_timestamp())::float8"
                    " FROM host_grants WHERE host = %(h)s"
                    " AND at > clock_timestamp() - make_interval(secs => %(w)s)"
                    " ORDER BY at DESC OFFSET %(k)s LIMIT 1",
                    {"h": host, "w": cfg.window_s, "k": window_cap(rate, cfg.window_s) - 1},
                ).fetchone()
                if row is not None and row[0] > 0:
                    return None, row[0]
            slot_id = conn.execute(
                "WITH swept AS (DELETE FROM host_slots"
                "   WHERE host = %(h)s AND lease_until <= clock_timestamp()),"
                " pruned AS (DELETE FROM host_grants WHERE host = %(h)s"
                "   AND at < clock_timestamp() - make_interval(secs => %(keep)s)),"
                " logged AS (INSERT INTO host_grants (host, at, priority)"
                "   VALUES (%(h)s, clock_timestamp(), %(p)s)),"
                " bumped AS (UPDATE host_budgets SET granted = granted + 1,"
                "   next_at = greatest(next_at, clock_timestamp()) + make_interval(secs => %(gap)s)"
                "   WHERE host = %(h)s)"
                " INSERT INTO host_slots (host, priority, holder, acquired_at, lease_until)"
                " VALUES (%(h)s, %(p)s, %(who)s, clock_timestamp(),"
                "   clock_timestamp() + make_interval(secs => %(lease)s))"
                " RETURNING id",
                {
                    "h": host,
                    "p": prio,
                    "who": self.holder,
                    "keep": GRANTS_KEPT_S,
                    "gap": 1.0 / rate,
                    "lease": cfg.lease_s,
                },
            ).fetchone()[0]
            return slot_id, 0.0

    def _report(self, host: str, status: int | None, retry_after: float | None) -> None:
        cfg = self.config
        conn = self._connection()
        if status in (429, 503) and retry_after is not None:
            pause = min(max(0.0, float(retry_after)), cfg.backoff_max_s)
            conn.execute(
                "UPDATE host_budgets SET error_streak = error_streak + 1, backoff_reason = %s,"
                " updated_at = now(),"
                " backoff_until = greatest(coalesce(backoff_until, '-infinity'),"
                "   clock_timestamp() + make_interval(secs => %s)) WHERE host = %s",
                (f"HTTP {status} Retry-After {pause:.0f}s", pause, host),
            )
            log.warning("host %s: HTTP %s Retry-After %.0fs: host-wide backoff", host, status, pause)
        elif _is_error(status):
            row = conn.execute(
                "UPDATE host_budgets SET error_streak = error_streak + 1 WHERE host = %s"
                " RETURNING error_streak",
                (host,),
            ).fetchone()
            streak = row[0] if row else 0
            if streak >= cfg.error_streak:
                pause = min(cfg.backoff_max_s, cfg.backoff_base_s * 2 ** (streak - cfg.error_streak))
                what = "network error" if status is None else f"HTTP {status}"
                conn.execute(
                    "UPDATE host_budgets SET backoff_reason = %s, updated_at = now(),"
                    " backoff_until = greatest(coalesce(backoff_until, '-infinity'),"
                    "   clock_timestamp() + make_interval(secs => %s)) WHERE host = %s",
                    (f"{streak} errors in a row (last: {what})", pause, host),
                )
                log.warning("host %s: %d errors in a row: host-wide backoff %.0fs", host, streak, pause)
        else:
            conn.execute(
                "UPDATE host_budgets SET error_streak = 0 WHERE host = %s AND error_streak <> 0", (host,)
            )


def snapshot(conn, hosts: list[str] | None = None) -> list[dict]:
    """Per-host figures (for ``dgb status`` and the UI): configured rate
    and in-flight cap, requests in flight and waiting (by priority), measured requests/s over the
    last minute (by priority), backoff left and why, error streak, tokens granted."""
    rows = conn.execute(
        "SELECT b.host, b.rate_per_s, b.max_in_flight, b.reserved, b.backoff_until, b.backoff_reason,"
        " b.error_streak, b.granted,"
        " greatest(0, coalesce(extract(epoch FROM b.backoff_until - clock_timestamp()), 0))::float8,"
        " (SELECT coalesce(jsonb_object_agg(priority, n), '{}') FROM (SELECT priority, count(*) n"
        "   FROM host_slots s WHERE s.host = b.host AND s.lease_until > clock_timestamp()"
        "   GROUP BY priority) x),"
        " (SELECT coalesce(jsonb_object_agg(priority, n), '{}') FROM (SELECT priority, count(*) n"
        "   FROM host_waiters w WHERE w.host = b.host AND w.expires_at > clock_timestamp()"
        "   GROUP BY priority) y),"
        " (SELECT coalesce(jsonb_object_agg(priority, n), '{}') FROM (SELECT priority, count(*) n"
        "   FROM host_grants g WHERE g.host = b.host"
        "   AND g.at > clock_timestamp() - make_interval(secs => %s) GROUP BY priority) z)"
        " FROM host_budgets b WHERE %s::text[] IS NULL OR b.host = ANY(%s::text[]) ORDER BY b.host",
        (RATE_WINDOW_S, hosts, hosts),
    ).fetchall()
    if not getattr(conn, "autocommit", True):
        conn.commit()

    def named(counts: dict) -> dict[str, int]:
        return {PRIORITY_NAMES.get(int(k), str(k)): int(v) for k, v in counts.items()}

    out = []
    for host, rate, cap, reserved, until, reason, streak, granted, backoff_s, slots, waiters, grants in rows:
        grants_n = named(grants)
        out.append(
            {
                "host": host,
                "rate_per_s": float(rate),
                "max_in_flight": cap,
                "reserved": reserved,
                "in_flight": sum(named(slots).values()),
                "in_flight_by_priority": named(slots),
                "waiting": sum(named(waiters).values()),
                "waiting_by_priority": named(waiters),
                "measured_rps": round(sum(grants_n.values()) / RATE_WINDOW_S, 3),
                "measured_rps_by_priority": {k: round(v / RATE_WINDOW_S, 3) for k, v in grants_n.items()},
                "backoff_s": round(backoff_s, 1),
                "backoff_until": until.isoformat() if until is not None and backoff_s > 0 else None,
                "backoff_reason": reason if backoff_s > 0 else None,
                "error_streak": streak,
                "granted": granted,
            }
        )
    return out


def budget_from_env(settings=None) -> HostBudget | None:
    """The shared budget for this process's tasks, or None when ``DGB_HOST_BUDGET=0``."""
    if not config_http.host_budget_enabled():
        return None
    from dgb.config import settings as current

    return HostBudget((settings or current()).pg_dsn())


def task_fetcher(priority: str, *, settings=None, **fetcher_kwargs):
    """A task's :class:`dgb.fetch.Fetcher` under the shared host budget at ``priority``. With the
    budget on and ``DGB_FETCH_MIN_INTERVAL`` unset the budget alone spaces requests (no extra
    per-task interval); with ``DGB_HOST_BUDGET=0`` the fetcher spaces its own (1 s default)."""
    from dgb.fetch import Fetcher, FetchPolicy

    priority_value(priority)
    policy = FetchPolicy.from_env()
    budget = budget_from_env(settings)
    if budget is not None and config_http.fetch_min_interval() is None:
        policy = replace(policy, min_interval=0.0)
    return Fetcher(policy, budget=budget, priority=priority, **fetcher_kwargs)
