"""When an article is checked again: age tiers, check intervals, and the due set.

One configuration (environment, read by :meth:`Schedule.from_env`) drives both the DAGs (one
per tier, each on its own schedule) and each article's ``integrity_state.next_due_at``.

Tiers by article age in whole days (fixed intervals per age band), the default
``DGB_INTEGRITY_SCHEDULE=tiers``:

=========  ==========  ==============
tier       age         checked every
=========  ==========  ==============
0_2d       0-2 days    10 minutes
3_7d       3-7 days    1 hour
8_30d      8-30 days   6 hours
31_90d     31-90 days  24 hours
gt90d      > 90 days   7 days
=========  ==========  ==============

``DGB_INTEGRITY_SCHEDULE=exponential`` (a frequency decaying exponentially with age) keeps the
tiers as the unit of work (one DAG each) but spaces each article's checks by
``frequency = base * e^(-lambda * days)``, i.e.
an interval of ``DGB_INTEGRITY_BASE_MINUTES * e^(DGB_INTEGRITY_LAMBDA * days)`` minutes
(fractional days), capped at ``DGB_INTEGRITY_MAX_MINUTES`` (default a week); each tier's DAG
then runs at the interval its youngest articles need. Defaults: base 10 min, lambda 0.3.

After failed checks the interval doubles per consecutive failure (up to a day, never below
the normal interval), so a misbehaving host is not hammered.

The due set of a tier is read from ``integrity_state`` through the index
``(tier, next_due_at, news_id)`` (migration 0003): never-checked rows have
``next_due_at = -infinity`` and come first, then the most overdue. Within a tier every
article shares the same interval (tiers mode), so most overdue is also longest since last
check. New articles get their state row from a trigger with ``tier`` NULL; :func:`assign_tiers`
places them (a partial index keeps that cheap). An article's tier is recomputed from its age
at every check, so it moves to the slower tier as it ages.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from dgb.config import env_number

SCHEDULE_MODES = ("tiers", "exponential")
DAG_PREFIX = "integrity_tier_"


@dataclass(frozen=True)
class Tier:
    name: str
    min_days: int
    max_days: int | None  # inclusive; None = no upper bound
    interval: timedelta  # check interval in "tiers" mode

    @property
    def dag_id(self) -> str:
        return DAG_PREFIX + self.name

    @property
    def label(self) -> str:
        if self.max_days is None:
            return f"> {self.min_days - 1} days"
        return f"{self.min_days}-{self.max_days} days"

    def contains(self, age_days: float) -> bool:
        whole = math.floor(max(0.0, age_days))
        return whole >= self.min_days and (self.max_days is None or whole <= self.max_days)


DEFAULT_TIERS: tuple[Tier, ...] = (
    Tier("0_2d", 0, 2, timedelta(minutes=10)),
    Tier("3_7d", 3, 7, timedelta(hours=1)),
    Tier("8_30d", 8, 30, timedelta(hours=6)),
    Tier("31_90d", 31, 90, timedelta(hours=24)),
    Tier("gt90d", 91, None, timedelta(days=7)),
)


def _num(name: str, default: float) -> float:
    """A positive number (the decay rate DGB_INTEGRITY_LAMBDA may also be 0)."""
    if name == "DGB_INTEGRITY_LAMBDA":
        return env_number(name, default, minimum=0.0)
    return env_number(name, default, above=0.0)


@dataclass(frozen=True)
class Schedule:
    mode: str = "tiers"
    base_minutes: float = 10.0
    lam: float = 0.3
    max_minutes: float = 7 * 24 * 60
    tiers: tuple[Tier, ...] = field(default=DEFAULT_TIERS)
    batch_size: int = 200  # articles per tier run

    def __post_init__(self) -> None:
        if self.mode not in SCHEDULE_MODES:
            raise ValueError(f"DGB_INTEGRITY_SCHEDULE must be one of {SCHEDULE_MODES}, got {self.mode!r}")

    @classmethod
    def from_env(cls) -> Schedule:
        mode = os.environ.get("DGB_INTEGRITY_SCHEDULE", "").strip().lower() or "tiers"
        return cls(
            mode=mode,
            base_minutes=_num("DGB_INTEGRITY_BASE_MINUTES", cls.base_minutes),
            lam=_num("DGB_INTEGRITY_LAMBDA", cls.lam),
            max_minutes=_num("DGB_INTEGRITY_MAX_MINUTES", cls.max_minutes),
            batch_size=int(_num("DGB_INTEGRITY_BATCH", cls.batch_size)),
        )

    # -- tiers ----------------------------------------------------------------------------------
    def tier(self, name: str) -> Tier:
        for t in self.tiers:
            if t.name == name:
                return t
        raise KeyError(f"unknown integrity tier {name!r}; known: {[t.name for t in self.tiers]}")

    @staticmethod
    def age_days(published_at: datetime, now: datetime) -> float:
        return max(0.0, (now - published_at).total_seconds() / 86400.0)

    def tier_for(self, published_at: datetime, now: datetime) -> Tier:
        age = self.age_days(published_at, now)
        for t in self.tiers:
            if t.contains(age):
                return t
        return self.tiers[-1]

    # -- intervals ------------------------------------------------------------------------------
    def exponential_minutes(self, age_days: float) -> float:
        """Interval in minutes = base * e^(lambda * days), capped (frequency = base * e^(-lambda * days))."""
        exponent = self.lam * max(0.0, age_days)
        if exponent > 50:  # far beyond any cap; avoid overflow
            return self.max_minutes
        return min(self.max_minutes, self.base_minutes * math.exp(exponent))

    def interval(self, published_at: datetime, now: datetime) -> timedelta:
        if self.mode == "exponential":
            return timedelta(minutes=self.exponential_minutes(self.age_days(published_at, now)))
        return self.tier_for(published_at, now).interval

    def next_due(self, published_at: datetime, now: datetime, failures: int = 0) -> datetime:
        step = self.interval(published_at, now)
        if failures > 0:
            backed = step * (2 ** min(failures, 16))
            step = max(step, min(backed, timedelta(days=1)))
        return now + step

    def dag_interval(self, tier: Tier) -> timedelta:
        """How often the tier's DAG runs: the tier's interval, or in exponential mode the interval
        its youngest articles need (whole minutes, at least one)."""
        if self.mode == "exponential":
            minutes = self.exponential_minutes(float(tier.min_days))
            return timedelta(minutes=max(1, round(minutes)))
        return tier.interval

    def with_mode(self, mode: str) -> Schedule:
        return replace(self, mode=mode)


def next_due(
    published_at: datetime, now: datetime | None = None, failures: int = 0, schedule: Schedule | None = None
) -> datetime:
    """When an article published at ``published_at`` is next due, checked at ``now``."""
    now = now or datetime.now(UTC)
    return (schedule or Schedule.from_env()).next_due(published_at, now, failures)


# -- the due set -------------------------------------------------------------------------------


@dataclass(frozen=True)
class DueArticle:
    news_id: int
    unique_id: str
    next_due_at: datetime | None  # None: never checked (-infinity)
    last_checked_at: datetime | None


DUE_SQL = (
    "SELECT s.news_id, n.unique_id, CASE WHEN isfinite(s.next_due_at) THEN s.next_due_at END,"
    " s.last_checked_at"
    " FROM integrity_state s JOIN news n ON n.id = s.news_id"
    " WHERE s.tier = %(tier)s AND s.next_due_at <= %(now)s"
    " ORDER BY s.next_due_at, s.news_id"
    " LIMIT %(limit)s"
)


def due_articles(conn, tier: str, limit: int, now: datetime | None = None) -> list[DueArticle]:
    """The tier's due articles: never checked first, then the longest overdue; at most ``limit``.
    Read through the ``integrity_state_tier_due_idx`` index (no scan of the tier)."""
    now = now or datetime.now(UTC)
    with conn.cursor() as cur:
        cur.execute(DUE_SQL, {"tier": tier, "now": now, "limit": int(limit)})
        rows = cur.fetchall()
    conn.commit()
    return [DueArticle(*r) for r in rows]


def assign_tiers(
    conn, schedule: Schedule | None = None, now: datetime | None = None, limit: int = 50_000
) -> int:
    """Give never-placed state rows (``tier IS NULL``: new articles) their tier by age.
    Returns the number of rows placed (state rows themselves come from the news insert trigger)."""
    schedule = schedule or Schedule.from_env()
    now = now or datetime.now(UTC)
    cases, params = [], []
    for t in schedule.tiers[:-1]:
        # whole age in days <= max_days  <=>  published_at > now - (max_days + 1) days
        cases.append("WHEN n.published_at > %s THEN %s")
        params += [now - timedelta(days=(t.max_days or 0) + 1), t.name]
    case = "CASE " + " ".join(cases) + " ELSE %s END"
    params.append(schedule.tiers[-1].name)
    with conn.cursor() as cur:
        cur.execute(
            "WITH todo AS (SELECT news_id FROM integrity_state WHERE tier IS NULL"
            "              ORDER BY news_id LIMIT %s FOR UPDATE SKIP LOCKED)"
            f" UPDATE integrity_state s SET tier = {case}"
            " FROM todo JOIN news n ON n.id = todo.news_id"
            " WHERE s.news_id = todo.news_id",
            [limit] + params,
        )
        placed = cur.rowcount
    conn.commit()
    return placed
