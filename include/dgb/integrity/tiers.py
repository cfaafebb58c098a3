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

``DGB_INTEGRITY_SCHEDULE=budget`` (the default, issue 14) keeps these tiers as labels (the
``tier`` column, the per-tier report) and their intervals as the fallback ``next_due_at``, but what
is checked is chosen by :func:`choose` within a request budget (one DAG, ``integrity_budget``); see
"The budget scheduler" below.

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
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from dgb.config import integrity as config_integrity

SCHEDULE_MODES = ("budget", "tiers", "exponential")
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


@dataclass(frozen=True)
class Schedule:
    mode: str = "budget"
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
        return cls(**config_integrity.schedule())

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


# -- the budget scheduler (issue 14) -------------------------------------------------------------
#
# One host (www.gov.br) serves ~160 agencies and ~300k articles; checking all of them at the seed's
# fixed intervals would need ~7 requests/s. The budget scheduler spends a given request budget
# (requests/s for integrity on the host, after listing traffic: dgb.integrity.share) where it detects
# most edits soonest:
#
# 1. removal evidence due (a suspect 404/410 to confirm), so a removal leaves the index one delay
#    after its first gone answer even when young articles are queued; until then the suspect is
#    not a candidate at all (a check before its next look confirms nothing);
# 2. fresh: articles under ``fresh_age`` (3 h) not checked for ``fresh_interval`` (10 min), the
#    longest-unchecked first (recent news every ~10 min). Their texts come before their images:
#    under a backlog (a burst, the 10x chaos load) a pass costs one request per article, not two,
#    and the images follow once the texts fit;
# 3. forced: articles that went ``max_unchecked`` (25 days) without a check, so every article is
#    seen at least monthly;
# 4. the rest by expected value per cost:
#
#        hazard = agency_rate * ((age_h + 1)^-a + recency * (since_change_h + 1)^-a)
#        score  = hazard * since_check_h^2 / cost
#
#    ``hazard`` is proportional to the expected edits per hour: a prior that decays with age (exponent ``a``,
#    default 2: most edits come in the first hours), raised again after a change (the page's own
#    dateModified or a change we detected: edits come in bursts), scaled by the agency's measured
#    modification rate (:func:`agency_rate_multipliers`). ``hazard * since_check^2 / 2`` is
#    the detection delay accumulated since the last check (edits at rate ``hazard``, each waiting
#    on average half the gap); checking the highest first approximately minimises the total
#    delay for the budget (the square-root law: check frequency proportional to sqrt(hazard)).
#    ``cost`` is 1 for a page that last answered 200, ``cost_304`` (0.5) for one that answered
#    304 (a validator round trip, no body, no parse), plus ``image_cost`` when the image is due.
#
# Images are re-checked less often than text: an image is due when its last check is older than
# a quarter of the article's age (at least ``image_min_interval``, at most ``max_unchecked``).
# A run takes what the budget allows in its slot: ``budget_rps * slot_seconds`` requests (a check
# is one request, two with its image). The same functions drive the DAG (through
# :func:`load_candidates`) and ``scripts/bench_scale.py`` (an in-memory store, a simulated clock).


@dataclass(frozen=True)
class AgeBand:
    """An article-age band of the report: coverage = share of its articles checked within
    ``target`` (the issue's detection targets); overdue = the others."""

    name: str
    label: str
    min_age: timedelta
    max_age: timedelta | None  # exclusive; None = no upper bound
    target: timedelta


AGE_BANDS: tuple[AgeBand, ...] = (
    AgeBand("lt3h", "< 3 h", timedelta(0), timedelta(hours=3), timedelta(minutes=20)),
    AgeBand("3h_2d", "3 h - 2 days", timedelta(hours=3), timedelta(days=2), timedelta(hours=2)),
    AgeBand("2_30d", "2-30 days", timedelta(days=2), timedelta(days=30), timedelta(hours=24)),
    AgeBand("30_90d", "30-90 days", timedelta(days=30), timedelta(days=90), timedelta(days=7)),
    AgeBand("gt90d", "> 90 days", timedelta(days=90), None, timedelta(days=30)),
)


def band_for(age: timedelta, bands: tuple[AgeBand, ...] = AGE_BANDS) -> AgeBand:
    for b in bands:
        if age >= b.min_age and (b.max_age is None or age < b.max_age):
            return b
    return bands[0] if age < bands[0].min_age else bands[-1]


DEFAULT_BUDGET_RPS = 1.7  # www.gov.br's 2 req/s minus ~0.3 for listings, when nothing is measured


@dataclass(frozen=True)
class BudgetPolicy:
    """The budget scheduler's knobs (``DGB_INTEGRITY_*``, read by :meth:`from_env`)."""

    # requests/s of the host a run plans with; None: what the scrapes leave of the shared host
    # budget, decided per run (dgb.integrity.share); DEFAULT_BUDGET_RPS where nothing is measured
    budget_rps: float | None = None
    slot_seconds: float = 600.0  # one run of the integrity_budget DAG
    fresh_age_s: float = 3 * 3600.0
    fresh_interval_s: float = 600.0
    max_unchecked_s: float = 25 * 86400.0
    min_gap_s: float = 300.0  # never re-check sooner by score alone
    age_decay: float = 2.0
    recency: float = 1.0
    cost_304: float = 0.5
    image_cost: float = 0.5
    image_min_interval_s: float = 3600.0

    @classmethod
    def from_env(cls) -> BudgetPolicy:
        return cls(**config_integrity.budget_policy())

    def capacity(self, seconds: float | None = None, budget_rps: float | None = None) -> float:
        """Requests one run may spend: the budget over its slot."""
        rps = budget_rps if budget_rps is not None else self.budget_rps
        rps = DEFAULT_BUDGET_RPS if rps is None else rps
        return max(0.0, rps * (self.slot_seconds if seconds is None else seconds))


@dataclass
class Candidates:
    """The scheduler's view of the articles (parallel numpy arrays; times in epoch seconds,
    NaN = never / unknown). Built by :func:`load_candidates` (PostgreSQL) or by the benchmark."""

    news_id: Any  # int64
    published: Any
    last_checked: Any
    last_changed: Any  # our last detected change
    page_modified: Any  # the page's own dateModified
    agency_rate: Any  # multiplier of the prior hazard (1 = an average agency)
    cheap: Any  # bool: the last content check answered 304
    image_checked: Any
    has_image: Any  # bool
    urgent: Any  # bool: removal evidence due now (an article not hidden yet)

    def __len__(self) -> int:
        return len(self.news_id)


@dataclass
class Plan:
    """What one run checks, in order: indices into the candidates, whether each check includes
    the image, and why it was chosen (0 fresh, 1 forced, 2 by score)."""

    index: Any
    image: Any
    reason: Any
    requests: float

    def __len__(self) -> int:
        return len(self.index)


def image_due(c: Candidates, now: float, policy: BudgetPolicy) -> Any:
    import numpy as np

    age = np.maximum(0.0, now - c.published)
    interval = np.clip(age / 4.0, policy.image_min_interval_s, policy.max_unchecked_s)
    since = now - c.image_checked
    return c.has_image & (np.isnan(since) | (since >= interval))


def _inv_pow(x: Any, a: float) -> Any:
    """``x ** -a`` (x >= 1), with the default exponent 2 as a cheap reciprocal square."""
    import numpy as np

    if a == 2.0:
        out = x * x
        return np.reciprocal(out, out=out)
    return x**-a


def scores(c: Candidates, now: float, policy: BudgetPolicy, image: Any = None) -> Any:
    """Expected detection delay a check now would end, per unit of cost (see the section comment).
    ``image``: :func:`image_due` when already computed."""
    import numpy as np

    age_h = np.maximum(now - c.published, 0.0)
    age_h *= 1 / 3600.0
    since_h = np.maximum(now - c.last_checked, 0.0) * (1 / 3600.0)
    since_h = np.where(np.isnan(since_h), age_h, since_h)
    page = np.where(c.page_modified > c.published + 60, c.page_modified, np.nan)
    changed_h = np.maximum(now - np.fmax(c.last_changed, page), 0.0) * (1 / 3600.0)
    np.nan_to_num(changed_h, copy=False, nan=1e12)  # never changed: no recency term
    a = policy.age_decay
    hazard = _inv_pow(age_h + 1.0, a)
    hazard += policy.recency * _inv_pow(changed_h + 1.0, a)
    hazard *= c.agency_rate
    image = image_due(c, now, policy) if image is None else image
    cost = np.where(c.cheap, policy.cost_304, 1.0) + policy.image_cost * image
    since_h *= since_h
    hazard *= since_h
    hazard /= cost
    return hazard


def choose(c: Candidates, now: float, capacity: float, policy: BudgetPolicy) -> Plan:
    """The checks of one run within ``capacity`` requests: removal evidence due, fresh texts, their
    images, a month unchecked, then by expected value (see the section comment). Pure: the DAG
    and the benchmark both call it."""
    import numpy as np

    n = len(c)
    if n == 0 or capacity < 1:
        return Plan(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int8), 0.0)
    age = now - c.published
    since = np.where(np.isnan(c.last_checked), np.maximum(age, 0.0), now - c.last_checked)
    slack = min(60.0, policy.fresh_interval_s / 10)
    urgent = c.urgent.astype(bool)
    fresh = ~urgent & (age < policy.fresh_age_s) & (since >= policy.fresh_interval_s - slack)
    forced = ~fresh & (urgent | (since >= policy.max_unchecked_s))
    rest = ~fresh & ~forced & (since >= policy.min_gap_s)
    img = image_due(c, now, policy)
    cost = 1.0 + img  # requests
    with_image = img.copy()
    groups = []
    budget = capacity
    # 1. removal evidence due (a gone answer to confirm: what readers must stop seeing; few)
    idx = np.flatnonzero(urgent)
    idx = idx[np.argsort(-since[idx], kind="stable")]
    idx = idx[np.cumsum(cost[idx]) <= budget]
    budget -= float(cost[idx].sum())
    groups.append((idx, 1))
    # 2. fresh articles' texts (one request each, most overdue first), then their due images while
    # the budget lasts: under a backlog of young articles (a burst, a drain) a pass over their
    # texts is not slowed to half speed by images, which are re-checked once it clears
    idx = np.flatnonzero(fresh)
    idx = idx[np.argsort(-since[idx], kind="stable")][: max(0, int(budget))]
    budget -= len(idx)
    with_image[idx] &= np.cumsum(img[idx]) <= budget
    budget -= float(np.count_nonzero(with_image[idx]))
    groups.append((idx, 0))
    # 3. a month without a check; 4. the rest by expected value per cost
    for reason, mask, key in ((1, forced & ~urgent, -since), (2, rest, None)):
        if budget < 1:
            break
        if key is None:  # by score: the best `want` (at most this many fit), best first
            count = int(np.count_nonzero(mask))
            if not count:
                continue
            s = scores(c, now, policy, img)
            s[~mask] = -np.inf
            want = min(count, int(budget))
            idx = np.argpartition(-s, want - 1)[:want] if want < n else np.arange(n)
            idx = idx[np.isfinite(s[idx])]
            idx = idx[np.argsort(-s[idx], kind="stable")]
        else:
            idx = np.flatnonzero(mask)
            if not len(idx):
                continue
            idx = idx[np.argsort(key[idx], kind="stable")]
        fits = np.cumsum(cost[idx]) <= budget
        idx = idx[fits]
        budget -= float(cost[idx].sum())
        groups.append((idx, reason))
    index = np.concatenate([g for g, _ in groups]).astype(np.int64)
    reason = np.concatenate([np.full(len(g), r, dtype=np.int8) for g, r in groups])
    return Plan(index, with_image[index], reason, capacity - budget)


def agency_rate_multipliers(
    modified: dict[str, int], checked: dict[str, int], prior_strength: float = 20.0, floor: float = 0.2
) -> dict[str, float]:
    """Each agency's measured modification rate (modified ÷ checked articles), shrunk
    toward the overall rate by ``prior_strength`` pseudo-articles, as a multiplier of the
    overall rate (1 = average; at least ``floor`` so no agency is starved)."""
    total_checked = sum(checked.values())
    overall = max(0.01, sum(modified.values()) / total_checked) if total_checked else 0.1
    out = {}
    for key in set(checked) | set(modified):
        m, k = modified.get(key, 0), checked.get(key, 0)
        rate = (m + prior_strength * overall) / (max(k, m) + prior_strength)
        out[key] = max(floor, rate / overall)
    return out


def agency_rates(conn) -> dict[str, float]:
    """:func:`agency_rate_multipliers` from PostgreSQL: checked articles and articles with a
    detected change (``integrity_state.last_changed_at``, migration 0011), per agency."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT n.agency_key, count(*) FILTER (WHERE s.last_checked_at IS NOT NULL),"
            " count(*) FILTER (WHERE s.last_changed_at IS NOT NULL)"
            " FROM integrity_state s JOIN news n ON n.id = s.news_id GROUP BY n.agency_key"
        )
        rows = cur.fetchall()
    conn.commit()
    return agency_rate_multipliers({r[0]: int(r[2]) for r in rows}, {r[0]: int(r[1]) for r in rows})


CANDIDATE_BATCH = 20_000  # rows per fetch of load_candidates

# epochs as float8: extract() gives numeric, a Decimal object per value in Python
CANDIDATES_SQL = (
    "SELECT s.news_id, n.agency_key, extract(epoch FROM n.published_at)::float8,"
    " extract(epoch FROM s.last_checked_at)::float8, extract(epoch FROM s.last_changed_at)::float8,"
    " extract(epoch FROM coalesce(s.page_updated_at, n.updated_datetime))::float8,"
    " coalesce(s.http_status = 304, false), extract(epoch FROM s.image_checked_at)::float8,"
    " n.image_url IS NOT NULL,"
    " (s.gone_since IS NOT NULL AND n.removed_at IS NULL AND isfinite(s.next_due_at)"
    " AND s.next_due_at <= %(now)s)"
    " FROM integrity_state s JOIN news n ON n.id = s.news_id"
    " WHERE (n.removed_at IS NULL OR s.gone_since IS NOT NULL)"
    # a gone streak not confirmed yet waits for its next look (evidence.next_look): a check before
    # it confirms nothing, and would keep the one that can out of the next runs (`recent`)
    " AND NOT (s.gone_since IS NOT NULL AND n.removed_at IS NULL AND s.next_due_at > %(now)s)"
    " AND (s.last_checked_at IS NULL OR s.last_checked_at < %(recent)s)"
)


def load_candidates(conn, now: datetime, policy: BudgetPolicy | None = None) -> Candidates:
    """Every article the scheduler may pick now (not removed, or removed with evidence pending;
    not checked within the last few minutes), as :class:`Candidates`. Read through a server-side
    cursor ``CANDIDATE_BATCH`` rows at a time into the arrays: at production scale (300k rows) the
    rows never sit in the task's memory all at once, as Python tuples or as libpq's result."""
    import numpy as np

    policy = policy or BudgetPolicy.from_env()
    rates = agency_rates(conn)
    parts: list[list] = []
    with conn.transaction(), conn.cursor(name="dgb_integrity_candidates") as cur:
        cur.execute(CANDIDATES_SQL, {"now": now, "recent": _recent(now, policy)})
        while rows := cur.fetchmany(CANDIDATE_BATCH):
            parts.append(_candidate_arrays(rows, rates))
    conn.commit()
    if not parts:
        parts.append(_candidate_arrays([], rates))
    return Candidates(*(np.concatenate(cols) for cols in zip(*parts, strict=True)))


def _candidate_arrays(rows: list, rates: dict[str, float]) -> list:
    """One batch of :data:`CANDIDATES_SQL` rows as the :class:`Candidates` fields' arrays, in
    field order (None in a time column: NaN)."""
    import numpy as np

    def times(i: int):
        return np.array([r[i] for r in rows], dtype=float)  # None -> NaN

    def flags(i: int):
        return np.array([bool(r[i]) for r in rows], dtype=bool)

    return [
        np.array([r[0] for r in rows], dtype=np.int64),
        times(2),
        times(3),
        times(4),
        times(5),
        np.array([rates.get(r[1], 1.0) for r in rows], dtype=float),
        flags(6),
        times(7),
        flags(8),
        flags(9),
    ]


# Removal evidence that fell due after a run planned (its next look, evidence.next_look, is up):
# the run checks it next instead of leaving it to the next slot's plan (the partial index
# integrity_state_suspects_due_idx, migration 0022, finds the few among every due article).
DUE_SUSPECTS_SQL = (
    "SELECT s.news_id, n.unique_id FROM integrity_state s JOIN news n ON n.id = s.news_id"
    " WHERE s.gone_since IS NOT NULL AND n.removed_at IS NULL AND isfinite(s.next_due_at)"
    " AND s.next_due_at <= %(now)s AND (s.last_checked_at IS NULL OR s.last_checked_at < %(recent)s)"
    " ORDER BY s.next_due_at, s.news_id LIMIT %(limit)s"
)


def _recent(now: datetime, policy: BudgetPolicy) -> datetime:
    """Articles checked after this are no candidates: a re-check sooner tells nothing new."""
    return now - timedelta(seconds=min(policy.min_gap_s, policy.fresh_interval_s * 0.9))


def load_due_suspects(conn, now: datetime, policy: BudgetPolicy, limit: int) -> list[tuple[int, str]]:
    """(news id, unique id) of suspect articles (a gone answer, not hidden) whose removal evidence
    is due at ``now``, the most overdue first, at most ``limit``: the ones the plan made at the start
    of a run could not hold."""
    with conn.cursor() as cur:
        cur.execute(DUE_SUSPECTS_SQL, {"now": now, "recent": _recent(now, policy), "limit": limit})
        rows = [(int(r[0]), r[1]) for r in cur.fetchall()]
    conn.commit()
    return rows
