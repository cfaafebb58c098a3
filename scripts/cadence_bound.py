#!/usr/bin/env python
"""How fresh can any fixed polling plan be for a given listing budget? An oracle bound (issue 36).

The question: on the simulated world of ``scripts/bench_scale.py`` (the publication model of
:mod:`dgb_dev.mirror.publication`, the same 160 agencies, the same seeds and the same 30 measured
days), can *any* cadence reach a publication -> scraped p95 of 180 s with 1.5x the polls of the
fixed 10 minutes? This script simulates no cadence; it bounds every one that decides its polls in
advance.

**The oracle.** It knows each agency's true expected articles a second at every moment of the
measured period: the rate the draw came from (:meth:`PublicationModel.draw`, after drift, with the
dormant agencies' waking and the bursts' followers spread over the ``burst_span_s`` after their
first article; :func:`article_density`, in cells of ``--cell`` 60 s), not the articles drawn. Its
plan is *non-adaptive*: the poll times are fixed before the period starts, so what a poll finds
never moves the next one.

**The bound** (``p95 >=``). A poll at ``p`` stores within ``d`` exactly the articles that showed in
the listing in ``[p - y, p]``, ``y`` = ``d`` minus the time from the listing showing the article
to the article stored. Whatever the plan, its polls cover at most ``polls x y`` agency-seconds,
and no set of that length holds more expected articles than the densest cells (agency-minutes of
highest rate first: :class:`MassCurve`, ``M``). So with ``H_q`` the length of the densest cells
holding the share ``q`` of the expected articles, ``y >= H_q / polls``: doubling the budget halves
it. The same answer comes cell by cell: in a cell of rate ``r`` and length ``H`` polled every
``T``, ``r H max(0, 1 - y/T)`` articles are late (periodic polls are the best way to spend a
cell's polls, by convexity) at ``H/T`` polls, linear in ``1/T``, so each cell is polled every ``y``
or not at all, a fractional knapsack filled in order of density.

**The overheads** the simulator adds (``scripts/scrapesim.py``):

* from the poll to the stored article at least ``o`` = ``--latency`` (10 s: the scrape DAG run
  starts after the poll's answer) + one token gap of the host budget (``1 / --budget-rps``, 0.5 s:
  the run reads the listing again, then the article): an **additive** term. The server's answers
  (median 0.3 s each), the retried 1%, the dispatcher's 60 s tick and the host's 19-in-10-s cap are
  left out, so the bound stays a bound;
* the listing shows an article a log-normal lag ``L`` after its publication (``lag_median_s`` 10 s,
  ``lag_sigma`` 0.8, assumed by the model): taken **by convolution**, ``P(stored within d) <=
  E_L[M(polls x (d - o - L))] / total``, ``L`` at ``--lag-nodes`` (400) equal-probability
  quantiles.

**The best plan** (``best plan``). With the lag random, the bound is not reached: it lets each lag
have the covering set that suits it, and one plan has one. A cell polled every ``g`` then stores
within ``d`` the share ``f(1/g) = E[min(1, Y/g)]``, ``Y = d - o - L``, of its articles: concave in
the polls a second, not linear, so the best plan polls denser cells more often instead of every
cell at one spacing (:func:`best_plan`: a fractional knapsack over the pieces of ``f``, exact for
plans that poll each cell periodically; cells are grouped in 1,000 log-spaced bins of rate). What
it misses (gaps that straddle a change of rate) is small where rates hold for an hour, so its p95
is, to within seconds, the best any non-adaptive plan gets in expectation. The plan is also run on
each seed's drawn articles (:func:`poll_times`, :func:`freshness_on_draw`; ``on the draws``): a
drawn month's p95 scatters around the expected one, more than Poisson's because of the bursts.

The budget is polls a day. Production counts listing requests: its polls, plus each scrape run's
second reading of the listing and the retried 429/503 (roughly 2% of the learnt cadence's 32,254
a day); the oracle gets those free. Nor are the bound and the best plan held to production's
ceiling (each agency polled at least once an hour, ``--ceiling``: 160 agencies x 24 = 3,840 polls a
day whatever the news); the best plan is also given it (``with the ceiling``), to show what it
costs.

**Bursts.** An *adaptive* cadence (poll again soon after finding an article) is not bounded by any
of this. In the model about half the articles are bursts' followers, published within
``burst_span_s`` (300 s) after the burst's first, and a poll that finds the first tells that more
may follow. The script prints the share of the drawn articles published within 5 minutes after
another of the same agency, the model's expected share of followers, and the bound if every
follower were stored in time for free (the bursts' first articles, whose rate the oracle knows,
then bring the rest of the p95), with the polls that catching them would take (one every ``target
- o - lag_median_s`` for 300 s after each burst's first): an estimate of what adaptivity could buy,
not a bound on it.

Prints the model, a line per seed, a line per budget (``--budgets``, polls a day; each as a
multiple of the fixed 10 minutes, agencies x 144), the budget a p95 of ``--target`` needs, the
bursts, and last::

    bound: seeds=<s,...> days=<n> agencies=<n> overhead_s=<x> q=<x> h95_agency_hours_per_day=<x> \
p95_s_<r>x=<n> ... best_p95_s_<r>x=<n> ... drawn_p95_s_<r>x=<n> ... ceiling_best_p95_s_<r>x=<n> ... \
p50_s_<r>x=<n> ... burst_free_p95_s_<r>x=<n> ... polls_per_day_for_p95_<target>s=<n> \
best_polls_per_day_for_p95_<target>s=<n> ceiling_best_polls_per_day_for_p95_<target>s=<n> \
followers_share=<x> close_share_300s=<x>

(medians over the seeds; ``<r>`` the budget's multiple of the fixed 10 minutes, two decimals;
``p95_s`` and ``p50_s`` the bound, ``best_`` the best plan's expected p95, ``drawn_`` its p95 on
the draws, ``ceiling_best_`` the best plan's with production's ceiling).

    .venv/bin/python scripts/cadence_bound.py [--seeds 5] [--days 30] [--budgets 23040,32254,...]
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from statistics import NormalDist

import numpy as np

from dgb.scraper.cadence import CadencePolicy
from dgb_dev.mirror.publication import Intensity, PublicationModel
from dgb_dev.mirror.synthetic import DAY, SyntheticCorpus

HOUR = 3600.0
FIXED_INTERVAL_S = 600.0  # the fixed cadence: every agency every 10 minutes
CLOSE_S = 300.0  # "within 5 minutes after another article of the same agency"
CHUNK = 16  # agencies per block in article_density


def article_density(
    rate: Intensity, lo: float, hi: float, cell_s: float, followers: bool = True
) -> np.ndarray:
    """Expected articles a second of each agency, averaged over each cell of ``cell_s`` in ``[lo,
    hi)``: (agencies, cells). Bursts start at ``bursts_per_hour / 3600`` a second, evenly within each
    hour; each brings ``burst_extra`` followers on average, each uniform within ``burst_span_s``
    after it, so the followers' rate is ``burst_extra`` x the bursts' rate averaged over the
    ``burst_span_s`` before. Both are exact cell averages (from the rate's first and second
    integrals), zero before an agency wakes and from ``rate.end`` on (``followers=False``: the
    bursts' first articles alone)."""
    rows = np.asarray(rate.bursts_per_hour, dtype=float)
    wake = np.asarray(rate.wake, dtype=float)
    chunks = range(0, len(rows), CHUNK)  # a few agencies at a time: (agencies, cells) temporaries
    return np.concatenate(
        [_density(rows[i : i + CHUNK], wake[i : i + CHUNK], rate, lo, hi, cell_s, followers) for i in chunks]
        or [np.zeros((0, round((hi - lo) / cell_s)))]
    )


def _density(rows, wake, rate: Intensity, lo: float, hi: float, cell_s: float, followers: bool) -> np.ndarray:
    r = rows / HOUR  # (agencies, hours), a second
    n_agencies, hours = r.shape
    cum1 = np.zeros((n_agencies, hours + 1))  # first integral at each hour's start
    cum1[:, 1:] = np.cumsum(r * HOUR, axis=1)
    cum2 = np.zeros((n_agencies, hours + 1))  # second integral
    cum2[:, 1:] = np.cumsum(cum1[:, :-1] * HOUR + r * HOUR**2 / 2, axis=1)

    def integrals(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = np.clip(t - rate.start, 0.0, None)
        k = np.minimum((x // HOUR).astype(int), hours)
        tau = np.where(k < hours, x - k * HOUR, 0.0)
        past = np.clip(t - rate.end, 0.0, None)  # after the end: no more bursts
        rk = np.where(k < hours, r[:, np.minimum(k, hours - 1)], 0.0)
        first = cum1[:, k] + rk * tau
        second = cum2[:, k] + cum1[:, k] * tau + rk * tau**2 / 2 + cum1[:, -1:] * past
        return first, second

    edges = lo + np.arange(round((hi - lo) / cell_s) + 1) * cell_s
    f1, f2 = integrals(edges)
    out = np.diff(f1, axis=1) / cell_s
    span = rate.burst_span_s
    if followers and rate.burst_extra and span > 0:
        _, b2 = integrals(edges - span)
        out += rate.burst_extra * (np.diff(f2, axis=1) - np.diff(b2, axis=1)) / (span * cell_s)
    starts, ends = edges[:-1], edges[1:]
    awake = np.clip((ends[None, :] - wake[:, None]) / cell_s, 0.0, 1.0)
    alive = np.clip((rate.end - starts) / cell_s, 0.0, 1.0)
    return np.maximum(out, 0.0) * awake * alive[None, :]


@dataclass(frozen=True)
class MassCurve:
    """The most expected articles any set of ``x`` agency-seconds can hold: the cells, densest first,
    filled in turn (``cum[k]``: the articles of the ``k`` densest cells), the last one in part."""

    cell_s: float
    cum: np.ndarray

    @classmethod
    def of(cls, density: np.ndarray, cell_s: float) -> MassCurve:
        d = np.sort(np.ravel(density))[::-1] * cell_s
        return cls(cell_s, np.concatenate([[0.0], np.cumsum(d)]))

    @property
    def total(self) -> float:
        return float(self.cum[-1])

    def mass(self, measure) -> np.ndarray:
        """The most expected articles within ``measure`` agency-seconds (array or scalar)."""
        k = np.clip(np.asarray(measure, dtype=float) / self.cell_s, 0.0, len(self.cum) - 1)
        i = np.minimum(k.astype(int), len(self.cum) - 2)
        return self.cum[i] + (k - i) * (self.cum[i + 1] - self.cum[i])

    def length(self, share: float) -> float:
        """``H_q``: the fewest agency-seconds holding ``share`` of the expected articles."""
        goal = share * self.total
        i = int(np.searchsorted(self.cum, goal, side="left"))
        if i == 0:
            return 0.0
        i = min(i, len(self.cum) - 1)
        step = self.cum[i] - self.cum[i - 1]
        return self.cell_s * (i - 1 + ((goal - self.cum[i - 1]) / step if step > 0 else 1.0))


def lag_nodes(median_s: float, sigma: float, k: int = 100) -> np.ndarray:
    """``k`` equal-probability quantiles (midpoints) of the log-normal listing lag."""
    z = np.array([NormalDist().inv_cdf((i + 0.5) / k) for i in range(k)])
    return median_s * np.exp(sigma * z)


def least(fn, q: float, start: float) -> float:
    """The least ``x >= 0`` with ``fn(x) >= q`` for a nondecreasing ``fn`` (to 1e-9 relative; inf
    when doubling from ``start`` never gets there)."""
    lo, hi = 0.0, max(start, 1e-9)
    while fn(hi) < q:
        lo, hi = hi, hi * 2
        if hi > 1e15:
            return math.inf
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if fn(mid) >= q else (mid, hi)
        if hi - lo <= 1e-9 * hi:
            break
    return hi


def bound_share(curve: MassCurve, polls: float, d: float, overhead_s: float, lags: np.ndarray) -> float:
    """The most of the expected articles any non-adaptive plan of ``polls`` can store within ``d``:
    ``E_L[M(polls x (d - overhead - L))] / total``."""
    if curve.total <= 0:
        return 1.0
    reach = np.clip(d - overhead_s - lags, 0.0, None)
    return float(np.mean(curve.mass(polls * reach)) / curve.total)


def bound_delay(curve: MassCurve, polls: float, q: float, overhead_s: float, lags: np.ndarray) -> float:
    """The bound: no non-adaptive plan of ``polls`` stores ``q`` of the expected articles sooner."""
    return least(lambda d: bound_share(curve, polls, d, overhead_s, lags), q, overhead_s + 1.0)


def bound_polls(curve: MassCurve, target_s: float, q: float, overhead_s: float, lags: np.ndarray) -> float:
    """The fewest polls with which the bound reaches ``target_s`` (inf if none can)."""
    return least(lambda p: bound_share(curve, p, target_s, overhead_s, lags), q, 1.0)


@dataclass(frozen=True)
class Groups:
    """The cells grouped by density (``GROUPS`` log-spaced bins, a few % wide) for the best plan:
    each group's length (agency-seconds) and expected articles, and each cell's group (-1: nothing
    expected there)."""

    length: np.ndarray
    mass: np.ndarray
    of_cell: np.ndarray  # flat
    dead: float = 0.0  # agency-seconds with nothing expected

    @classmethod
    def of(cls, density: np.ndarray, cell_s: float, groups: int = 1000) -> Groups:
        flat = np.ravel(density)
        live = np.flatnonzero(flat > 0)
        of_cell = np.full(flat.size, -1, dtype=np.int32)
        dead = (flat.size - len(live)) * cell_s
        if not len(live):
            return cls(np.zeros(0), np.zeros(0), of_cell, dead)
        logs = np.log(flat[live])
        width = max(float(logs.max() - logs.min()), 1e-12)
        k = np.minimum(((logs - logs.min()) / width * groups).astype(np.int32), groups - 1)
        of_cell[live] = k
        length = np.bincount(k, minlength=groups) * cell_s
        mass = np.bincount(k, weights=flat[live], minlength=groups) * cell_s
        return cls(length, mass, of_cell, dead)

    @property
    def total(self) -> float:
        return float(self.mass.sum())


def best_plan(
    groups: Groups, polls: float, d: float, overhead_s: float, lags: np.ndarray, floor_rate: float = 0.0
) -> tuple[float, np.ndarray, tuple[int, float, float]]:
    """The best plan that polls each cell periodically: (expected share stored within ``d``, each
    group's polls a second, (the group the budget runs out in, the share of its cells that the
    budget moves up, to which rate)). A cell polled every ``g`` stores within ``d`` the share
    ``f(c) = E[min(1, c Y)]`` of its articles, ``c = 1/g``, ``Y = d - overhead - L``: concave in
    ``c`` (periodic polls are the best way to spend a cell's polls) and linear between the kinks
    ``c = 1/Y``, so the plan is a fractional knapsack over each group's segments of ``f`` in order of
    articles a poll brings (the group's rate x the segment's slope). ``floor_rate``: every cell is
    polled at least that often (production's ceiling: once an hour), whatever it brings."""
    y = np.clip(d - overhead_s - lags, 0.0, None)
    c = np.unique(np.concatenate([[0.0, floor_rate], 1.0 / y[y > 0]]))
    rate = np.zeros(len(groups.length))
    polls = polls - groups.dead * floor_rate
    if len(c) < 2 or groups.total <= 0:
        return (1.0 if groups.total <= 0 else 0.0), rate + floor_rate, (-1, 0.0, 0.0)
    f = np.minimum(1.0, c[:, None] * y[None, :]).mean(axis=1)
    live = np.flatnonzero(groups.length > 0)
    lam = groups.mass[live] / groups.length[live]
    forced = c[1:] <= floor_rate  # the segments up to the floor come first
    worth = np.where(forced[None, :], np.inf, lam[:, None] * (np.diff(f) / np.diff(c))[None, :]).ravel()
    cost = (groups.length[live][:, None] * np.diff(c)[None, :]).ravel()
    gain = (groups.mass[live][:, None] * np.diff(f)[None, :]).ravel()
    order = np.argsort(-worth, kind="stable")
    spent = np.cumsum(cost[order])
    n = int(np.searchsorted(spent, polls, side="right"))  # segments bought whole
    got = float(gain[order][:n].sum())
    partial = (-1, 0.0, 0.0)
    if n < len(order):
        part = (polls - (spent[n - 1] if n else 0.0)) / cost[order][n]
        got += part * gain[order][n]
        g, j = divmod(int(order[n]), len(c) - 1)
        partial = (int(live[g]), float(part), float(c[j + 1]))
    bought = np.zeros(len(worth), dtype=bool)
    bought[order[:n]] = True
    rate[live] = c[bought.reshape(len(live), len(c) - 1).sum(axis=1)]
    return got / groups.total, rate, partial


def best_delay(
    groups: Groups, polls: float, q: float, overhead_s: float, lags: np.ndarray, floor_rate: float = 0.0
) -> float:
    """The best cell-periodic plan's expected ``q`` quantile (the bound's when the lag is fixed)."""
    return least(lambda d: best_plan(groups, polls, d, overhead_s, lags, floor_rate)[0], q, overhead_s + 1.0)


def best_polls(
    groups: Groups, target_s: float, q: float, overhead_s: float, lags: np.ndarray, floor_rate: float = 0.0
) -> float:
    """The fewest polls with which the best plan reaches ``target_s``."""
    return least(lambda p: best_plan(groups, p, target_s, overhead_s, lags, floor_rate)[0], q, 1.0)


def poll_times(
    groups: Groups, rates: np.ndarray, partial, shape, lo: float, cell_s: float, floor_rate: float = 0.0
) -> list[np.ndarray]:
    """Poll times of each agency for :func:`best_plan`'s rates (cells of the group the budget ran out
    in: the first share of them at the next rate). Each agency's polls come where its running
    count of planned polls, started at a phase of its own (a golden-ratio sequence, so the agencies
    do not all poll at once), passes a whole number: within each run of cells at one rate they are
    evenly spaced, and the plan spends its polls within one per agency."""
    per_cell = np.where(groups.of_cell >= 0, rates[groups.of_cell], floor_rate)
    group, share, up = partial
    if group >= 0 and share > 0:
        cells = np.flatnonzero(groups.of_cell == group)
        per_cell[cells[: int(share * len(cells))]] = up
    out = []
    for a, u in enumerate(per_cell.reshape(shape)):
        phi = np.concatenate([[0.0], np.cumsum(u * cell_s)])
        phase = 1.0 - (a * 0.6180339887) % 1.0  # in (0, 1]
        levels = phase + np.arange(max(0, math.floor(phi[-1] - phase + 1e-9) + 1))
        i = np.searchsorted(phi, levels, side="left")
        out.append(lo + (i - 1) * cell_s + (levels - phi[i - 1]) / np.where(u[i - 1] > 0, u[i - 1], np.inf))
    return out


def freshness_on_draw(plan: list[np.ndarray], times, who, visible, lo: float, hi: float, overhead_s: float):
    """Publication -> stored of the articles published in ``[lo, hi)`` under ``plan``: the first poll
    at or after the listing shows the article, plus ``overhead_s``; not found by ``hi``: ``hi`` -
    publication, as bench_scale counts them."""
    keep = (times >= lo) & (times < hi)
    t, a, v = times[keep], who[keep], visible[keep]
    out = np.empty(len(t))
    for k in np.unique(a):
        sel = a == k
        p = np.append(plan[k], np.inf)  # never polled again: not found
        found = p[np.searchsorted(p, v[sel], side="left")] + overhead_s
        out[sel] = np.where(found < hi, found, hi) - t[sel]
    return out


def close_share(times: np.ndarray, who: np.ndarray, lo: float, hi: float, within_s: float = CLOSE_S) -> float:
    """Share of the articles published in ``[lo, hi)`` within ``within_s`` after another article of
    the same agency (the earlier one may be older than ``lo``)."""
    order = np.lexsort((times, who))
    t, w = times[order], who[order]
    close = np.zeros(len(t), dtype=bool)
    close[1:] = (w[1:] == w[:-1]) & (t[1:] - t[:-1] <= within_s)
    keep = (t >= lo) & (t < hi)
    return float(close[keep].mean()) if keep.any() else 0.0


def followers_free(
    total: MassCurve, heads: MassCurve, polls: float, q: float, overhead_s: float, lags: np.ndarray
) -> tuple[float, float]:
    """(the bound if every burst follower were stored in time for free, the followers' expected
    share ``f``): the bursts' first articles must then bring ``(q - f) / (1 - f)`` of their own."""
    f = 1.0 - heads.total / total.total if total.total > 0 else 0.0
    if q <= f:
        return 0.0, f
    return bound_delay(heads, polls, (q - f) / (1 - f), overhead_s, lags), f


@dataclass
class Draw:
    seed: int
    lo: float
    hi: float
    agencies: int
    density: np.ndarray  # (agencies, cells) expected articles a second
    heads: np.ndarray  # the bursts' first articles alone
    times: np.ndarray
    who: np.ndarray
    visible: np.ndarray


def draws(args, model: PublicationModel):
    """bench_scale.py's draws (its ``scraping``): the agencies and volume of the same corpus, the
    same seeds, fit period and measured period, each with the rate it was drawn from."""
    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    corpus = SyntheticCorpus(args.articles, 5.0, end=t0, extra_days=args.days, seed=args.seed)
    keys = list(corpus.agencies[: args.agencies])
    everyone = model.shares(list(corpus.agencies))
    per_day = corpus.summary()["per_day_last_30d"] * float(everyone[: len(keys)].sum())
    fit = CadencePolicy().history_days
    lo = t0.timestamp()
    hi = lo + args.days * DAY
    for seed, times, who, visible, rate in model.seeded_draws(
        keys, lo, fit, args.days, per_day, args.seed, args.seeds
    ):
        density = article_density(rate, lo, hi, args.cell)
        heads = article_density(rate, lo, hi, args.cell, followers=False)
        yield Draw(seed, lo, hi, len(keys), density, heads, times, who, visible)


def measure(draw: Draw, args, budgets: list[float], overhead: float, lags: np.ndarray) -> dict:
    """Every figure of one draw: per budget (polls a day) and the budget the target needs."""
    q, days, cell = args.quantile, (draw.hi - draw.lo) / DAY, args.cell
    total, heads = MassCurve.of(draw.density, cell), MassCurve.of(draw.heads, cell)
    groups = Groups.of(draw.density, cell)
    floor = 1.0 / args.ceiling if args.ceiling > 0 else 0.0
    fig = {
        "articles": int(np.sum((draw.times >= draw.lo) & (draw.times < draw.hi))),
        "expected": total.total,
        "h95": total.length(q) / HOUR / days,
        "h50": total.length(0.5) / HOUR / days,
        "follow": 1.0 - heads.total / total.total,
        "heads_day": heads.total / days,
        "close": close_share(draw.times, draw.who, draw.lo, draw.hi),
        "need": bound_polls(total, args.target, q, overhead, lags) / days,
        "best_need": best_polls(groups, args.target, q, overhead, lags) / days,
        "ceil_need": best_polls(groups, args.target, q, overhead, lags, floor) / days,
    }
    for b in budgets:
        polls = b * days
        d = best_delay(groups, polls, q, overhead, lags)
        _, rates, partial = best_plan(groups, polls, d, overhead, lags)
        plan = poll_times(groups, rates, partial, draw.density.shape, draw.lo, cell)
        fresh = freshness_on_draw(plan, draw.times, draw.who, draw.visible, draw.lo, draw.hi, overhead)
        fig[b] = {
            "p95": bound_delay(total, polls, q, overhead, lags),
            "alone": total.length(q) / polls,
            "best95": d,
            "drawn95": float(np.percentile(fresh, 100 * q)),
            "drawn50": float(np.percentile(fresh, 50)),
            "p50": bound_delay(total, polls, 0.5, overhead, lags),
            "best50": best_delay(groups, polls, 0.5, overhead, lags),
            "ceil95": best_delay(groups, polls, q, overhead, lags, floor),
            "free": followers_free(total, heads, polls, q, overhead, lags)[0],
        }
    return fig


def med(values) -> float:
    return float(np.median(values))


def spread(values, fmt: str = "{:.0f}") -> str:
    return f"{fmt.format(min(values))}-{fmt.format(max(values))}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--articles", type=int, default=300_000, help="bench_scale's corpus, for the volume")
    ap.add_argument("--days", type=float, default=30.0, help="measured days (default 30)")
    ap.add_argument("--agencies", type=int, default=160, help="agencies whose listing is read (160)")
    ap.add_argument("--seed", type=int, default=14, help="bench_scale's --seed: draws seed + 27 + 1000 k")
    ap.add_argument("--seeds", type=int, default=5, help="draws (default 5, as bench_scale)")
    ap.add_argument(
        "--budgets",
        default="23040,32254,34560,46080,69120",
        help="polls a day (default: the fixed 10 minutes at 160 agencies, the learnt cadence's listing"
        " requests, then 1.5x, 2x, 3x the first)",
    )
    ap.add_argument("--quantile", type=float, default=0.95)
    ap.add_argument("--target", type=float, default=180.0, help="the p95 whose budget is searched (s)")
    ap.add_argument("--latency", type=float, default=10.0, help="poll answer -> scrape run start (s)")
    ap.add_argument("--budget-rps", type=float, default=2.0, help="host budget: one token gap 1/rps")
    ap.add_argument("--cell", type=float, default=60.0, help="cell length (s) of the rate (default 60)")
    ap.add_argument(
        "--ceiling",
        type=float,
        default=CadencePolicy().ceiling_s,
        help="the longest production leaves an agency unpolled (s; default the cadence's 3600; 0: none)",
    )
    ap.add_argument("--lag-nodes", type=int, default=400, help="quantiles of the listing lag (400)")
    args = ap.parse_args(argv)
    model = PublicationModel.load()
    overhead = args.latency + 1.0 / args.budget_rps
    lags = lag_nodes(model.lag_median_s, model.lag_sigma, args.lag_nodes)
    budgets = [float(b) for b in args.budgets.split(",")]
    q, pq = args.quantile, f"p{100 * args.quantile:g}"
    print("publication model (what each parameter rests on):")
    for line in model.describe():
        print(f"  {line}")
    figs, seeds = [], []
    fixed = args.agencies * DAY / FIXED_INTERVAL_S
    for draw in draws(args, model):
        fixed = draw.agencies * DAY / FIXED_INTERVAL_S
        fig = measure(draw, args, budgets, overhead, lags)
        figs.append(fig)
        seeds.append(draw.seed)
        print(
            f"seed {draw.seed}: {fig['articles']} articles published in the measured"
            f" {(draw.hi - draw.lo) / DAY:g} days ({fig['expected']:.0f} expected); {100 * q:g}% of the"
            f" expected articles in {fig['h95']:.0f} agency-hours a day, half in {fig['h50']:.0f}"
            f" (of {draw.agencies * 24})"
        )

    def at(b: float, key: str) -> list[float]:
        return [f[b][key] for f in figs]

    def of(key: str) -> list[float]:
        return [f[key] for f in figs]

    print(
        f"\npublication -> stored, medians over seeds {', '.join(map(str, seeds))} (min-max). bound: no"
        f" non-adaptive plan knowing the true rates does better ({overhead:g} s after the poll added, the"
        f" listing lag convolved); best: the best plan polling each cell periodically, expected and run"
        f" on the draws, and with a poll at least every {args.ceiling:g} s per agency (production's"
        " ceiling); followers free: the bound if bursts' followers cost nothing"
    )
    for b in budgets:
        print(
            f"  {b:,.0f}/day ({b / fixed:.2f}x the fixed 10 min): {pq} >= {med(at(b, 'p95')):.0f} s"
            f" ({spread(at(b, 'p95'))}; polls alone {med(at(b, 'alone')):.0f} s), p50 >="
            f" {med(at(b, 'p50')):.0f} s | best {pq} {med(at(b, 'best95')):.0f} s"
            f" ({spread(at(b, 'best95'))}),"
            f" on the draws {med(at(b, 'drawn95')):.0f} s ({spread(at(b, 'drawn95'))}), p50"
            f" {med(at(b, 'best50')):.0f} s; with the ceiling {pq} {med(at(b, 'ceil95')):.0f} s"
            f" | followers free {pq} >= {med(at(b, 'free')):.0f} s"
        )
    print(
        f"  {pq} <= {args.target:g} s needs >= {med(of('need')):,.0f} polls/day"
        f" ({spread(of('need'), '{:,.0f}')}), {med(of('need')) / fixed:.2f}x the fixed 10 min | best"
        f" {med(of('best_need')):,.0f} ({spread(of('best_need'), '{:,.0f}')}),"
        f" {med(of('best_need')) / fixed:.2f}x; with the ceiling {med(of('ceil_need')):,.0f}"
        f" ({med(of('ceil_need')) / fixed:.2f}x)"
    )
    reach = args.target - overhead - model.lag_median_s
    repoll = med(of("heads_day")) * math.ceil(CLOSE_S / reach)
    print(
        f"bursts: {100 * med(of('close')):.1f}% of the drawn articles came within {CLOSE_S:g} s after"
        f" another of their agency ({spread([100 * c for c in of('close')], '{:.1f}')}%); the model"
        f" expects {100 * med(of('follow')):.1f}% to be bursts' followers. Polling every {reach:.0f} s"
        f" for {CLOSE_S:g} s after each burst's first article would take about {repoll:,.0f} polls/day."
        " An adaptive plan is not bounded by the figures above."
    )
    fields = [
        f"seeds={','.join(map(str, seeds))}",
        f"days={args.days:g}",
        f"agencies={args.agencies}",
        f"overhead_s={overhead:g}",
        f"q={q:g}",
        f"h95_agency_hours_per_day={med(of('h95')):.1f}",
    ]
    for key, name in (
        ("p95", "p95_s"),
        ("best95", "best_p95_s"),
        ("drawn95", "drawn_p95_s"),
        ("ceil95", "ceiling_best_p95_s"),
        ("p50", "p50_s"),
        ("free", "burst_free_p95_s"),
    ):
        fields += [f"{name}_{b / fixed:.2f}x={med(at(b, key)):.0f}" for b in budgets]
    fields += [
        f"polls_per_day_for_p95_{args.target:g}s={med(of('need')):.0f}",
        f"best_polls_per_day_for_p95_{args.target:g}s={med(of('best_need')):.0f}",
        f"ceiling_best_polls_per_day_for_p95_{args.target:g}s={med(of('ceil_need')):.0f}",
        f"followers_share={med(of('follow')):.3f}",
        f"close_share_300s={med(of('close')):.3f}",
    ]
    print("bound: " + " ".join(fields))
    return 0


if __name__ == "__main__":
    sys.exit(main())
