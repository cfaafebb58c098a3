"""Integrity runs: a tier run (:func:`run_tier`, the tiers and exponential schedules) and a budget
run (:func:`run_budget`, issue 14), each checking articles one by one
(:func:`dgb.integrity.article_check.check_article`) until done, out of time, or the system is
loaded (:mod:`dgb.integrity.backpressure`), then trimming the check log."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dgb.config import integrity as config_integrity
from dgb.fetch import Fetcher
from dgb.integrity import signal
from dgb.integrity.article_check import ArticleNotFound, check_article
from dgb.integrity.backpressure import backlog, system_load
from dgb.integrity.evidence import BreakerChange, RemovalPolicy
from dgb.integrity.purge import purge_after_run
from dgb.integrity.recording import record_failure
from dgb.integrity.result import OUTCOMES, CheckResult
from dgb.integrity.share import integrity_share
from dgb.integrity.tiers import (
    DEFAULT_BUDGET_RPS,
    BudgetPolicy,
    Schedule,
    assign_tiers,
    choose,
    due_articles,
    image_due,
    load_candidates,
    load_due_suspects,
)

log = logging.getLogger("dgb.integrity")


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
    purge_after_run(conn)
    summary.seconds = time.monotonic() - t0
    log.info("integrity tier=%s run: %s", tier, summary.as_dict())
    return summary


# -- a budget run (issue 14) ---------------------------------------------------------------------


def _signal_agencies(agencies: list | None) -> list:
    """The agencies whose change signal a run reads: ``agencies``, else the configured catalogue."""
    if agencies is not None:
        return agencies
    from dgb.agencies import agencies_for_settings
    from dgb.config import Settings

    return list(agencies_for_settings(Settings.from_env()).values())


def integrity_budget_rps(policy: BudgetPolicy | None = None, conn=None) -> float:
    """Requests/s the integrity checks may spend on the host now: ``DGB_INTEGRITY_BUDGET_RPS`` when
    set, else with a connection what the scrapes leave of the shared host budget
    (:func:`dgb.integrity.share.integrity_share`), without one the default 1.7. Each request itself
    still takes its turn in the fetch path (``Fetcher``), where the host budget hands out tokens."""
    policy = policy or BudgetPolicy.from_env()
    if conn is None:
        return DEFAULT_BUDGET_RPS if policy.budget_rps is None else policy.budget_rps
    return integrity_share(conn, policy.budget_rps).rps


@dataclass
class BudgetRunSummary:
    capacity: float = 0.0  # requests the budget allowed this run
    share: dict[str, Any] | None = None  # integrity's share of the host budget (dgb.integrity.share)
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
    # the Plone 6 change signal (dgb.integrity.signal): its reads, the marked articles checked first
    # and the unchanged ones skipped; None when off
    signal: dict[str, Any] | None = None
    rounds: int = 1  # plans made: more than one when a round ended before the slot (run_budget)
    extra_capacity: float = 0.0  # requests the later rounds were allowed, beyond ``capacity``
    due_in_run: int = 0  # suspects whose removal evidence fell due during the run, checked next

    def as_dict(self) -> dict[str, Any]:
        return {
            "capacity": round(self.capacity, 1),
            "share": self.share,
            "signal": self.signal,
            "candidates": self.candidates,
            "planned": self.planned,
            "planned_by_reason": dict(self.planned_by_reason),
            "checked": self.checked,
            "requests": self.requests,
            "placed": self.placed,
            "outcomes": {o: self.outcomes.get(o, 0) for o in OUTCOMES},
            "bytes_fetched": self.bytes_fetched,
            "seconds": round(self.seconds, 3),
            "rounds": self.rounds,
            "extra_capacity": round(self.extra_capacity, 1),
            "due_in_run": self.due_in_run,
            "stopped_load": self.stopped_load,
            "note": self.note,
            "breaker_changes": [c.as_dict() for c in self.breaker_changes],
            "removals_paused": dict(self.paused),
        }


PLAN_REASONS = ("fresh", "forced", "score")


MIN_ROUND_S = 30.0  # a run plans another round only with at least this long left in its slot
SUSPECT_LOOK_S = 60.0  # a run looks this often for removal evidence that fell due after it planned


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
    modified_signal: bool | None = None,
    agencies: list | None = None,
    min_round_s: float = MIN_ROUND_S,
    suspect_look_s: float = SUSPECT_LOOK_S,
) -> BudgetRunSummary:
    """One run of the budget scheduler: take what the budget allows in the slot
    (``budget_rps * slot``, :func:`dgb.integrity.tiers.choose` over every article; ``budget_rps``
    None: integrity's share of the host budget now, :mod:`dgb.integrity.share`) and check
    it in the chosen order, stopping at ``max_seconds`` or when :func:`system_load` says the
    system is loaded (re-asked every ``recheck_every`` checks; the DAG's load sensor waits
    before a run starts). ``clock`` dates the plan and every check.

    The share is an estimate, and the host budget paces every request: when listings leave more
    than estimated (a quiet hour, a drain after a burst) a round ends before the slot does. With
    ``max_seconds``, the run then plans another round for the time left (at the same rate, over
    the articles not checked in the last minutes), and so on until less than ``min_round_s`` is
    left or a round finds nothing to check: the slot's time is used, never more than the host
    budget allows.

    With the change signal (``modified_signal``, default ``DGB_INTEGRITY_MODIFIED_SIGNAL``, on;
    :mod:`dgb.integrity.signal`) the run first reads each Plone 6 agency's search sorted by
    modification date (one request each, out of the capacity), checks the articles it marked
    first, and leaves out of the plan the unchanged ones it covers. ``agencies``: the catalogue
    the reads come from (default: the configured one, mirror URLs in mirror mode).

    Every ``suspect_look_s`` the run asks for suspect articles whose removal evidence fell due
    since it planned (a first 410 is looked at again 15 min later, seldom at a slot's start) and
    checks them next, in place of the plan's last checks: a removal is confirmed about a minute
    after its evidence is due instead of at the next slot's plan (0 turns this off)."""
    policy = policy or BudgetPolicy.from_env()
    schedule = schedule or Schedule.from_env()
    removal = removal or RemovalPolicy.from_env()
    share = integrity_share(conn, policy.budget_rps if budget_rps is None else budget_rps)
    summary = BudgetRunSummary(capacity=policy.capacity(budget_rps=share.rps), share=share.as_dict())
    t0 = time.monotonic()
    now = clock() if clock is not None else datetime.now(UTC)
    summary.placed = assign_tiers(conn, schedule, now)
    capacity = summary.capacity
    use_signal = config_integrity.modified_signal() if modified_signal is None else modified_signal
    first: list[tuple[int, str]] = []  # marked by the change signal: checked before the plan
    skip: set[int] = set()
    if use_signal:
        reads = signal.read_signals(conn, fetcher, _signal_agencies(agencies), now, limit=int(capacity))
        first = signal.marked(conn, int(capacity - reads.requests))
        capacity -= reads.requests + len(first)
        skip = signal.skippable(conn, reads, now)
        summary.requests += reads.requests
        summary.signal = {**reads.as_dict(), "checked_first": len(first), "skipped": 0}
    ctx = _Round(
        conn,
        fetcher,
        policy,
        schedule,
        removal,
        summary,
        t0,
        max_seconds,
        on_result,
        recheck_every,
        load_thresholds,
        clock,
        suspect_look_s,
    )
    planned = ctx.plan_and_check(now, capacity, first, skip if use_signal else None)
    while planned and max_seconds is not None and not summary.stopped_load and summary.note is None:
        left = max_seconds - (time.monotonic() - t0)
        if left < min_round_s:
            break
        now = ctx._now()
        extra = policy.capacity(seconds=left, budget_rps=share.rps)
        summary.extra_capacity += extra
        summary.rounds += 1
        planned = ctx.plan_and_check(now, extra, [], skip if use_signal else None)
    purge_after_run(conn)
    summary.seconds = time.monotonic() - t0
    log.info("integrity budget run: %s", summary.as_dict())
    return summary


@dataclass
class _Round:
    """What the rounds of one :func:`run_budget` share; :meth:`plan_and_check` runs one round."""

    conn: Any
    fetcher: Fetcher
    policy: BudgetPolicy
    schedule: Schedule
    removal: RemovalPolicy
    summary: BudgetRunSummary
    t0: float
    max_seconds: float | None
    on_result: Callable[[CheckResult], None] | None
    recheck_every: int
    load_thresholds: dict[str, Any] | None
    clock: Callable[[], datetime] | None
    suspect_look_s: float = SUSPECT_LOOK_S

    def plan_and_check(self, now: datetime, capacity: float, first: list, skip: set[int] | None) -> int:
        """Plan ``capacity`` requests at ``now`` (after ``first``, the signal's marked articles;
        without the articles ``skip`` holds, None: no signal) and check them; the checks planned."""
        import numpy as np

        conn, policy, summary = self.conn, self.policy, self.summary
        cands = load_candidates(conn, now, policy)
        if skip is not None:
            before = len(cands)
            cands = signal.without(cands, skip, image_due(cands, now.timestamp(), policy))
            summary.signal["skipped"] = max(summary.signal["skipped"], before - len(cands))
            cands = signal.without(cands, {news_id for news_id, _ in first})
        summary.candidates = max(summary.candidates, len(cands))
        plan = choose(cands, now.timestamp(), capacity, policy)
        summary.planned += len(plan)
        for i, name in enumerate(PLAN_REASONS):
            summary.planned_by_reason[name] = summary.planned_by_reason.get(name, 0) + int(
                np.count_nonzero(plan.reason == i)
            )
        ids = [news_id for news_id, _ in first] + [int(cands.news_id[i]) for i in plan.index]
        images = [False] * len(first) + [bool(x) for x in plan.image]
        self._check(ids, images)
        return len(ids)

    def _now(self) -> datetime:
        return self.clock() if self.clock is not None else datetime.now(UTC)

    def _due_first(self, done: list, rest: list, uid: dict[int, str]) -> list:
        """``rest`` (the checks left, (news id, with image)) with the removal evidence due now in
        front and as many of its last checks dropped: the round makes no more requests than planned."""
        checked = {news_id for news_id, _ in done}
        found = load_due_suspects(self.conn, self._now(), self.policy, len(rest) + len(done))
        due = [c for c in found if c[0] not in checked][: len(rest)]
        if not due:
            return rest
        uid.update(due)
        image = dict(rest)
        taken = {news_id for news_id, _ in due}
        self.summary.due_in_run += len(taken - image.keys())
        front = [(news_id, image.get(news_id, False)) for news_id, _ in due]
        return (front + [c for c in rest if c[0] not in taken])[: len(rest)]

    def _check(self, ids: list[int], images: list[bool]) -> None:
        conn, summary = self.conn, self.summary
        with conn.cursor() as cur:
            cur.execute("SELECT id, unique_id FROM news WHERE id = ANY(%s)", (ids,))
            uid = dict(cur.fetchall())
        conn.commit()
        queue = list(zip(ids, images, strict=True))
        look_at = time.monotonic() + self.suspect_look_s
        for n in range(len(queue)):
            if self.max_seconds is not None and time.monotonic() - self.t0 > self.max_seconds:
                summary.note = (
                    f"stopped after {self.max_seconds:.0f} s with {len(ids) - n} planned checks left"
                )
                break
            if n and self.recheck_every and n % self.recheck_every == 0:
                reason = system_load(conn, **(self.load_thresholds or {}))
                if reason:
                    summary.stopped_load, summary.note = True, f"stopped_load: {reason} (after {n} checks)"
                    log.info("integrity budget run stopped_load %s after %d checks", reason, n)
                    break
            if self.suspect_look_s and time.monotonic() >= look_at:
                look_at = time.monotonic() + self.suspect_look_s
                queue[n:] = self._due_first(queue[:n], queue[n:], uid)
            news_id, with_image = queue[n]
            unique_id = uid.get(news_id)
            if unique_id is None:
                continue
            try:
                result = check_article(
                    conn,
                    self.fetcher,
                    unique_id,
                    schedule=self.schedule,
                    policy=self.removal,
                    now=self.clock() if self.clock is not None else None,
                    image=bool(with_image),
                )
            except ArticleNotFound:
                continue
            except Exception as exc:
                conn.rollback()
                record_failure(conn, news_id, unique_id, repr(exc), self.schedule)
                summary.checked += 1
                summary.requests += 1
                summary.outcomes["error"] += 1
                continue
            summary.requests += 1 + (result.image is not None)
            _tally(summary, result, self.on_result)
