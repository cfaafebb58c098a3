"""The learnt scrape cadence (dgb.scraper.cadence): floor, ceiling, bursts, office hours, budget."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dgb.scraper.cadence import (
    DAY,
    HOUR,
    SLOTS,
    CadencePolicy,
    History,
    cadence,
    hour_of_week,
    is_due,
    plan,
    week_profile,
)

POLICY = CadencePolicy()
# Monday 2026-12-07 14:00 UTC = 11:00 in Brasília, an office hour
MONDAY_11H = datetime(2026, 12, 7, 14, 0, tzinfo=UTC).timestamp()


def office_hours_history(per_hour: float, now: float, days: int = 28) -> History:
    """An agency publishing ``per_hour`` articles in each weekday hour 9h-18h (Brasília), evenly."""
    times = []
    for d in range(1, days + 1):
        day_start = now - d * DAY
        for h in range(24 * 6):
            ts = day_start + h * 600
            local = hour_of_week(ts)
            if local // 24 < 5 and 9 <= local % 24 < 18 and h % int(6 / per_hour if per_hour < 6 else 1) == 0:
                times.append(ts)
    return History.from_times(times, now, days)


def test_hour_of_week_is_brasilia_time():
    assert hour_of_week(MONDAY_11H) == 11
    assert hour_of_week(datetime(2026, 12, 7, 2, 59, tzinfo=UTC).timestamp()) == 6 * 24 + 23  # Sun 23h
    assert hour_of_week(datetime(2026, 12, 13, 23, 0, tzinfo=UTC).timestamp()) == 6 * 24 + 20


def test_a_busy_agency_in_its_busy_hour_is_polled_at_the_floor():
    history = office_hours_history(3.0, MONDAY_11H)
    assert history.total > 28 * 0.7 * 9 * 3 * 0.9  # ~3 an office hour on weekdays
    c = cadence(history, MONDAY_11H, POLICY, week_profile([history]))
    assert c.interval_s == POLICY.floor_s
    assert c.reason == "busy"
    assert c.rate_per_hour == pytest.approx(3.0, rel=0.35)


def test_the_same_busy_agency_at_night_is_polled_far_less_often():
    history = office_hours_history(3.0, MONDAY_11H)
    night = MONDAY_11H + 16 * HOUR  # Tuesday 03:00 in Brasília; the week's profile is office hours
    c = cadence(history, night, POLICY, week_profile([history]))
    assert c.interval_s >= 5 * POLICY.floor_s
    assert c.rate_per_hour < 0.1


def test_a_dormant_agency_is_polled_at_its_ceiling():
    silent = History(days=28.0, last_new=MONDAY_11H - 120 * DAY)  # nothing in 28 days, last 4 months ago
    c = cadence(silent, MONDAY_11H, POLICY)
    assert (c.interval_s, c.reason) == (POLICY.ceiling_s, "dormant")
    never = History(days=28.0)
    assert cadence(never, MONDAY_11H, POLICY).interval_s == POLICY.ceiling_s


def test_floor_and_ceiling_are_settings(monkeypatch):
    monkeypatch.setenv("DGB_SCRAPE_FLOOR", "90")
    monkeypatch.setenv("DGB_SCRAPE_CEILING", "1800")
    policy = CadencePolicy.from_env()
    assert (policy.floor_s, policy.ceiling_s) == (90, 1800)
    busy = office_hours_history(3.0, MONDAY_11H)
    assert cadence(busy, MONDAY_11H, policy, week_profile([busy])).interval_s == 90
    assert cadence(History(), MONDAY_11H, policy).interval_s == 1800
    monkeypatch.setenv("DGB_SCRAPE_FLOOR", "5")
    with pytest.raises(ValueError, match="DGB_SCRAPE_FLOOR"):
        CadencePolicy.from_env()


def run_clock(history: History, publications: list[float], start: float, end: float, last_poll: float):
    """The dispatcher's loop for one agency on a simulated clock: each tick, cadence + plan; a poll
    finds what was published before it. Returns (poll times, {publication: found at}, cadences)."""
    profile = [1.0 / SLOTS] * SLOTS
    polls, found, seen = [], {}, []
    pending = sorted(publications)
    now = start
    while now < end:
        c = cadence(history, now, POLICY, profile)
        seen.append((now, c))
        if plan([("quiet", c, last_poll)], now, POLICY, host_rps=2.0).due:
            at = now + 5.0  # the poll starts a few seconds after the tick
            polls.append(at)
            last_poll = at
            new = [p for p in pending if p <= at]
            pending = [p for p in pending if p > at]
            for p in new:
                found[p] = at
                history.counts[hour_of_week(p)] += 1
                history.last_new = max(history.last_new or p, p)
        now += POLICY.tick_s
    return polls, found, seen


def test_a_burst_after_silence_is_picked_up_within_the_ceiling_and_the_cadence_adapts_within_the_hour():
    quiet = History(days=28.0, last_new=MONDAY_11H - 60 * DAY)
    start = MONDAY_11H
    assert cadence(quiet, start, POLICY).reason == "dormant"
    first = start + 7 * 60  # an emergency: one article 7 min after a poll, then one every 5 min
    burst = [first + i * 300 for i in range(12)]
    polls, found, seen = run_clock(quiet, burst, start, start + 3 * HOUR, last_poll=start - 1)
    assert len(found) == len(burst), "every article of the burst is found"
    assert found[first] - first <= POLICY.ceiling_s + POLICY.tick_s
    # within the hour after the first article is found, polls are at the floor's pace
    picked = found[first]
    after = [c for t, c in seen if picked < t <= picked + HOUR]
    assert after and all(c.interval_s <= 3 * POLICY.floor_s for c in after[:30])
    later = [p for p in burst if p > picked]
    assert later and max(found[p] - p for p in later) <= 3 * POLICY.floor_s + POLICY.tick_s
    # and when the burst is over the agency slows down again, the longer the quieter
    ended = found[burst[-1]]
    just_after = next(c for t, c in seen if t > ended + 10 * 60)
    assert seen[-1][1].interval_s > max(2 * POLICY.floor_s, just_after.interval_s)


def test_the_budget_is_never_exceeded_with_every_agency_due_at_once():
    busy = office_hours_history(3.0, MONDAY_11H)
    profile = week_profile([busy])
    keys = [f"orgao{i:03d}" for i in range(400)]
    last: dict[str, float | None] = dict.fromkeys(keys)  # never polled: every agency due at once
    rps = 2.0
    started: list[float] = []
    polled_once: set[str] = set()
    now = MONDAY_11H
    for _ in range(30):  # 30 ticks
        c = cadence(busy, now, POLICY, profile)  # each agency busy: the floor
        decided = plan([(k, c, last[k]) for k in keys], now, POLICY, rps)
        assert len(decided.due) <= POLICY.listing_share * rps * POLICY.tick_s
        assert len(decided.due) == decided.capacity  # the share is used, not more
        assert not set(decided.due) & set(decided.deferred)
        for k in decided.due:
            last[k] = now + 1.0
            polled_once.add(k)
            started.append(now)
        now += POLICY.tick_s
    # in any window the listings started stay inside their share of the host's requests/s
    window = 300.0
    for t in started:
        in_window = sum(1 for s in started if t <= s < t + window)
        assert in_window <= POLICY.listing_share * rps * window
    assert polled_once == set(keys), "most overdue first: nobody starves"


def test_due_means_the_interval_has_passed_give_or_take_half_a_tick():
    assert is_due(None, 3600, 0.0, POLICY)
    assert is_due(1000.0, 60, 1000.0 + 55, POLICY)  # the poll started 5 s after the previous tick
    assert not is_due(1000.0, 600, 1000.0 + 500, POLICY)
    assert is_due(1000.0, 600, 1000.0 + 600, POLICY)
