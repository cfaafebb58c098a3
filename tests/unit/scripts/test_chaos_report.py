"""The chaos run's report lines for edits and take-downs reaching readers (scripts/bench_chaos.py's
``change_lines``, over the figures of dgb_dev.chaos.watch): every figure the watchers give is
printed, and an empty list says so instead of a made-up percentile; an unknown ``--faults`` kind is
refused before the stack is touched."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))

import bench_chaos  # noqa: E402


def test_each_change_kind_gets_its_line_with_its_figures():
    changes = {
        "edits": {"lags": [10.0, 20.0, 30.0, 400.0], "open": 2, "superseded": 1},
        "removals": {"lags": [], "visible": 3, "never_shown": 4},
        "moves": {"lags": [5.0], "visible": 0, "never_shown": 0},
    }
    edits, removals, moves = bench_chaos.change_lines(changes)
    assert edits.startswith("edit -> a reader gets its text: 4 edits, p50 ")
    assert "max 400s" in edits
    assert edits.endswith("not seen by the end 2, superseded (taken down or moved first) 1")
    assert removals == "removal -> hidden: 0, none timed; still visible at the end 3, never indexed 4"
    assert moves.startswith("move (the old address) -> hidden: 1, p50 5s, p95 5s, max 5s;")


def test_a_run_without_the_watchers_prints_no_change_line():
    assert bench_chaos.change_lines({}) == []


def test_an_unknown_fault_kind_is_refused_before_anything_starts(capsys):
    with pytest.raises(SystemExit) as exit_:
        bench_chaos.main(["--minutes", "1", "--faults", "kill_postgres,kill_everything"])
    assert exit_.value.code == 2
    assert "unknown fault kinds ['kill_everything']" in capsys.readouterr().err
