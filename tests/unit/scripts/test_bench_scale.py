"""scripts/bench_scale.py on a small corpus: the contract's last two lines, and sane figures (the
budget holds, the fixed tiers are compared at the same budget, delays are non-negative, the learnt
scrape cadence is compared with the fixed 10 minutes)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
LINE = re.compile(
    r"^scale: max_rps=(?P<rps>[0-9.]+) p95_delay_3h_min=(?P<d3h>[0-9.]+) p95_delay_2d_min=(?P<d2d>[0-9.]+)"
    r" p95_delay_30d_h=(?P<d30>[0-9.]+|nan) max_unchecked_days=(?P<gap>[0-9.]+)"
    r" mean_delay_vs_fixed=(?P<ratio>[0-9.]+)$"
)
FRESHNESS = re.compile(
    r"^freshness: p50_s=(?P<p50>[0-9]+) p95_s=(?P<p95>[0-9]+) listing_requests_per_day=(?P<ours>[0-9]+)"
    r" fixed_cadence_listing_requests_per_day=(?P<fixed>[0-9]+)$"
)


def load_script():
    spec = importlib.util.spec_from_file_location("bench_scale", REPO / "scripts" / "bench_scale.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_scale"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_small_run_prints_the_contract_line(capsys):
    bench = load_script()
    args = ["--articles", "4000", "--days", "2", "--budget-rps", "0.5", "--agencies-listing", "20"]
    assert bench.main(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    m = LINE.match(lines[-2])
    assert m, lines[-2]
    f = FRESHNESS.match(lines[-1])
    assert f, lines[-1]
    assert 0 < int(f["p50"]) <= int(f["p95"])
    assert int(f["fixed"]) == 20 * 144  # 20 agencies, each every 10 minutes
    assert int(f["ours"]) > 0
    assert float(m["rps"]) <= 0.5  # listings and checks together within the host budget
    assert float(m["d3h"]) > 0 and float(m["d2d"]) > 0  # edits to young articles were detected
    assert 0 < float(m["gap"]) <= 9.01  # a last check within the 7 warm-start days, then 2 days
    assert float(m["ratio"]) > 0
    assert any(line.startswith("fixed: ") for line in lines) and any(
        line.startswith("ours: ") for line in lines
    )
    table = [line for line in lines if line.startswith(("< 3 h", "> 90 days"))]
    assert len(table) == 2


def test_fixed_tier_intervals_follow_the_seed_table():
    bench = load_script()
    import numpy as np

    day = 86400.0
    ages = np.array([0.5, 2.9, 3.0, 7.9, 8.0, 30.9, 31.0, 90.9, 91.0, 800.0]) * day
    assert (bench.fixed_intervals(ages) / 60).tolist() == [10, 10, 60, 60, 360, 360, 1440, 1440, 10080, 10080]
