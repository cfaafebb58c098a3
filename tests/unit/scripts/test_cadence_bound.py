"""scripts/cadence_bound.py: the oracle bound on a non-adaptive cadence's freshness for a listing
budget, and the best plan under it. Cases with a closed form, the order the densest cells are
covered in, the budget's scale, a brute force over periodic plans, the model's rate against its
draws, and the script's last line."""

from __future__ import annotations

import importlib.util
import itertools
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from dgb_dev.mirror.publication import Intensity, PublicationModel

REPO = Path(__file__).resolve().parents[3]
DAY = 86400.0
START = datetime(2026, 11, 30, 3, 0, tzinfo=UTC).timestamp()  # Monday 00:00 in Brasília


def load_script():
    spec = importlib.util.spec_from_file_location("cadence_bound", REPO / "scripts" / "cadence_bound.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["cadence_bound"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


cb = load_script()
NO_LAG = np.zeros(1)


def flat(per_hour: list[list[float]], extra: float = 0.0, span: float = 300.0, wake=None) -> Intensity:
    """An intensity of ``per_hour[agency][hour]`` bursts from START."""
    rows = np.array(per_hour, dtype=float)
    wake = np.full(len(rows), -np.inf) if wake is None else np.array(wake, dtype=float)
    return Intensity(START, START + rows.shape[1] * 3600.0, rows, wake, extra, span)


def curve_of(per_hour, cell_s: float = 60.0) -> cb.MassCurve:
    rate = flat(per_hour)
    return cb.MassCurve.of(cb.article_density(rate, rate.start, rate.end, cell_s), cell_s)


def test_one_agency_at_a_constant_rate_has_the_closed_form():
    """95% of a day's articles in time with P polls: every H/P through 95% of the day, so d = 0.95 H
    / P, plus the overhead and the listing's lag when it is fixed."""
    curve = curve_of([[6.0] * 24])
    assert curve.total == pytest.approx(144.0)
    assert curve.length(0.95) == pytest.approx(0.95 * DAY)
    assert cb.bound_delay(curve, 288, 0.95, 0.0, NO_LAG) == pytest.approx(0.95 * 300, rel=1e-6)
    fixed = cb.lag_nodes(10.0, 0.0, 5)
    assert np.allclose(fixed, 10.0)
    assert cb.bound_delay(curve, 288, 0.95, 10.5, fixed) == pytest.approx(285 + 20.5, rel=1e-6)
    # a random lag: M is linear here, so the bound is E[min(1, P (d - o - L) / H)] = 0.95 and the
    # best plan (every H / P) reaches it
    lags = cb.lag_nodes(10.0, 0.8, 200)
    d = cb.bound_delay(curve, 288, 0.95, 10.5, lags)
    share = np.mean(np.minimum(1.0, 288 * np.clip(d - 10.5 - lags, 0, None) / DAY))
    assert share == pytest.approx(0.95, abs=1e-6)
    groups = cb.Groups.of(cb.article_density(flat([[6.0] * 24]), START, START + DAY, 60.0), 60.0)
    assert cb.best_delay(groups, 288, 0.95, 10.5, lags) == pytest.approx(d, rel=1e-4)


def test_two_agencies_are_covered_densest_first():
    """A publishes three times B's rate over the same day: A holds 75% of the articles, so up to 75%
    only A's day is covered; 95% needs all of A's and 80% of B's."""
    curve = curve_of([[6.0] * 24, [2.0] * 24])
    assert curve.length(0.6) == pytest.approx(0.8 * DAY)
    assert curve.length(0.95) == pytest.approx(1.8 * DAY)
    assert cb.bound_delay(curve, 1000, 0.6, 0.0, NO_LAG) == pytest.approx(0.8 * DAY / 1000, rel=1e-6)
    assert cb.bound_delay(curve, 1000, 0.95, 0.0, NO_LAG) == pytest.approx(1.8 * DAY / 1000, rel=1e-6)
    density = cb.article_density(flat([[6.0] * 24, [2.0] * 24]), START, START + DAY, 60.0)
    groups = cb.Groups.of(density, 60.0)
    a, b = groups.of_cell[0], groups.of_cell[density.shape[1]]
    # the best plan: 80% of A's cells every d, B never (its budget runs out within A's group)
    d = cb.bound_delay(curve, 1000, 0.6, 0.0, NO_LAG)
    share, rates, (group, part, up) = cb.best_plan(groups, 1000, d, 0.0, NO_LAG)
    assert share == pytest.approx(0.6, abs=1e-6)
    assert (group, rates[b]) == (a, 0.0) and part == pytest.approx(0.8) and up == pytest.approx(1 / d)
    # 95%: all of A's cells every d, then 80% of B's
    d = cb.bound_delay(curve, 1000, 0.95, 0.0, NO_LAG)
    share, rates, (group, part, up) = cb.best_plan(groups, 1000, d, 0.0, NO_LAG)
    assert share == pytest.approx(0.95, abs=1e-6)
    assert rates[a] == pytest.approx(1 / d) and group == b and part == pytest.approx(0.8)


def test_doubling_the_budget_halves_the_bound():
    hours = [[0.1, 0.2, 3.0, 5.0, 4.0, 0.5] * 4, [0.0, 1.0, 1.0, 2.0, 0.3, 0.1] * 4]
    curve = curve_of(hours)
    for q in (0.5, 0.95):
        d1 = cb.bound_delay(curve, 300, q, 0.0, NO_LAG)
        assert cb.bound_delay(curve, 600, q, 0.0, NO_LAG) == pytest.approx(d1 / 2, rel=1e-6)
        # with a fixed lag and overhead, what the polls leave halves
        fixed = cb.lag_nodes(10.0, 0.0, 3)
        d1 = cb.bound_delay(curve, 300, q, 10.5, fixed) - 20.5
        assert cb.bound_delay(curve, 600, q, 10.5, fixed) - 20.5 == pytest.approx(d1 / 2, rel=1e-6)
    # more budget never hurts, with the lag random too
    lags = cb.lag_nodes(10.0, 0.8, 50)
    ds = [cb.bound_delay(curve, p, 0.95, 10.5, lags) for p in (100, 200, 400, 800)]
    assert ds == sorted(ds, reverse=True)


def brute_force(density, cell_s: float, polls: int, q: float, overhead_s: float, lags, step: float = 0.5):
    """The best q-quantile over every plan that polls each cell n times evenly (n = 0..polls, the
    last poll on the cell's end), at most ``polls`` in all: each article's wait computed directly
    on a grid of publication times, every lag node."""
    n_agencies, cells = density.shape
    grid = np.arange(0, cells * cell_s, step) + step / 2
    weight = density[:, (grid // cell_s).astype(int)] * step  # (agencies, grid)
    best = np.inf
    for counts in itertools.product(range(polls + 1), repeat=n_agencies * cells):
        if sum(counts) > polls:
            continue
        n = np.array(counts).reshape(n_agencies, cells)
        fresh, w = [], []
        for a in range(n_agencies):
            p = [c * cell_s + cell_s * (k + 1) / n[a, c] for c in range(cells) for k in range(n[a, c])]
            p = np.append(np.sort(p), np.inf)
            for lag in lags:
                v = grid + lag
                fresh.append(lag + p[np.searchsorted(p, v, side="left")] - v + overhead_s)
                w.append(weight[a] / len(lags))
        f, wt = np.concatenate(fresh), np.concatenate(w)
        order = np.argsort(f)
        cum = np.cumsum(wt[order])
        best = min(best, f[order][np.searchsorted(cum, q * cum[-1] - 1e-12)])
    return best


def test_no_periodic_plan_beats_the_bound():
    """A brute force over every periodic plan of a tiny case (2 agencies x 2 cells of 600 s, up to
    12 polls) finds nothing better than the bound, and nothing better than the best plan either
    (which may poll a cell at a fractional count); the bound is not far below."""
    density = np.array([[4.0, 1.0], [0.5, 2.5]]) / 600
    lags = cb.lag_nodes(10.0, 0.8, 6)
    curve = cb.MassCurve.of(density, 600.0)
    groups = cb.Groups.of(density, 600.0)
    for q, polls in ((0.95, 12), (0.5, 6), (0.8, 10)):
        bound = cb.bound_delay(curve, polls, q, 10.5, lags)
        best = cb.best_delay(groups, polls, q, 10.5, lags)
        brute = brute_force(density, 600.0, polls, q, 10.5, lags, step=1.0)
        assert bound <= best <= brute + 1.0, (q, polls, bound, best, brute)
        assert brute < 1.2 * bound, (q, polls, bound, brute)
    # one agency, one cell, a fixed lag: the brute force's best (6 polls, every 600 s) is the bound
    one = np.array([[3.0]]) / 3600
    fixed = cb.lag_nodes(10.0, 0.0, 1)
    bound = cb.bound_delay(cb.MassCurve.of(one, 3600.0), 6, 0.95, 10.5, fixed)
    assert bound == pytest.approx(0.95 * 600 + 20.5)
    assert brute_force(one, 3600.0, 6, 0.95, 10.5, fixed) == pytest.approx(bound, abs=0.5)


def test_density_spreads_the_followers_and_keeps_the_articles():
    """Bursts start evenly in their hour; followers come within the 300 s after: the rate ramps up
    over the first 5 minutes of a busy hour and down over the first 5 of a quiet one after it."""
    rate = flat([[6.0, 0.0, 0.0], [6.0, 0.0, 0.0]], extra=1.0, wake=[-np.inf, START + 1800])
    d = cb.article_density(rate, rate.start, rate.end, 60.0)
    r = 6.0 / 3600
    assert d[0, 0] == pytest.approx(r + 1.0 * r * 30 / 300)  # the ramp's first minute, mean 30 s
    assert d[0, 10] == pytest.approx(2 * r)  # past the ramp: bursts and followers
    assert d[0, 60] == pytest.approx(r * 270 / 300)  # the next hour: followers only, ramping down
    assert d[0, 65] == 0.0
    assert d[0].sum() * 60 == pytest.approx(12.0)  # 6 bursts x (1 + 1)
    assert np.all(d[1, :30] == 0) and d[1, 30] == pytest.approx(2 * r)  # nothing before its waking
    heads = cb.article_density(rate, rate.start, rate.end, 60.0, followers=False)
    assert heads[0].sum() * 60 == pytest.approx(6.0)


def test_the_rate_is_what_the_draws_hold_on_average():
    model = PublicationModel.load()
    keys = [f"orgao{i:02d}" for i in range(30)]
    measured = START + 7 * DAY
    expected, counts = None, []
    for seed in range(6):
        times, who, rate = model.draw(
            keys, START, 14, 300.0, np.random.default_rng(seed), measured_from=measured
        )
        d = cb.article_density(rate, measured, rate.end, 60.0).sum(axis=1) * 60
        sel = times >= measured
        got = np.bincount(who[sel], minlength=len(keys))
        counts.append((d.sum(), sel.sum()))
        if expected is None:
            expected = (d, got)
    total_expected = sum(e for e, _ in counts)
    total_drawn = sum(n for _, n in counts)
    assert 0.93 < total_drawn / total_expected < 1.07
    d, got = expected  # one draw: the agencies' expected and drawn counts go together
    assert np.corrcoef(d, got)[0, 1] > 0.9


def test_the_plans_polls_fit_the_budget_and_follow_the_rates():
    hours = [[0.1, 0.2, 3.0, 5.0, 4.0, 0.5] * 4, [0.0, 1.0, 1.0, 2.0, 0.3, 0.1] * 4]
    rate = flat(hours, extra=1.0)
    density = cb.article_density(rate, rate.start, rate.end, 60.0)
    groups = cb.Groups.of(density, 60.0)
    lags = cb.lag_nodes(10.0, 0.8, 50)
    polls = 400.0
    d = cb.best_delay(groups, polls, 0.95, 10.5, lags)
    assert d >= cb.bound_delay(cb.MassCurve.of(density, 60.0), polls, 0.95, 10.5, lags) - 1e-6
    share, rates, partial = cb.best_plan(groups, polls, d, 10.5, lags)
    assert share == pytest.approx(0.95, abs=1e-6)
    plan = cb.poll_times(groups, rates, partial, density.shape, rate.start, 60.0)
    assert sum(len(p) for p in plan) <= polls + len(plan)
    assert all(np.all(np.diff(p) > 0) for p in plan)
    # the densest hour (agency 0's fifth) is polled more often than agency 1's second
    in_hour = [
        np.sum((p >= rate.start + h * 3600) & (p < rate.start + (h + 1) * 3600)) for p, h in zip(plan, (3, 1))
    ]
    assert in_hour[0] > in_hour[1] > 0
    # on articles at known times: the first poll after the listing shows each, plus the overhead
    times = np.array([rate.start + 3 * 3600 + 100.0, rate.end - 1.0])
    fresh = cb.freshness_on_draw(plan, times, np.array([0, 0]), times + 5.0, rate.start, rate.end, 10.5)
    nxt = plan[0][np.searchsorted(plan[0], times[0] + 5.0)]
    assert fresh[0] == pytest.approx(nxt + 10.5 - times[0])
    assert fresh[1] == pytest.approx(1.0)  # not found by the end: its wait so far


def test_the_ceiling_polls_every_cell_at_least_that_often():
    """Production polls each agency at least once an hour, even where nothing is expected: the best
    plan with that floor pays for it out of the same budget and is never sooner."""
    rate = flat([[6.0] * 24, [0.01] * 12 + [0.0] * 12])
    density = cb.article_density(rate, rate.start, rate.end, 60.0)
    groups = cb.Groups.of(density, 60.0)
    assert groups.dead == pytest.approx(12 * 3600.0)
    floor = 1 / 3600
    d = cb.best_delay(groups, 300, 0.95, 10.5, NO_LAG)
    with_floor = cb.best_delay(groups, 300, 0.95, 10.5, NO_LAG, floor)
    assert with_floor > d
    # the floor's 48 polls (2 agencies x 24 h) come first and store y / 3600 of A's articles (y = d -
    # 10.5); the other 252 poll a share x of A's day every y instead: x + (1 - x) y / 3600 = 0.95
    y = with_floor - 10.5
    x = 252 / (DAY * (1 / y - 1 / 3600))
    assert x + (1 - x) * y / 3600 == pytest.approx(0.95, abs=2e-3)  # B's 0.1% of the articles aside
    _, rates, partial = cb.best_plan(groups, 300, with_floor, 10.5, NO_LAG, floor)
    plan = cb.poll_times(groups, rates, partial, density.shape, rate.start, 60.0, floor)
    hours = np.floor((plan[1] - rate.start) / 3600)
    assert len(plan[1]) >= 23 and np.max(np.diff(np.concatenate([[0], hours, [24]]))) <= 2


def test_bursts_followers_free_and_close_share():
    rate = flat([[6.0] * 24], extra=1.0)
    total = cb.MassCurve.of(cb.article_density(rate, rate.start, rate.end, 60.0), 60.0)
    heads = cb.MassCurve.of(cb.article_density(rate, rate.start, rate.end, 60.0, followers=False), 60.0)
    d, f = cb.followers_free(total, heads, 288, 0.95, 0.0, NO_LAG)
    assert f == pytest.approx(0.5, abs=0.01)  # the last followers fall past the end
    assert d == pytest.approx(cb.bound_delay(heads, 288, (0.95 - f) / (1 - f), 0.0, NO_LAG))
    assert d < cb.bound_delay(total, 288, 0.95, 0.0, NO_LAG)
    assert cb.followers_free(total, heads, 288, 0.4, 0.0, NO_LAG)[0] == 0.0
    times = np.array([0.0, 100.0, 1000.0, 1200.0, 1250.0, 5000.0])
    who = np.array([0, 0, 0, 1, 1, 0])
    # in [50, 6000): 100 (after 0), 1000 (no), 1200 (no: another agency's), 1250 (after 1200), 5000
    assert cb.close_share(times, who, 50.0, 6000.0) == pytest.approx(2 / 5)


LINE = re.compile(
    r"^bound: seeds=55 days=2 agencies=20 overhead_s=10.5 q=0.95 h95_agency_hours_per_day=[0-9.]+"
    r" p95_s_1.00x=(?P<b1>[0-9]+) p95_s_2.00x=(?P<b2>[0-9]+)"
    r" best_p95_s_1.00x=(?P<best1>[0-9]+) best_p95_s_2.00x=[0-9]+"
    r" drawn_p95_s_1.00x=[0-9]+ drawn_p95_s_2.00x=[0-9]+"
    r" ceiling_best_p95_s_1.00x=(?P<ceil1>[0-9]+) ceiling_best_p95_s_2.00x=[0-9]+"
    r" p50_s_1.00x=(?P<p50>[0-9]+) p50_s_2.00x=[0-9]+"
    r" burst_free_p95_s_1.00x=(?P<free>[0-9]+) burst_free_p95_s_2.00x=[0-9]+"
    r" polls_per_day_for_p95_180s=[0-9]+ best_polls_per_day_for_p95_180s=[0-9]+"
    r" ceiling_best_polls_per_day_for_p95_180s=[0-9]+"
    r" followers_share=0\.[0-9]+ close_share_300s=0\.[0-9]+$"
)


def test_a_small_run_prints_the_contract_line(capsys):
    args = ["--days", "2", "--seeds", "1", "--seed", "28", "--agencies", "20", "--articles", "20000"]
    assert cb.main([*args, "--budgets", "2880,5760", "--lag-nodes", "50"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    m = LINE.match(out[-1])
    assert m, out[-1]
    b1, b2 = int(m["b1"]), int(m["b2"])
    assert b2 < b1 <= int(m["best1"]) <= int(m["ceil1"])  # more polls, sooner; the bound first
    assert int(m["p50"]) < b1 and int(m["free"]) < b1
    assert any(line.startswith("  2,880/day (1.00x the fixed 10 min): p95 >=") for line in out)
