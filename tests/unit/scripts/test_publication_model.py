"""The publication model of the scraping simulation (dgb_dev.mirror.publication): estimated from
real articles, stored, and what it generates (office hours, weekends, per-agency shares)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from dgb_dev.mirror.publication import MODEL_FILE, PublicationModel, estimate, fewest_in_window

DATA = Path(__file__).resolve().parents[4] / "shared" / "data" / "classifier-dev"


@pytest.mark.skipif(
    not (DATA / "real.jsonl").exists(), reason="the real articles are not beside the checkout"
)
def test_the_stored_model_is_the_estimate_from_the_real_articles():
    import json

    assert json.loads(MODEL_FILE.read_text(encoding="utf-8")) == estimate(DATA)


def test_generated_publications_follow_office_hours_weekdays_and_agency_shares():
    model = PublicationModel.load()
    assert model.weekend_factor < 0.5 and abs(sum(model.hour_share) - 1) < 1e-3
    keys = ["mdr", "cidades", "orgao-que-nunca-apareceu"]
    start = datetime(2026, 12, 7, 3, 0, tzinfo=UTC).timestamp()  # Monday 00:00 in Brasília
    times, who = model.generate(keys, start, 28, 300.0, np.random.default_rng(1))
    expected = model.hourly_rate(start, 28 * 24, 300.0).sum()  # the 28 days hold Christmas
    assert expected < 28 * 300 * 0.95
    assert expected * 0.85 < len(times) < expected * 1.15  # bursts make the count vary more
    local = (times - start) % 86400 / 3600  # Brasília hour of day
    day = ((times - start) // 86400) % 7
    office = ((local >= 9) & (local < 19)).mean()
    assert office > 0.7  # most articles in office hours
    assert (day >= 5).mean() < 0.1  # few at weekends
    counts = np.bincount(who, minlength=3)
    assert counts[0] > counts[1] > counts[2] > 0  # the sample's shares; an unseen agency still publishes


def test_bursts_holidays_drift_and_dormant_agencies_waking():
    model = PublicationModel.load()
    assert model.burst_extra > 0 and model.holiday_factor < 0.2 and model.shift_sd > 0 and model.drift_sd > 0
    assert all(k in model.basis for k in ("hour_share", "holiday_factor", "burst_extra", "drift_sd"))
    keys = [f"orgao{i:02d}" for i in range(40)]
    start = datetime(2026, 11, 30, 3, 0, tzinfo=UTC).timestamp()  # Monday 30 November, 00:00 Brasília
    measured = start + 14 * DAY
    rng = np.random.default_rng(7)
    times, who = model.generate(keys, start, 35, 400.0, rng, measured_from=measured)
    local_day = ((times - 3 * 3600 - datetime(2026, 11, 30, tzinfo=UTC).timestamp()) // DAY).astype(int)
    per_day = np.bincount(local_day, minlength=35)
    christmas = 25  # 25 December, a Friday
    weekdays = [d for d in range(35) if d % 7 < 5 and d != christmas]
    assert per_day[christmas] < 0.2 * np.mean(per_day[weekdays])
    # bursts: far more same-agency pairs within 5 minutes than a Poisson stream of the same volume
    close = sum(int(np.sum(np.diff(times[who == a]) <= 300)) for a in range(40))
    assert close > 0.2 * len(times)
    # dormant agencies: silent before the measured period, some publish in it
    before = set(who[times < measured].tolist())
    woke = set(who[times >= measured].tolist()) - before
    assert woke and len(before) < 40
    # the listing shows each article a few seconds after its publication
    lag = model.listing_lag(10_000, rng)
    assert lag.min() > 0 and 5 < np.median(lag) < 20 and np.percentile(lag, 95) < 60


def test_office_hours_hold_at_least_n_in_any_hour_the_same_for_the_same_seed():
    """bench_realtime.py --profile office: any 60 minutes of the span hold at least N new articles,
    spread over the agencies by the model's shares, in bursts; one seed, one draw."""
    model = PublicationModel.load()
    keys = ["agencia_brasil", "mdr", "secom", *(f"orgao{i:03d}" for i in range(150))]
    start = datetime(2026, 12, 6, 3, 0, tzinfo=UTC).timestamp()  # a Sunday: the day's factor is not used
    times, who = model.office_hours(keys, start, 48, 200, seed=14)
    assert np.all(np.diff(times) >= 0) and times.min() >= start and times.max() < start + 48 * 3600
    first_hour = int(np.sum(times < start + 3600))
    assert first_hour >= 200
    assert fewest_in_window(times, start, start + 48 * 3600, 3600) >= 200
    assert 1.3 * 200 * 48 < len(times) < 1.7 * 200 * 48  # about 1.5 x the floor on average
    again, again_who = model.office_hours(keys, start, 48, 200, seed=14)
    assert np.array_equal(times, again) and np.array_equal(who, again_who)
    other, _ = model.office_hours(keys, start, 48, 200, seed=15)
    assert not np.array_equal(times, other[: len(times)])
    counts = np.bincount(who, minlength=len(keys))
    assert counts[0] > counts[1] > counts[3]  # the sample's big agencies publish the most

    def close(times, who):  # share of articles within 5 minutes of their agency's previous one
        return sum(int(np.sum(np.diff(times[who == a]) <= 300)) for a in range(len(keys))) / len(times)

    alone = replace(model, burst_extra=0.0).office_hours(keys, start, 48, 200, seed=14)
    assert close(times, who) > close(*alone) + 0.1  # in bursts, not one by one
    assert model.office_hours(keys, start, 48, 0, seed=14)[0].size == 0


def test_fewest_in_window_is_the_minimum_over_every_window():
    times = np.array([0.0, 10.0, 11.0, 12.0, 40.0, 41.0, 70.0, 95.0])

    # brute force over window starts on a fine grid (the times are whole; starts in half steps)
    def brute(lo, hi, w):
        starts = np.arange(lo, hi - w + 0.25, 0.5)
        return min(int(np.sum((times >= x) & (times < x + w))) for x in starts)

    for lo, hi, w in ((0, 100, 30), (0, 100, 20), (5, 80, 25), (0, 100, 100)):
        assert fewest_in_window(times, lo, hi, w) == brute(lo, hi, w), (lo, hi, w)
    assert fewest_in_window(times, 0, 100, 30) == 1  # (41, 71]: 70 alone
    with pytest.raises(ValueError):
        fewest_in_window(times, 0, 10, 30)


DAY = 86400.0


def test_draw_makes_generates_draws_and_returns_the_rate_they_came_from():
    """scripts/cadence_bound.py reads the true rate of the very draw bench_scale.py measures on."""
    model = PublicationModel.load()
    keys = [f"orgao{i:02d}" for i in range(30)]
    start = datetime(2026, 11, 30, 3, 0, tzinfo=UTC).timestamp()
    measured = start + 7 * DAY
    times, who = model.generate(keys, start, 21, 300.0, np.random.default_rng(5), measured_from=measured)
    again, again_who, rate = model.draw(
        keys, start, 21, 300.0, np.random.default_rng(5), measured_from=measured
    )
    assert np.array_equal(times, again) and np.array_equal(who, again_who)
    assert rate.bursts_per_hour.shape == (30, 21 * 24) and rate.end == start + 21 * DAY
    assert rate.burst_extra == model.burst_extra and rate.burst_span_s == model.burst_span_s
    # dormant agencies: nothing before their waking, which is in the measured period
    woke = np.isfinite(rate.wake)
    assert np.all(rate.wake[woke] >= measured)
    for a in np.flatnonzero(woke):
        assert np.all(times[who == a] >= rate.wake[a])
    # the expected articles (bursts x their mean size) against the drawn ones
    expected = rate.bursts_per_hour.sum() * (1 + rate.burst_extra)
    assert 0.8 * expected < len(times) < 1.2 * expected
