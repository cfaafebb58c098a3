"""When each agency's listing is read next: an explicit listing budget, allocated where a poll buys
the most freshness (issues 27 and 36).

Standard library only, pure: the ``scrape_dispatcher`` DAG (:mod:`dgb.scraper.dispatch`) calls it
every minute with histories read from ``news``, and ``scripts/scrapesim.py`` calls the same
functions on its simulated clock.

**The budget.** The operator gives listing polls a share of the host's requests
(``DGB_SCRAPE_LISTING_SHARE``, 0.18 of www.gov.br's 2 req/s: 1,296 polls an hour on average,
31,104 a day). The week's polls (share x rate x 168 h) are planned over the 168 hours of the week
(Brasília time) by the same rule as the polls inside an hour (below), from every agency's forecast
for every hour: so the hours where the news is forecast get the polls (:func:`plan_week`). Each
agency is polled at least once per ``ceiling_s`` whatever the share (the week's budget is at least
that); no hour gets more than ``peak_share`` (0.75) of the host's rate, the excess going to the
other hours. Integrity (:mod:`dgb.integrity.share`) plans with what this plan and the forecast
articles leave.

**The target the budget buys.** The week's plan aims at the least of ``target_s`` (180 s) x 1,
1.25, 1.5, 2, 2.5, 3, 4, 5, 7, 10 for which the forecast leaves at most ``forecast_miss`` (2.5%) of
the articles later than it: half of what a p95 allows, the other half left for what no forecast
sees (an agency's rate drifting, a dormant one waking, a holiday). A budget that cannot buy 180 s
for 97.5% of the forecast articles aims at the p95 it can buy instead of leaving the rest at the
ceiling. The 2.5% was chosen on development draws of ``scripts/bench_scale.py`` (seeds 527 and
1527), not on the draws its results are reported on.

**The forecast** (:mod:`dgb.scraper.forecast`): each agency's expected articles in each hour of the
week, the posterior mean of an empirical Bayes gamma-Poisson model fitted over all agencies
(:func:`~dgb.scraper.forecast.fit_prior`), so a new or quiet agency publishes as the group does and
a busy one as itself.

Its rate now blends this hour and the next (by the minutes gone, so polls quicken before a peak),
raised by **the time since its newest article**, ``recent_weight * 3600 / seconds since`` (0.25: an
article 5 min ago means 3/h), so a quiet agency that suddenly publishes is polled fast from the poll
that finds its first new article, and slows again as the burst ages. (Follow-up polls after a find,
out of a reserve of the budget, were built and measured at ``b903f17`` and removed: they did not
make the p95 fresher; docs/benchmarks.md, "Follow-ups after a find".)

**The allocation** (:func:`allocate`, the same rule as :func:`plan_week`). Intervals come from a
ladder of whole ticks between ``floor_s`` (60 s) and ``ceiling_s`` (3600 s). With Poisson arrivals
at rate ``r`` and a poll every ``I`` seconds, the share of an agency's articles scraped later than
the target (above) is ``max(0, 1 - (target - overhead_s) / I)`` (``overhead_s``,
30 s: from the poll to the stored article). The p95, not the mean, is what counts: a poll is worth
the articles it brings under the target, ``r`` times that share's fall; once an agency's interval
is within reach of the target, a poll is worth ``mean_weight`` (0.5) times the mean wait it saves
(in units of ``target - overhead_s``), which spends what is left, towards the floor, once the
forecast articles are within the target (a step there is worth about a tenth of one that brings
articles under it). Agencies step down the ladder in order of that worth per extra poll until the
hour's budget is spent; a step worth less than
``min_gain`` (0.001 articles per poll) is not bought, so an agency forecast to publish nothing stays
at the ceiling however large the budget. The busiest agencies therefore get intervals just under
the target, the rest the ceiling or the polls left.

**The tick** (:func:`plan`). Each tick may start ``budget_per_hour * tick_s / 3600`` polls (the
hour's budget cut into ticks so an hour spends it whole), never more than ``peak_share * host_rps *
tick_s``: first the agencies past their ceiling (the bound holds even over the hour's share, within
the peak), then the due ones most overdue first (a due agency left over waits: reason ``budget``),
then, while the tick's share lasts, the agencies with the most articles expected to be waiting
(rate x time since their last poll, at least ``min_gain``), so the share is spent where there is
demand. Polls of one scrape DAG count as one (the EBC DAG reads its two portals on EBC's host).

One decision (160 agencies: the prior, the week's plan with its target search, the hour's
allocation) takes about 0.1 s of CPU.

Reasons (``Cadence.reason``): ``busy`` (at the floor), ``recent`` (the time since its newest article
drives its rate), ``target`` (its interval brings its articles within the target), ``rationed``
(the budget bought it some polls, not the target), ``dormant`` (at the ceiling); :func:`plan` adds
``budget`` for a due agency left for the next tick.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from dgb.config import scrape as config_scrape
from dgb.scraper.forecast import (
    BRT_OFFSET_S,
    DAY,
    HOUR,
    SLOTS,
    History,
    Prior,
    fit_prior,
    hour_of_week,
)

WEEK = 7 * DAY
REASONS = ("busy", "recent", "target", "rationed", "dormant", "budget")
LADDER_TICKS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 30, 45, 60, 90, 120)


@dataclass(frozen=True)
class CadencePolicy:
    """The cadence's settings; :meth:`from_env` reads the ``DGB_SCRAPE_*`` ones (dgb.config.scrape)."""

    floor_s: float = 60.0
    ceiling_s: float = 3600.0
    listing_share: float = 0.18  # of the host's requests over the week, for the dispatcher's polls
    peak_share: float = 0.75  # of the host's requests/s, at most, in any hour and any tick
    target_s: float = 180.0  # publication -> scraped the allocation aims at (the p95 goal)
    quantile: float = 0.95  # of the articles the target is for
    forecast_miss: float = 0.025  # late articles the plan may forecast: half of what the quantile allows
    overhead_s: float = 30.0  # poll -> article stored: listing, DAG start, article page
    mean_weight: float = 0.5  # of the mean wait within the target, against the chance of missing it
    min_gain: float = 0.001  # articles under the target a poll must be expected to bring
    recent_weight: float = 0.25
    history_days: float = 28.0
    tick_s: float = 60.0  # the dispatcher's period

    def __post_init__(self):
        if not 0 < self.floor_s <= self.ceiling_s:
            raise ValueError(f"cadence floor {self.floor_s} s must be > 0 and <= ceiling {self.ceiling_s} s")
        if self.target_s <= self.overhead_s:
            raise ValueError(f"cadence target {self.target_s} s must exceed its overhead {self.overhead_s} s")

    @classmethod
    def from_env(cls) -> CadencePolicy:
        return cls(**config_scrape.cadence_policy())

    def per_tick(self, host_rps: float) -> int:
        """Most listings started in one tick: ``peak_share`` of the host's rate (at least one)."""
        return max(1, int(self.peak_share * host_rps * self.tick_s + 1e-9))

    def week_budget(self, host_rps: float) -> float:
        """Polls the share buys in a week."""
        return self.listing_share * host_rps * WEEK

    def ladder(self) -> list[float]:
        """The intervals an agency may get, longest first: whole ticks from the ceiling to the floor."""
        steps = {self.floor_s, self.ceiling_s}
        steps |= {k * self.tick_s for k in LADDER_TICKS if self.floor_s < k * self.tick_s < self.ceiling_s}
        return sorted(steps, reverse=True)


@dataclass(frozen=True)
class Cadence:
    interval_s: float
    reason: str
    rate_per_hour: float  # the rate the interval was computed from

    def describe(self) -> str:
        return f"{self.reason}: every {fmt_interval(self.interval_s)} ({self.rate_per_hour:.2f}/h expected)"


def fmt_interval(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def rate_now(slot_rates: Sequence[float], last_new: float | None, now: float, policy: CadencePolicy):
    """(expected articles/hour now, whether the recent article drives it): this hour's and the next
    hour's forecast blended by the minutes gone, or the recent rate when higher."""
    slot = hour_of_week(now)
    gone = ((now + BRT_OFFSET_S) % HOUR) / HOUR
    learnt = (1 - gone) * slot_rates[slot] + gone * slot_rates[(slot + 1) % SLOTS]
    recent = 0.0
    if last_new is not None:
        recent = policy.recent_weight * HOUR / max(now - last_new, policy.floor_s)
    return (recent, True) if recent > learnt else (learnt, False)


def _loss(interval: float, policy: CadencePolicy) -> float:
    """Per article: the chance of missing the target at this interval, plus the weighted mean wait
    of the articles within it (in units of the reach)."""
    reach = policy.target_s - policy.overhead_s
    return max(0.0, 1.0 - reach / interval) + policy.mean_weight * min(interval, reach) / (2.0 * reach)


@dataclass(frozen=True)
class _Steps:
    """The ladder's steps: polls an hour each adds (``cost``) and the rate an agency needs for the
    step to be worth ``tau`` articles a poll (``need = cost / gain``, nondecreasing down the ladder)."""

    intervals: list[float]
    cost: list[float]
    need: list[float]

    @classmethod
    def of(cls, policy: CadencePolicy) -> _Steps:
        ladder = policy.ladder()
        cost, need, worst = [], [], 0.0
        for a, b in itertools.pairwise(ladder):
            c = HOUR / b - HOUR / a
            g = _loss(a, policy) - _loss(b, policy)
            worst = max(worst, c / g if g > 0 else math.inf)  # a step is taken only after the ones above
            cost.append(c)
            need.append(worst)
        return cls(ladder, cost, need)


def _threshold(rates: Sequence[float], budget: float, steps: _Steps, policy: CadencePolicy) -> float:
    """The least worth per poll (articles) the budget affords: every step worth at least it fits."""
    ordered = sorted(rates)
    n = len(ordered)

    def spent(tau: float) -> float:
        total = n * HOUR / steps.intervals[0]
        for c, need in zip(steps.cost, steps.need, strict=True):
            total += c * (n - bisect.bisect_left(ordered, tau * need))
        return total

    lo, hi = policy.min_gain, 1e6
    if spent(lo) <= budget:
        return lo
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if spent(mid) <= budget:
            hi = mid
        else:
            lo = mid
    return hi


def _levels(rates: Sequence[float], tau: float, steps: _Steps) -> list[int]:
    """How many steps down the ladder each rate takes at worth ``tau``."""
    return [bisect.bisect_right(steps.need, r / tau) if tau > 0 else len(steps.need) for r in rates]


def _fill(rates: Sequence[float], budget: float, policy: CadencePolicy, steps: _Steps) -> list[int]:
    """Ladder levels that spend ``budget`` polls an hour on ``rates`` (the steps worth the most per
    poll first, then single steps in order of worth while they fit)."""
    tau = _threshold(rates, budget, steps, policy)
    levels = _levels(rates, tau, steps)
    left = budget - sum(HOUR / steps.intervals[k] for k in levels)
    nxt = sorted(
        ((rates[i] / steps.need[k], i) for i, k in enumerate(levels) if k < len(steps.need)), reverse=True
    )
    for worth, i in nxt:
        k = levels[i]
        if worth < policy.min_gain:
            break
        if steps.cost[k] <= left:
            levels[i] += 1
            left -= steps.cost[k]
    return levels


@dataclass(frozen=True)
class WeekPlan:
    """Polls for each hour of the week, and the target they can buy (see :func:`plan_week`)."""

    budgets: list[float]
    target_s: float  # the p95 target this budget buys on the forecast (at least the policy's)
    miss: float  # forecast share of articles scraped later than it


TARGET_STEPS = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.0, 10.0)


def _week_levels(cells: list[float], week: float, policy: CadencePolicy) -> tuple[list[int], _Steps, float]:
    steps = _Steps.of(policy)
    levels = _levels(cells, _threshold(cells, week, steps, policy), steps)
    reach = policy.target_s - policy.overhead_s
    total = sum(cells)
    late = sum(r * max(0.0, 1.0 - reach / steps.intervals[k]) for r, k in zip(cells, levels, strict=True))
    return levels, steps, (late / total if total > 0 else 0.0)


def plan_week(
    unit_rates: Iterable[Sequence[float]],
    policy: CadencePolicy,
    host_rps: float,
    target_s: float | None = None,
) -> WeekPlan:
    """Polls for each hour of the week: the week's budget spent on the (unit, hour) pairs by the same
    rule as :func:`allocate`, at least one poll per unit per ceiling, at most ``peak_share`` of the
    host's rate in an hour (the excess spread over the other hours by their plan).

    The target is the least of ``target_s x`` :data:`TARGET_STEPS` for which the forecast has at
    most ``forecast_miss`` (2.5%) of the articles scraped later than it: half of what the p95
    allows, the other half left for what a forecast cannot see (drift, an agency waking, a
    holiday). When the budget cannot buy the policy's target, polls aim at the p95 it can buy rather
    than leave more of the articles at the ceiling. ``target_s`` given: that target, no search."""
    per_unit = [list(r) for r in unit_rates]
    base = len(per_unit) * HOUR / policy.ceiling_s
    week = max(policy.week_budget(host_rps), base * SLOTS)
    cells = [r[h] for r in per_unit for h in range(SLOTS)]
    if target_s is not None:
        chosen = replace(policy, target_s=target_s)
        levels, steps, miss = _week_levels(cells, week, chosen)
    else:
        candidates = [policy.target_s * f for f in TARGET_STEPS if policy.target_s * f <= policy.ceiling_s]
        lo, hi = 0, len(candidates) - 1
        found = None
        while lo <= hi:  # the least candidate that keeps the forecast miss within the quantile
            mid = (lo + hi) // 2
            trial = replace(policy, target_s=candidates[mid])
            got = _week_levels(cells, week, trial)
            if got[2] <= min(policy.forecast_miss, 1.0 - policy.quantile):
                found, hi = (trial, got), mid - 1
            else:
                lo = mid + 1
        if found is None:
            trial = replace(policy, target_s=candidates[-1])
            found = (trial, _week_levels(cells, week, trial))
        chosen, (levels, steps, miss) = found
    budgets = [base] * SLOTS
    for i, k in enumerate(levels):
        budgets[i % SLOTS] += HOUR / steps.intervals[k] - HOUR / steps.intervals[0]
    if cells:  # what the threshold left (less than one step per cell): over the hours by their plan
        left = week - sum(budgets)
        extra = sum(b - base for b in budgets)
        for h in range(SLOTS):
            budgets[h] += left * ((budgets[h] - base) / extra if extra > 0 else 1.0 / SLOTS)
    cap = max(policy.peak_share * host_rps * HOUR, base)
    for _ in range(SLOTS):  # move what is over the cap to the hours under it, by their share
        over = sum(max(0.0, b - cap) for b in budgets)
        if over <= 1e-9:
            break
        under = [h for h in range(SLOTS) if budgets[h] < cap]
        if not under:
            break
        room = sum(budgets[h] for h in under)
        budgets = [min(b, cap) for b in budgets]
        for h in under:
            budgets[h] += over * budgets[h] / room
    return WeekPlan(budgets, chosen.target_s, miss)


def hour_budgets(
    unit_rates: Iterable[Sequence[float]], policy: CadencePolicy, host_rps: float
) -> list[float]:
    """:func:`plan_week`'s polls for each hour of the week."""
    return plan_week(unit_rates, policy, host_rps).budgets


def allocate(
    rates: Mapping[str, tuple[float, bool]], budget_per_hour: float, policy: CadencePolicy
) -> dict[str, Cadence]:
    """Each unit's interval and reason this hour: ``rates`` maps a unit (a scrape DAG) to its
    expected articles/hour and whether its recent article drives it (:func:`rate_now`)."""
    steps = _Steps.of(policy)
    keys = list(rates)
    values = [max(0.0, rates[k][0]) for k in keys]
    levels = _fill(values, budget_per_hour, policy, steps) if keys else []
    reach = policy.target_s - policy.overhead_s
    out = {}
    for key, rate, k in zip(keys, values, levels, strict=True):
        interval = steps.intervals[k]
        if rates[key][1] and k > 0:
            reason = "recent"
        elif interval <= policy.floor_s:
            reason = "busy"
        elif interval <= reach:
            reason = "target"
        elif k > 0:
            reason = "rationed"
        else:
            reason = "dormant"
        out[key] = Cadence(interval, reason, rate)
    return out


@dataclass(frozen=True)
class Schedule:
    """One tick's cadences (per unit), this hour's budget, the week's plan and the prior."""

    cadences: dict[str, Cadence]
    budget_per_hour: float
    prior: Prior
    week: WeekPlan

    @property
    def budgets(self) -> list[float]:
        return self.week.budgets


def schedule(
    histories: Mapping[str, History],
    now: float,
    policy: CadencePolicy,
    host_rps: float,
    units: Mapping[str, Sequence[str]] | None = None,
) -> Schedule:
    """Everything the dispatcher decides from the histories: the prior, the week's hour budgets and
    each unit's cadence now. ``units`` maps a scrape DAG to its agencies (default: one per agency);
    a unit's rate is the sum of its agencies'."""
    units = units or {k: [k] for k in histories}
    prior = fit_prior(histories.values())
    slot_rates = {k: prior.rates(h) for k, h in histories.items()}
    per_unit = {
        u: [sum(slot_rates[a][s] for a in agencies) for s in range(SLOTS)] for u, agencies in units.items()
    }
    week = plan_week(per_unit.values(), policy, host_rps)
    now_rates = {}
    for u, agencies in units.items():
        newest = [histories[a].last_new for a in agencies if histories[a].last_new is not None]
        now_rates[u] = rate_now(per_unit[u], max(newest) if newest else None, now, policy)
    budget = week.budgets[hour_of_week(now)]
    aimed = replace(policy, target_s=week.target_s)
    return Schedule(allocate(now_rates, budget, aimed), budget, prior, week)


@dataclass(frozen=True)
class Plan:
    due: list[str]  # keys to poll now: past the ceiling, then most overdue, then most waiting
    deferred: list[str]  # due but over this tick's share of the budget
    capacity: int


def is_due(last_poll: float | None, interval_s: float, now: float, policy: CadencePolicy) -> bool:
    """Due when the interval has passed, give or take half a tick (polls start a few seconds after
    the tick that dispatched them; without the slack a 60 s interval would become 120 s)."""
    return last_poll is None or now - last_poll >= interval_s - policy.tick_s / 2


def tick_allowance(budget_per_hour: float, now: float, policy: CadencePolicy) -> int:
    """This tick's polls out of the hour's budget: the hour's ticks take ``floor(budget * (i + 1) /
    ticks) - floor(budget * i / ticks)`` each, so a whole hour takes ``floor(budget)``."""
    ticks = max(1, round(HOUR / policy.tick_s))
    i = min(ticks - 1, int((now % HOUR) // policy.tick_s))
    return math.floor(budget_per_hour * (i + 1) / ticks + 1e-9) - math.floor(
        budget_per_hour * i / ticks + 1e-9
    )


def plan(
    agencies: Iterable[tuple[str, Cadence, float | None]],
    now: float,
    policy: CadencePolicy,
    host_rps: float,
    budget_per_hour: float | None = None,
) -> Plan:
    """Which of ``(key, cadence, last poll)`` to poll this tick (see the module docstring). Without
    ``budget_per_hour`` the tick may take its peak share, and only due agencies are polled."""
    peak = policy.per_tick(host_rps)
    allowance = peak if budget_per_hour is None else min(peak, tick_allowance(budget_per_hour, now, policy))
    bound = policy.ceiling_s - policy.tick_s / 2
    forced, due, rest = [], [], []
    for key, c, last in agencies:
        since = math.inf if last is None else now - last
        if since >= bound:
            forced.append((-since, key))
        elif is_due(last, c.interval_s, now, policy):
            due.append((-since / c.interval_s, key))
        elif budget_per_hour is not None and since >= policy.tick_s / 2:
            waiting = c.rate_per_hour * since / HOUR
            if waiting >= policy.min_gain:
                rest.append((-waiting, key))
    forced.sort()
    due.sort()
    rest.sort()
    take = [k for _, k in forced[:peak]]
    room = max(0, allowance - len(take))
    take += [k for _, k in due[:room]]
    deferred = [k for _, k in forced[peak:]] + [k for _, k in due[room:]]
    room = max(0, allowance - len(take))
    take += [k for _, k in rest[:room]]
    return Plan(take, deferred, allowance)
