"""scripts/faults.py's pure parts: the stage retry budget its quick outages must outlast, and the
last-line contract (the run itself: tests/integration/test_faults_quick.py, DGB_RUN_FAULTS=1)."""

from __future__ import annotations

import importlib.util
import re
import sys
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("faults", REPO / "scripts" / "faults.py")
faults = sys.modules["faults"] = importlib.util.module_from_spec(_spec)  # dataclasses look it up
_spec.loader.exec_module(faults)


def test_flat_retry_delay_when_backoff_is_true():
    # Airflow 3 reads retry_exponential_backoff as a multiplier: True is 1.0, a flat delay
    task = {"task_id": "index", "retries": 3, "retry_delay": 10.0, "retry_exponential_backoff": True}
    assert faults.retry_budget([("index_news", task)]) == {
        "delays_s": 30.0,
        "retries": 3,
        "where": "index_news.index",
    }


def test_exponential_delays_take_the_largest_hash_and_the_cap():
    task = {
        "task_id": "t",
        "retries": 3,
        "retry_delay": timedelta(seconds=10),
        "retry_exponential_backoff": 2.0,
        "max_retry_delay": timedelta(seconds=50),
    }
    # tries 1..3: ceil(10 * 2**k) + up to as much again - 1 = 19, 39, 79 -> capped at 50
    assert faults.retry_budget([("d", task)])["delays_s"] == 19 + 39 + 50


def test_the_longest_schedule_wins_and_no_retries_is_zero():
    short = {"task_id": "a", "retries": 1, "retry_delay": 10.0}
    long = {"task_id": "b", "retries": 2, "retry_delay": 30.0}
    assert faults.retry_budget([("x", short), ("y", long)])["where"] == "y.b"
    assert faults.retry_budget([("z", {"task_id": "c"})])["delays_s"] == 0.0


def test_last_line_contract():
    line = faults.last_line(0, 2, 5, 123.456)
    assert line == "faults: lost=0 duplicated=2 dead_lettered_healthy=5 worst_recovery_s=123.5"
    m = re.fullmatch(faults.LAST_LINE, line)
    assert m
    assert (m["lost"], m["duplicated"], m["dead_lettered_healthy"], m["worst"]) == ("0", "2", "5", "123.5")
    assert not re.fullmatch(faults.LAST_LINE, "faults: lost=0 duplicated=0 worst_recovery_s=1.0")


def test_every_long_outage_is_a_fault():
    assert set(faults.LONG_OUTAGES) <= set(faults.FAULTS)
    assert len(set(faults.FAULTS)) == len(faults.FAULTS) == 11
