"""When each agency's listing is read next: a cadence learnt from its publication history (issue 27).

Standard library only, pure: the ``scrape_dispatcher`` DAG (:mod:`dgb.scraper.dispatch`) calls it
every minute with histories read from ``news``, and ``scripts/bench_scale.py`` calls the same
functions on its simulated clock.

**Expected rate.** An agency's history is its article count in each of the 168 hours of the week
(Brasília time, UTC-3 all year) over the last ``history_days`` (28), and the time of its newest
article. The rate it is expected to publish at in hour-of-week ``h`` (articles per hour) blends its
own count in that hour with its overall volume spread as every agency together publishes over the
week (``profile``: office hours, few at night and at weekends), weighted as ``prior_weeks`` (2)
weeks of data, so a sparse history is smoothed and a rich one speaks for itself::

    rate(h) = (count[h] + prior_weeks * volume_per_week * profile[h]) / (weeks + prior_weeks)

The cadence looks one hour ahead (``max(rate(h), rate(h + 1))``), so polls quicken before a peak.
**Time since the last new article** adds a recent rate, ``recent_weight * 3600 / seconds since``
(0.25: an article 5 min ago means 3/h), so a quiet agency that suddenly publishes (an emergency)
is polled at its floor from the poll that finds its first new article, and slows again as the
burst ages.

**Interval.** ``floor * sqrt(busy_per_hour / rate)``, between ``floor_s`` (60 s) and ``ceiling_s``
(3600 s). The square root spends listing requests where they cut most lag: for a fixed number of
polls, the mean publication -> poll delay is least when each agency's interval goes as
``1 / sqrt(rate)``. An agency expected to publish ``busy_per_hour`` (0.7) articles an hour or more
is polled at the floor; one with no article in its history and none recently, at the ceiling.
The defaults are the cheapest of the settings tried that met the freshness targets in
``scripts/bench_scale.py`` (p95 publication -> scraped <= 3 min on the publication model estimated
from real articles).

**Budget.** :func:`plan` picks, each tick, the agencies whose interval has passed, most overdue
first (never polled first of all), at most ``listing_share * host_rps * tick_s`` of them (0.75 of
www.gov.br's 2 req/s: 90 a minute); the rest wait for the next tick (reason ``budget``). The cap
bounds the polls of the busiest minute to 1.5 req/s (the scrape runs of the polls that found news
come on top: a few a minute); over a day the scrapes average 0.88 req/s in ``bench_scale.py``,
less at night and at weekends, and the host budget (:mod:`dgb.hostbudget`) still serves scrapes
before integrity request by request and never lets the host exceed its 2 req/s.

Reasons (``Cadence.reason``): ``busy`` (at the floor from history), ``recent`` (the time since the
last new article drives the rate), ``history`` (between floor and ceiling from the hour's rate),
``dormant`` (at the ceiling); :func:`plan` adds ``budget`` for a due agency left for the next tick.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from dgb.config import scrape as config_scrape

SLOTS = 168  # hours in a week
HOUR = 3600.0
DAY = 86400.0
BRT_OFFSET_S = -3 * HOUR  # Brasília time: UTC-3 all year (no daylight saving since 2019)
REASONS = ("busy", "recent", "history", "dormant", "budget")


def hour_of_week(ts: float) -> int:
    """Hour of the week in Brasília time for epoch seconds ``ts``: Monday 00h = 0 ... Sunday 23h = 167."""
    local = ts + BRT_OFFSET_S
    days = math.floor(local / DAY)
    weekday = (days + 3) % 7  # 1970-01-01 was a Thursday
    return int(weekday * 24 + (local - days * DAY) // HOUR)


@dataclass(frozen=True)
class CadencePolicy:
    """The cadence's settings; :meth:`from_env` reads the ``DGB_SCRAPE_*`` ones (dgb.config.scrape)."""

    floor_s: float = 60.0
    ceiling_s: float = 3600.0
    busy_per_hour: float = 0.7
    prior_weeks: float = 2.0
    recent_weight: float = 0.25
    history_days: float = 28.0
    listing_share: float = 0.75  # of the host's requests/s, at most, for the listings started per tick
    tick_s: float = 60.0  # the dispatcher's period

    def __post_init__(self):
        if not 0 < self.floor_s <= self.ceiling_s:
            raise ValueError(f"cadence floor {self.floor_s} s must be > 0 and <= ceiling {self.ceiling_s} s")

    @classmethod
    def from_env(cls) -> CadencePolicy:
        return cls(**config_scrape.cadence_policy())

    def per_tick(self, host_rps: float) -> int:
        """Most listings started in one tick inside the host budget's listing share (at least one)."""
        return max(1, int(self.listing_share * host_rps * self.tick_s + 1e-9))


@dataclass
class History:
    """One agency's publication history: counts per hour of the week over ``days``, newest article."""

    counts: list[float] = field(default_factory=lambda: [0.0] * SLOTS)
    days: float = 28.0
    last_new: float | None = None  # epoch seconds of its newest article (published_at)

    @classmethod
    def from_times(cls, published: Iterable[float], now: float, days: float) -> History:
        """From publication times (epoch seconds): those in ``[now - days, now]`` are counted."""
        h = cls(days=days)
        start = now - days * DAY
        for ts in published:
            if ts <= now:
                h.last_new = ts if h.last_new is None else max(h.last_new, ts)
                if ts >= start:
                    h.counts[hour_of_week(ts)] += 1
        return h

    @property
    def total(self) -> float:
        return float(sum(self.counts))


@dataclass(frozen=True)
class Cadence:
    interval_s: float
    reason: str
    rate_per_hour: float  # the rate the interval was computed from

    def describe(self) -> str:
        return f"{self.reason}: every {fmt_interval(self.interval_s)} ({self.rate_per_hour:.2f}/h expected)"


def fmt_interval(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def week_profile(histories: Iterable[History]) -> list[float]:
    """Every agency's share of articles per hour of the week (sums to 1; uniform with no data).

    A small uniform part (1% of the week's total) keeps hours nobody published in above zero."""
    total = [0.0] * SLOTS
    for h in histories:
        for i, c in enumerate(h.counts):
            total[i] += c
    n = sum(total)
    if n <= 0:
        return [1.0 / SLOTS] * SLOTS
    smoothed = [c + 0.01 * n / SLOTS for c in total]
    s = sum(smoothed)
    return [c / s for c in smoothed]


def slot_rate(history: History, slot: int, profile: Sequence[float], policy: CadencePolicy) -> float:
    """Expected articles per hour in hour-of-week ``slot`` (see the module docstring)."""
    weeks = max(history.days / 7.0, 1e-9)
    per_week = history.total / weeks
    k = policy.prior_weeks
    return (history.counts[slot % SLOTS] + k * per_week * profile[slot % SLOTS]) / (weeks + k)


def cadence(
    history: History, now: float, policy: CadencePolicy, profile: Sequence[float] | None = None
) -> Cadence:
    """The agency's polling interval now, and why."""
    profile = profile or [1.0 / SLOTS] * SLOTS
    slot = hour_of_week(now)
    learnt = max(slot_rate(history, slot, profile, policy), slot_rate(history, slot + 1, profile, policy))
    recent = 0.0
    if history.last_new is not None:
        since = max(now - history.last_new, policy.floor_s)
        recent = policy.recent_weight * HOUR / since
    rate = max(learnt, recent)
    if rate <= 0:
        return Cadence(policy.ceiling_s, "dormant", 0.0)
    raw = policy.floor_s * math.sqrt(policy.busy_per_hour / rate)
    if raw >= policy.ceiling_s:
        return Cadence(policy.ceiling_s, "dormant", rate)
    if recent > learnt:
        return Cadence(max(raw, policy.floor_s), "recent", rate)
    if raw <= policy.floor_s:
        return Cadence(policy.floor_s, "busy", rate)
    return Cadence(raw, "history", rate)


@dataclass(frozen=True)
class Plan:
    due: list[str]  # keys to poll now, most overdue first
    deferred: list[str]  # due but over this tick's share of the budget
    capacity: int


def is_due(last_poll: float | None, interval_s: float, now: float, policy: CadencePolicy) -> bool:
    """Due when the interval has passed, give or take half a tick (polls start a few seconds after
    the tick that dispatched them; without the slack a 60 s interval would become 120 s)."""
    return last_poll is None or now - last_poll >= interval_s - policy.tick_s / 2


def plan(
    agencies: Iterable[tuple[str, Cadence, float | None]],
    now: float,
    policy: CadencePolicy,
    host_rps: float,
) -> Plan:
    """Which of ``(key, cadence, last poll)`` to poll this tick, inside the listing share of the budget."""
    due = [
        (math.inf if last is None else (now - last) / c.interval_s, key)
        for key, c, last in agencies
        if is_due(last, c.interval_s, now, policy)
    ]
    due.sort(key=lambda x: (-x[0], x[1]))
    capacity = policy.per_tick(host_rps)
    keys = [k for _, k in due]
    return Plan(keys[:capacity], keys[capacity:], capacity)
