"""The scrape cadence (dgb.scraper.cadence): the empirical Bayes forecast, the listing budget planned
hour by hour and spent exactly, the bound on a quiet agency's wait, bursts, settings."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from dgb.scraper.cadence import (
    DAY,
    HOUR,
    SLOTS,
    CadencePolicy,
    History,
    allocate,
    fit_prior,
    hour_of_week,
    is_due,
    plan,
    plan_week,
    rate_now,
    schedule,
    tick_allowance,
)

POLICY = CadencePolicy()
# Monday 2026-12-07 14:00 UTC = 11:00 in Brasília, an office hour
MONDAY_11H = datetime(2026, 12, 7, 14, 0, tzinfo=UTC).timestamp()


def office_history(per_week: float, hours=range(9, 18), weekdays=range(5), days: float = 28.0) -> History:
    """An agency publishing ``per_week`` articles a week evenly over ``hours`` of ``weekdays``."""
    h = History(days=days)
    slots = [d * 24 + hr for d in weekdays for hr in hours]
    for s in slots:
        h.counts[s] = per_week * days / 7 / len(slots)
    return h


def group(n: int = 40, now: float = MONDAY_11H) -> dict[str, History]:
    """``n`` office-hours agencies from 2 to 80 articles a week, each with a recent article."""
    out = {}
    for i in range(n):
        h = office_history(2 + 78 * i / max(1, n - 1))
        h.last_new = now - 2 * DAY
        out[f"orgao{i:03d}"] = h
    return out


def test_hour_of_week_is_brasilia_time():
    assert hour_of_week(MONDAY_11H) == 11
    assert hour_of_week(datetime(2026, 12, 7, 2, 59, tzinfo=UTC).timestamp()) == 6 * 24 + 23  # Sun 23h
    assert hour_of_week(datetime(2026, 12, 13, 23, 0, tzinfo=UTC).timestamp()) == 6 * 24 + 20


def test_the_prior_shrinks_a_sparse_agency_to_the_group_and_leaves_a_rich_one_near_its_data():
    hs = group(40)
    sparse = History(days=28.0)
    sparse.counts[6 * 24 + 3] = 2  # two articles, both on a Sunday at 3h
    rich = office_history(300, hours=range(20, 23), weekdays=range(7))  # 300 a week, evenings only
    hs["sparse"], hs["rich"] = sparse, rich
    prior = fit_prior(hs.values())
    mean = prior.mean_per_week
    assert 20 < mean < 60  # the group's mean volume, about 40 a week plus the rich one
    # volume: the sparse agency's 0.5 a week is pulled towards the group, the rich one's 300 kept
    assert 0.5 * 1.2 < prior.per_week(sparse) < mean
    assert prior.per_week(rich) == pytest.approx(300, rel=0.05)
    # profile: the sparse agency's own hour (every article it has) weighs little against the group's
    sparse_rates = prior.rates(sparse)
    assert sparse_rates[6 * 24 + 3] < 0.2 * sum(sparse_rates)
    assert sparse_rates[11] > sparse_rates[6 * 24 + 3] / 10  # it may publish in office hours too
    # the rich agency publishes when it always did: evenings, not the group's office hours
    rich_rates = prior.rates(rich)
    assert rich_rates[21] == pytest.approx(300 / 21, rel=0.1)
    assert rich_rates[11] < 0.05 * rich_rates[21]


def test_the_week_budget_is_planned_where_the_news_is_and_sums_to_the_share():
    s = schedule(group(40), MONDAY_11H, POLICY, host_rps=2.0)
    assert sum(s.budgets) == pytest.approx(POLICY.week_budget(2.0), rel=1e-9)
    night, office = s.budgets[3], s.budgets[11]  # Monday 3h, Monday 11h
    assert office > 5 * night
    assert night >= 40 * HOUR / POLICY.ceiling_s - 1e-9  # every agency once per ceiling at least
    assert max(s.budgets) <= POLICY.peak_share * 2.0 * HOUR + 1e-6
    weekend = sum(s.budgets[5 * 24 :]) / 48
    assert weekend < 0.5 * sum(s.budgets[:120]) / 120  # the group publishes on weekdays only


def run_ticks(histories, start: float, ticks: int, policy=POLICY, rps: float = 2.0, last=None):
    """The dispatcher's loop on a simulated clock (the schedule recomputed at each hour): the polls
    started per tick, each agency's poll times, and the hour budgets used."""
    last = dict(last) if last is not None else dict.fromkeys(histories, start - 30.0)
    polls: dict[str, list[float]] = {k: [] for k in histories}
    per_tick, budgets = [], {}
    s = None
    for i in range(ticks):
        now = start + i * policy.tick_s
        if s is None or int(now // HOUR) != int((now - policy.tick_s) // HOUR):
            s = schedule(histories, now, policy, rps)
            budgets[int(now // HOUR)] = s.budget_per_hour
        decided = plan([(k, s.cadences[k], last[k]) for k in histories], now, policy, rps, s.budget_per_hour)
        assert len(set(decided.due)) == len(decided.due)
        for k in decided.due:
            last[k] = now + 3.0
            polls[k].append(now + 3.0)
        per_tick.append(len(decided.due))
    return per_tick, polls, budgets


def test_an_hour_with_demand_spends_its_budget_exactly():
    hs = group(160)
    start = MONDAY_11H  # an hour boundary
    per_tick, _, budgets = run_ticks(hs, start, 60)
    (budget,) = budgets.values()
    assert budget > 1000  # office hours: a real budget
    assert sum(per_tick) == int(budget)  # floor(budget): spent to the poll, not more


def test_a_day_spends_the_sum_of_its_hours_budgets():
    hs = group(40)
    start = MONDAY_11H - 11 * HOUR  # Monday 00h in Brasília
    lean = CadencePolicy(listing_share=0.03)  # 40 agencies: less than they could use in office hours
    per_tick, _, budgets = run_ticks(hs, start, 24 * 60, policy=lean)
    assert len(budgets) == 24
    spent, planned = sum(per_tick), sum(int(b) for b in budgets.values())
    assert planned - 24 <= spent <= planned  # at most one poll short per hour (rounding)
    office = sum(per_tick[9 * 60 : 18 * 60])
    assert office > 0.6 * spent  # the budget followed the news


def test_nothing_exceeds_the_budget_when_every_agency_is_due_at_once():
    hs = group(400)
    start = MONDAY_11H
    s = schedule(hs, start, POLICY, 2.0)
    # every agency with a short interval overdue (the others under their ceiling): each tick takes
    # its share, the rest wait
    due = [k for k in hs if s.cadences[k].interval_s <= 600]
    assert len(due) > 150  # more than twice a tick's share
    last = dict.fromkeys(due, start - 0.5 * POLICY.ceiling_s)
    total = waited = 0
    for i in range(60):
        now = start + i * POLICY.tick_s
        decided = plan([(k, s.cadences[k], last[k]) for k in due], now, POLICY, 2.0, s.budget_per_hour)
        assert len(decided.due) <= tick_allowance(s.budget_per_hour, now, POLICY) == decided.capacity
        if decided.deferred:
            assert len(decided.due) == decided.capacity
            waited += 1
        assert not set(decided.due) & set(decided.deferred)
        for k in decided.due:
            last[k] = now
        total += len(decided.due)
    assert waited >= 2  # the due agencies took several ticks
    assert total <= s.budget_per_hour
    # never polled at all (the dispatcher's first tick): the ceiling's bound, within the peak share
    fresh = plan([(k, s.cadences[k], None) for k in hs], start, POLICY, 2.0, s.budget_per_hour)
    assert len(fresh.due) == POLICY.per_tick(2.0) and len(fresh.deferred) == 400 - POLICY.per_tick(2.0)


def test_a_dormant_agency_is_still_polled_within_its_ceiling_when_the_budget_is_tight():
    hs = group(60)
    silent = History(days=28.0, last_new=MONDAY_11H - 120 * DAY)  # nothing in 28 days
    hs["silent"] = silent
    tight = CadencePolicy(listing_share=0.012)  # the busy agencies alone want more polls than this
    start = MONDAY_11H
    s = schedule(hs, start, tight, 2.0)
    assert s.cadences["silent"].reason == "dormant"
    assert s.cadences["silent"].interval_s == tight.ceiling_s
    _, polls, _ = run_ticks(hs, start, 4 * 60, policy=tight)
    times = [start - 30.0, *polls["silent"], start + 4 * HOUR]
    assert len(polls["silent"]) >= 3
    assert max(b - a for a, b in itertools.pairwise(times)) <= tight.ceiling_s + tight.tick_s


def test_the_busiest_agencies_get_the_target_first_when_the_budget_is_short():
    rates = {f"a{i}": (0.05 * (i + 1), False) for i in range(40)}  # 0.05 to 2 articles an hour
    short = 40 * HOUR / POLICY.ceiling_s + 300  # the ceiling's polls plus 300 an hour
    c = allocate(rates, short, POLICY)
    spent = sum(HOUR / x.interval_s for x in c.values())
    assert short - 30 <= spent <= short + 1e-6
    assert c["a39"].interval_s <= POLICY.target_s  # the ladder's step nearest the target
    assert c["a0"].interval_s == POLICY.ceiling_s and c["a0"].reason == "dormant"
    order = [c[f"a{i}"].interval_s for i in range(40)]
    assert order == sorted(order, reverse=True)  # the busier, the shorter


def test_a_budget_too_small_for_the_target_aims_at_the_p95_it_can_buy():
    rates = [office_history(2 + 78 * i / 159).counts for i in range(160)]
    rates = [[c / 4 for c in r] for r in rates]  # articles an hour in each hour of the week
    ample = plan_week(rates, POLICY, 2.0)
    assert ample.target_s == POLICY.target_s and ample.miss <= POLICY.forecast_miss
    lean = plan_week(rates, CadencePolicy(listing_share=0.05), 2.0)
    assert lean.target_s > POLICY.target_s and lean.miss <= POLICY.forecast_miss
    # the lean budget aimed at the policy's target would leave more articles late than it allows
    pinned = plan_week(rates, CadencePolicy(listing_share=0.05), 2.0, target_s=POLICY.target_s)
    assert pinned.miss > POLICY.forecast_miss
    assert sum(lean.budgets) == pytest.approx(sum(pinned.budgets))  # the same budget, spent otherwise


def test_a_budget_beyond_the_demand_is_not_spent_on_agencies_forecast_to_publish_nothing():
    rates = {"busy": (3.0, False), "nothing": (0.0, False)}
    c = allocate(rates, 10_000, POLICY)
    assert (c["busy"].interval_s, c["busy"].reason) == (POLICY.floor_s, "busy")
    assert (c["nothing"].interval_s, c["nothing"].reason) == (POLICY.ceiling_s, "dormant")


def test_a_burst_after_silence_is_polled_fast_then_slows_as_it_ages():
    hs = group(160)
    quiet = History(days=28.0, last_new=MONDAY_11H - 60 * DAY)
    hs["quiet"] = quiet
    lean = CadencePolicy(listing_share=0.05)
    s = schedule(hs, MONDAY_11H, lean, 2.0)
    assert s.cadences["quiet"].reason == "dormant"
    quiet.last_new = MONDAY_11H - 120  # its poll just found an article published 2 min ago
    s = schedule(hs, MONDAY_11H, lean, 2.0)
    assert s.cadences["quiet"].reason == "recent"
    assert s.cadences["quiet"].interval_s <= s.week.target_s - lean.overhead_s
    later = schedule(hs, MONDAY_11H + 3 * HOUR, lean, 2.0)  # the burst is over
    assert later.cadences["quiet"].interval_s > 5 * s.cadences["quiet"].interval_s


def test_rate_now_blends_towards_the_next_hour_and_takes_a_recent_article():
    slots = [0.0] * SLOTS
    slots[12] = 6.0  # nothing at 11h, 6 an hour at 12h (Monday)
    assert rate_now(slots, None, MONDAY_11H, POLICY) == (0.0, False)
    rate, recent = rate_now(slots, None, MONDAY_11H + 45 * 60, POLICY)
    assert rate == pytest.approx(4.5) and not recent
    rate, recent = rate_now(slots, MONDAY_11H - 300, MONDAY_11H, POLICY)
    assert rate == pytest.approx(0.25 * 3600 / 300) and recent


def test_the_cadence_settings(monkeypatch):
    monkeypatch.setenv("DGB_SCRAPE_FLOOR", "120")
    monkeypatch.setenv("DGB_SCRAPE_CEILING", "1800")
    monkeypatch.setenv("DGB_SCRAPE_LISTING_SHARE", "0.3")
    monkeypatch.setenv("DGB_SCRAPE_TARGET", "300")
    policy = CadencePolicy.from_env()
    assert (policy.floor_s, policy.ceiling_s, policy.listing_share, policy.target_s) == (120, 1800, 0.3, 300)
    assert policy.ladder()[0] == 1800 and policy.ladder()[-1] == 120
    assert policy.week_budget(2.0) == pytest.approx(0.3 * 2 * 7 * DAY)
    c = allocate({"busy": (5.0, False), "none": (0.0, False)}, 1000, policy)
    assert (c["busy"].interval_s, c["none"].interval_s) == (120, 1800)
    monkeypatch.setenv("DGB_SCRAPE_FLOOR", "5")
    with pytest.raises(ValueError, match="DGB_SCRAPE_FLOOR"):
        CadencePolicy.from_env()


def test_due_means_the_interval_has_passed_give_or_take_half_a_tick():
    assert is_due(None, 3600, 0.0, POLICY)
    assert is_due(1000.0, 60, 1000.0 + 55, POLICY)  # the poll started 5 s after the previous tick
    assert not is_due(1000.0, 600, 1000.0 + 500, POLICY)
    assert is_due(1000.0, 600, 1000.0 + 600, POLICY)


def test_an_hours_ticks_take_its_budget_to_the_poll():
    for budget in (0.0, 0.5, 59.0, 61.0, 1296.4, 3000.0):
        got = [tick_allowance(budget, MONDAY_11H + i * 60, POLICY) for i in range(60)]
        assert sum(got) == int(budget) and max(got) - min(got) <= 1
