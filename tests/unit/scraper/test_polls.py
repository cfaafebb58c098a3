"""How a dispatcher tick's probes are counted per agency and hour (dgb.scraper.polls), without a
database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from dgb.scraper.dispatch import Probe
from dgb.scraper.polls import PollCount, hour_of, tally, window_start


def test_a_tick_counts_each_agencys_polls_those_with_news_and_those_that_failed():
    probes = [
        Probe("mec", new=3),
        Probe("mec", new=0),  # the EBC DAG polls two portals: two probes in one tick can share a key
        Probe("saude", error="url_broken"),
        Probe("aeb", new=0, answer="hit"),
    ]
    assert tally(probes) == {
        "mec": PollCount(polls=2, found=1, failed=0),
        "saude": PollCount(polls=1, found=0, failed=1),
        "aeb": PollCount(polls=1, found=0, failed=0),
    }
    assert tally([]) == {}


def test_polls_fall_in_the_utc_hour_of_their_tick():
    brasilia = timezone(timedelta(hours=-3))
    eleven_59 = datetime(2026, 12, 7, 11, 59, 59, tzinfo=brasilia)
    assert hour_of(eleven_59) == datetime(2026, 12, 7, 14, tzinfo=UTC)


def test_a_window_of_whole_hours_covers_at_least_the_hours_asked():
    now = datetime(2026, 12, 7, 10, 20, tzinfo=UTC)
    assert window_start(now, 24) == datetime(2026, 12, 6, 10, tzinfo=UTC)  # 24 h 20 min
    assert window_start(now, 1) == datetime(2026, 12, 7, 9, tzinfo=UTC)
    assert window_start(now, 0.25) == datetime(2026, 12, 7, 10, tzinfo=UTC)
    on_the_hour = datetime(2026, 12, 7, 10, tzinfo=UTC)
    assert window_start(on_the_hour, 24) == datetime(2026, 12, 6, 10, tzinfo=UTC)  # exactly 24 h
