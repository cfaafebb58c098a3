"""Per agency polls, yield, interval and reason, and integrity's share against the listings'
(dgb.observe.yields), and the section `dgb status` prints from them (dgb.observe.cli.poll_lines):
the pure parts, without a database."""

from __future__ import annotations

import pytest

from dgb.observe.cli import poll_lines
from dgb.observe.yields import agency_rows, budget_split, totals
from dgb.scraper.polls import PollCount

CADENCES = [  # as dgb.scraper.dispatch.cadence_table gives them, fastest first
    {"agency": "mec", "interval_s": 60.0, "reason": "busy", "due_in_s": 31.0},
    {"agency": "saude", "interval_s": 300.0, "reason": "target", "due_in_s": 120.0},
    {"agency": "aeb", "interval_s": 3600.0, "reason": "dormant", "due_in_s": 1800.0},
]
POLLS = {"mec": PollCount(400, 9, 1), "saude": PollCount(100, 2, 0), "aeb": PollCount(20, 0, 0)}
ARTICLES = {"mec": 12, "saude": 5, "mma": 3}  # mma: stored by a manual run, never polled


def test_yield_is_articles_per_poll_beside_the_cadence_most_polled_first():
    rows = agency_rows(CADENCES, POLLS, ARTICLES)
    assert [r["agency"] for r in rows] == ["mec", "saude", "aeb", "mma"]
    mec, saude, aeb, mma = rows
    assert mec == {
        "agency": "mec",
        "polls": 400,
        "found": 9,
        "failed": 1,
        "articles": 12,
        "yield": 0.03,
        "interval_s": 60.0,
        "reason": "busy",
        "due_in_s": 31.0,
    }
    assert saude["yield"] == 0.05 and (saude["interval_s"], saude["reason"]) == (300.0, "target")
    assert (aeb["articles"], aeb["yield"], aeb["reason"]) == (0, 0.0, "dormant")
    # no poll: no yield, and no cadence to show
    assert (mma["polls"], mma["articles"], mma["yield"], mma["interval_s"], mma["reason"]) == (
        0,
        3,
        None,
        None,
        None,
    )


def test_equal_polls_are_ordered_by_articles_then_by_key():
    polls = {"b": PollCount(5), "a": PollCount(5), "c": PollCount(5)}
    rows = agency_rows([], polls, {"c": 1})
    assert [r["agency"] for r in rows] == ["c", "a", "b"]
    assert agency_rows([], {}, {}) == []


def test_totals_add_the_rows_up_and_rate_the_polls_over_the_window():
    rows = agency_rows(CADENCES, POLLS, ARTICLES)
    t = totals(rows, window_s=86400.0)
    assert (t["polls"], t["found"], t["failed"], t["articles"], t["agencies"]) == (520, 11, 1, 20, 4)
    assert t["yield"] == pytest.approx(20 / 520, abs=1e-4)
    assert t["polls_per_s"] == pytest.approx(520 / 86400, abs=1e-4)
    empty = totals([], 3600.0)
    assert (empty["polls"], empty["yield"], empty["polls_per_s"]) == (0, None, 0.0)


def test_integrity_share_against_the_listings_as_fractions_of_the_host():
    share = {
        "rps": 1.1,
        "source": "host",
        "host_rps": 2.0,
        "listings_planned_rps": 0.75,
        "articles_planned_rps": 0.02,
        "scrape_measured_rps": 0.9,
        "min_rps": 0.1,
    }
    split = budget_split(share, polled_rps=0.5)
    assert split == {
        "source": "host",
        "host_rps": 2.0,
        "integrity_rps": 1.1,
        "integrity_fraction": 0.55,
        "listings_planned_rps": 0.75,
        "listings_planned_fraction": 0.375,
        "listings_polled_rps": 0.5,
        "listings_polled_fraction": 0.25,
    }
    # a configured rate is not a share of the host: no fractions
    pinned = budget_split({"rps": 1.5, "source": "configured", "host_rps": 0.0}, polled_rps=0.5)
    assert pinned["host_rps"] is None and pinned["integrity_rps"] == 1.5
    assert pinned["integrity_fraction"] is None and pinned["listings_polled_fraction"] is None


def _table(n_agencies: int = 3) -> dict:
    rows = agency_rows(CADENCES, POLLS, ARTICLES)[:n_agencies]
    t = totals(rows, 86400.0)
    share = {"rps": 1.1, "source": "host", "host_rps": 2.0, "listings_planned_rps": 0.75}
    return {
        "since": "2026-12-06T10:00:00+00:00",
        "window_s": 87600,
        "totals": t,
        "share": budget_split(share, t["polls_per_s"]),
        "agencies": rows,
    }


def test_the_status_section_prints_totals_share_and_the_most_polled_agencies():
    lines = poll_lines(_table(), limit=2)
    assert lines[0] == (
        "  listing polls since 2026-12-06T10:00:00+00:00: 520 polls (11 found news, 1 failed),"
        " 17 new articles, yield 0.033 articles/poll, 0.01 polls/s"
    )
    assert lines[1] == (
        "  integrity vs listings (www.gov.br's 2 req/s): integrity 1.10 req/s (55%),"
        " listings planned 0.75 req/s (38%), polled 0.01 req/s (0%)"
    )
    assert lines[2] == (
        "    polls mec                             400  found    9  failed   1  articles   12"
        "  yield  0.030  every    60 s  busy     next in 31 s"
    )
    assert lines[3].startswith("    polls saude ") and "yield  0.050  every   5 min  target " in lines[3]
    assert lines[4] == "    ... 1 more agencies (dgb status --agencies)"
    assert len(lines) == 5


def test_every_agency_without_a_limit_and_dashes_where_there_is_nothing():
    lines = poll_lines(_table(4), limit=None)
    assert len(lines) == 2 + 4 and "more agencies" not in lines[-1]
    assert lines[-1] == (
        "    polls mma                               0  found    0  failed   0  articles    3"
        "  yield      -  every       -  -        next in -"
    )
    pinned = _table()
    pinned["share"] = budget_split({"rps": 1.5, "source": "configured"}, 0.01)
    assert poll_lines(pinned)[1] == (
        "  integrity vs listings (configured rate): integrity 1.50 req/s, listings planned 0.00 req/s,"
        " polled 0.01 req/s"
    )
