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
    r" mean_delay_vs_fixed=(?P<ratio>[0-9.]+) office_p95_delay_3h_min=(?P<o3h>[0-9.]+|nan)"
    r" office_p95_delay_2d_min=(?P<o2d>[0-9.]+|nan) office_p95_delay_30d_h=(?P<o30>[0-9.]+|nan)$"
)
FRESHNESS = re.compile(
    r"^freshness: p50_s=(?P<p50>[0-9]+) p95_s=(?P<p95>[0-9]+) listing_requests_per_day=(?P<ours>[0-9]+)"
    r" fixed_cadence_listing_requests_per_day=(?P<fixed>[0-9]+) seeds=(?P<seeds>[0-9]+)"
    r" p50_s_range=(?P<p50lo>[0-9]+)-(?P<p50hi>[0-9]+) p95_s_range=(?P<p95lo>[0-9]+)-(?P<p95hi>[0-9]+)"
    r" listing_requests_per_day_range=[0-9]+-[0-9]+ office_p50_s=[0-9]+ office_p95_s=(?P<op95>[0-9]+)"
    r" office_p95_s_range=[0-9]+-[0-9]+ fixed_p95_s=[0-9]+$"
)


def load_script():
    spec = importlib.util.spec_from_file_location("bench_scale", REPO / "scripts" / "bench_scale.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_scale"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_small_run_prints_the_contract_line(capsys):
    bench = load_script()
    args = [
        "--articles",
        "40000",
        "--days",
        "2",
        "--budget-rps",
        "0.5",
        "--agencies-listing",
        "20",
        "--seeds",
        "2",
    ]
    assert bench.main(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    m = LINE.match(lines[-2])
    assert m, lines[-2]
    f = FRESHNESS.match(lines[-1])
    assert f, lines[-1]
    assert 0 < int(f["p50"]) <= int(f["p95"])
    assert int(f["seeds"]) == 2 and int(f["p95lo"]) <= int(f["p95"]) <= int(f["p95hi"])
    assert int(f["p50lo"]) <= int(f["p50"]) <= int(f["p50hi"])
    # 20 agencies, each every 10 minutes, and the retries of the 429/503 answers
    assert 20 * 144 <= int(f["fixed"]) <= 20 * 144 * 1.05
    assert int(f["ours"]) > 0
    assert float(m["rps"]) <= 0.5  # listings and checks together within the host budget
    assert any(line.startswith("publication model") for line in lines)
    assert sum(line.startswith("scrape seed ") for line in lines) == 2 * 2  # each seed, both cadences
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
