"""scripts/cadence_late.py: which articles are followers, which had a find of their agency nearby,
the CadencePolicy overrides, and a small run's last line."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
LINE = re.compile(
    r"^late: seed=527 p50_s=[0-9]+ p95_s=[0-9]+ office_p95_s=([0-9]+|nan) listing_requests_per_day=[0-9]+"
    r" late=(?P<late>[0-9]+) late_followers=(?P<fol>[0-9]+) late_off_hours=(?P<off>[0-9]+)"
    r" late_with_find_nearby=(?P<near>[0-9]+)$"
)


def load_script():
    sys.path.insert(0, str(REPO / "scripts"))
    spec = importlib.util.spec_from_file_location("cadence_late", REPO / "scripts" / "cadence_late.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["cadence_late"] = module
    spec.loader.exec_module(module)
    return module


def test_a_follower_comes_within_the_span_after_another_of_its_agency():
    late = load_script()
    times = np.array([0.0, 50.0, 100.0, 450.0, 500.0, 1000.0])
    who = np.array([0, 1, 0, 1, 0, 0])
    # agency 0 at 0, 100, 500, 1000: only 100 is within 300 s of the one before; agency 1's 450 is
    # 400 s after its own 50 (the other agency's 500 nearby does not count)
    assert late.followers(times, who, 300.0).tolist() == [False, False, True, False, False, False]


def test_a_find_nearby_is_another_article_of_the_agency_stored_before_it():
    late = load_script()
    published = np.array([0.0, 150.0, 380.0, 1000.0, 120.0, 0.0, 10.0])
    stored = np.array([100.0, 400.0, 400.0, 1100.0, 130.0, 50.0, 50.0])
    who = np.array([0, 0, 0, 0, 1, 2, 2])
    got = late.find_nearby(published, stored, who, 300.0, 60.0)
    # 150 and 380: agency 0 stored the article of 0 at 100, within [pub - 300, pub + 60]; the one of
    # 0 and of 1000 had nothing stored near; agency 1's 120 had only agency 0's find near; agency
    # 2's two were stored together (at 50, within reach of both), so neither had a find before its own
    assert got.tolist() == [False, True, True, False, False, False, False]


def test_policy_overrides_are_cadence_fields():
    late = load_script()
    assert late.parse_overrides("forecast_miss=0.05, recent_weight=0.1") == {
        "forecast_miss": 0.05,
        "recent_weight": 0.1,
    }
    assert late.parse_overrides("") == {}
    with pytest.raises(SystemExit, match="not CadencePolicy"):
        late.parse_overrides("no_such_field=1")


def test_a_small_run_prints_its_last_line(capsys):
    late = load_script()
    args = ["--articles", "40000", "--agencies", "20", "--days", "2", "--seeds", "1", "--budget-rps", "0.5"]
    assert late.main(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    m = LINE.match(lines[-1])
    assert m, lines[-1]
    assert int(m["late"]) >= max(int(m["fol"]), int(m["off"]), int(m["near"]))
    assert any(line.strip().startswith("followers ") for line in lines)
