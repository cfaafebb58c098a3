"""What scripts/bench_realtime.py prints of its run for issue 36 (realtime_results.run_lines and its
parts), and its command line: on given figures, since the run itself needs the whole stack for an
hour."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))

import bench_realtime  # noqa: E402
import realtime_results as rr  # noqa: E402


def test_delays_give_the_count_and_no_p95_under_20_articles():
    twenty = [float(v) for v in range(20, 0, -1)]  # 20 .. 1, unsorted
    assert rr.delays(twenty) == {"n": 20, "p50": 10.0, "p95": 19.0, "max": 20.0}
    nineteen = twenty[1:]  # 19 .. 1
    assert rr.delays(nineteen) == {"n": 19, "p50": 10.0, "p95": None, "max": 19.0}
    assert rr.delays([]) == {"n": 0, "p50": None, "p95": None, "max": None}


def test_delay_lines_say_what_they_are_over():
    many = [30.0] * 190 + [400.0] * 10  # 5% slow: the p95 is the fast group's, the max the slow one's
    assert rr.delay_line("publication -> scraped", many) == (
        "publication -> scraped: 200 articles, p50 30 s, p95 30 s, max 400 s"
    )
    assert rr.delay_line("publication -> scraped", many + [400.0] * 2) == (
        "publication -> scraped: 202 articles, p50 30 s, p95 400 s, max 400 s"
    )
    assert rr.delay_line("publication -> searchable", [56.0] * 12 + [368.0]) == (
        "publication -> searchable: 13 articles, p50 56 s, no p95 (under 20 articles), max 368 s"
    )
    assert rr.delay_line("publication -> searchable", []) == "publication -> searchable: no articles"


def test_per_hour_and_the_runs_requests_by_kind():
    assert rr.per_hour(300, 1800) == 600
    assert rr.per_hour(4200, 70 * 60) == 3600
    before = {"listing": 900, "api_search": 100, "article": 50}
    after = {"listing": 4900, "api_search": 1100, "article": 50, "image": 7}
    # the site counts from its own start: the run's are the differences, kinds it did not ask left out
    assert rr.kinds_between(before, after) == {"api_search": 1000, "image": 7, "listing": 4000}
    # a site restarted during the run counts from its restart: that count, not a negative one
    assert rr.kinds_between(before, {"listing": 30, "api_search": 140}) == {"api_search": 40, "listing": 30}


def test_run_lines_one_figure_a_line_and_the_scheduler_on_its_own():
    cpu = {
        "airflow-scheduler": {"cpu_pct_process": 14.1, "cpu_pct_tree": 31.5},
        "airflow-dag-processor": {"cpu_pct_process": 6.7, "cpu_pct_tree": 6.7},
    }
    kinds = {"listing": 3500, "api_search": 700, "article": 900, "api_item": 280, "image": 20, "home": 1}
    scraped = [40.0] * 180 + [200.0] * 30
    searchable = [70.0] * 180 + [260.0] * 30
    lines = rr.run_lines(scraped, searchable, kinds, 2100, 70 * 60, 1.9, cpu)
    assert lines == [
        "publication -> scraped: 210 articles, p50 40 s, p95 200 s, max 200 s",
        "publication -> searchable: 210 articles, p50 70 s, p95 260 s, max 260 s",
        "listing requests per hour: 3600 (kind listing 3000, kind api_search 600:"
        " Plone 6 listings and integrity's @search signal)",
        "integrity checks per hour: 1800 (integrity_checks rows; article pages, Plone 6 items and"
        " images asked 1029/h, scrapes included)",
        "max requests over any 10 s: 19 (1.90/s)",
        "scheduler CPU: 14.1% of one core (the scheduler process; 31.5% with its children,"
        " the LocalExecutor's workers)",
    ]
    assert rr.run_lines([], [], {}, 0, 60, 0.0, {})[-1] == "scheduler CPU: not sampled"


def test_command_line_profile_and_cadence(monkeypatch):
    monkeypatch.setenv("DGB_SCRAPE_CADENCE", "learnt")  # restored after the test: parse_args sets it
    monkeypatch.delenv("DGB_SCRAPE_CADENCE")
    today = bench_realtime.parse_args([])
    assert (today.profile, today.office, today.cadence) == ("uniform", 0, None)
    assert "DGB_SCRAPE_CADENCE" not in os.environ  # the setting as it was
    office = bench_realtime.parse_args(["--profile", "office", "--cadence", "fixed"])
    assert office.office == 200
    from dgb.config import scrape

    assert scrape.scrape_cadence_mode() == "fixed"  # what the run and its Airflow read
    assert bench_realtime.parse_args(["--profile", "office", "--new-per-hour", "250"]).office == 250
    assert bench_realtime.parse_args(["--new-per-hour", "250"]).office == 0  # uniform: not used
    with pytest.raises(SystemExit):
        bench_realtime.parse_args(["--profile", "office", "--new-per-hour", "0"])


def test_request_figures_say_when_the_busiest_ten_seconds_began():
    start = 1_764_950_400.0  # 2025-12-05T16:00:00Z
    # 2 a second, then one second of 3 at +30 s: the windows from +21 to +30 hold 21 requests
    per_second = [[start + t, 3 if t == 30 else 2] for t in range(60)]
    figures = rr.request_figures({"per_second": per_second, "total": {}}, start, start + 60)
    assert figures["requests"] == 121 and figures["max_rps_10s"] == 2.1 and figures["max_rps_1s"] == 3
    assert figures["max_rps_10s_at"] == "2025-12-05T16:00:21+00:00"
    quiet = rr.request_figures({"per_second": [], "total": {}}, start, start + 60)
    assert quiet["max_rps_10s"] == 0.0 and quiet["max_rps_10s_at"] is None
