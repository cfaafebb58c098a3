"""Helpers of the chart tests (dgb_dev.charts, dgb_dev.benchcharts, the benchmarks' ``--chart``):
synthetic data for each chart kind, in the shape the benchmarks pass, and a fixed machine so a
written SVG does not depend on the machine running the test."""

from __future__ import annotations

import numpy as np

from dgb.enrich import measure
from dgb_dev import benchcharts

MACHINE = {"cpus": 2, "cpu_model": "Test CPU", "memory_gib": 8.0, "load_average": [0.5, 0.4, 0.3]}
COMMAND = "scripts/bench_test.py --chart docs/benchmarks"


def curve(values, label: str) -> dict:
    v = np.asarray(values, dtype=float)
    return benchcharts.cdf(v) | {
        "label": label,
        "p50": round(float(np.percentile(v, 50)), 1),
        "p95": round(float(np.percentile(v, 95)), 1),
    }


def freshness_data(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    series = [curve(rng.gamma(2, 40, 3000), "learnt cadence"), curve(rng.uniform(0, 600, 3000), "fixed")]
    return {"days": 30.0, "budget_rps": 2.0, "agencies": 160, "series": series}


BANDS = [
    {"label": "< 3 h", "min_age_s": 0.0, "max_age_s": 10800.0},
    {"label": "< 2 d", "min_age_s": 0.0, "max_age_s": 172800.0},
    {"label": "3-30 d", "min_age_s": 259200.0, "max_age_s": 2592000.0},
]


def edit_detection_data(policies=("ours", "fixed"), seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    out = []
    for k, name in enumerate(policies):
        bands = [curve(rng.lognormal(6 + k + j, 1, 500), b["label"]) for j, b in enumerate(BANDS)]
        out.append({"name": name, "label": name, "bands": bands})
    return {"days": 30.0, "budget_rps": 2.0, "bands": BANDS, "policies": out}


def confusion_data(k: int = 6, seed: int = 0) -> dict:
    """``k`` codes; the last one only ours answered (its production row is empty)."""
    rng = np.random.default_rng(seed)
    codes = [f"{i:02d}" for i in range(1, k + 1)]
    counts = (rng.integers(0, 4, (k, k)) + 20 * np.eye(k, dtype=int)).tolist()
    counts[-1] = [0] * k
    return {
        "subset": "synthetic",
        "codes": codes,
        "themes": {c: f"theme {c}" for c in codes},
        "counts": counts,
        "agreement": 0.7,
    }


def reliability_data(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    series = []
    for label in ("whole articles", "excerpts"):
        conf = rng.uniform(0.2, 1.0, 800)
        ok = rng.random(800) < conf
        series.append(
            {
                "label": label,
                "n": 800,
                "ece": round(measure.expected_calibration_error(conf, ok), 4),
                "bins": [list(b) for b in measure.calibration_bins(conf, ok)],
            }
        )
    return {"subset": "synthetic", "bins": 10, "series": series}


def backlog_data(n: int = 200, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    stored = np.sort(rng.uniform(0, 5, n))
    stages = {"stored": stored, "enriched": stored + rng.uniform(5, 30, n)}
    stages["embedded"] = stages["enriched"] + rng.uniform(1, 20, n)
    stages["indexed"] = stages["embedded"][: n - 3] + 1.0  # 3 never indexed
    return {
        "n": n,
        "burst_at": "2026-01-01T00:00:00+00:00",
        "stages": {k: sorted(np.round(v, 2).tolist()) for k, v in stages.items()},
        "model_alone_s": 30.0,
        "pipeline_wall_s": 60.0,
    }


def realtime_data(minutes: int = 60, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "start": "2026-01-01 12:00 UTC",
        "minutes": minutes,
        "cadence": "learnt",
        "articles": 300000,
        "budget_rps": 2.0,
        "requests": {
            "window_s": 10,
            "rps": rng.uniform(1.4, 2.0, minutes * 6).round(1).tolist(),
            "max_rps_10s": 2.0,
        },
        "backlog": {
            "minutes": list(range(minutes + 1)),
            "stages": {s: rng.integers(0, 10, minutes + 1).tolist() for s in ("enrich", "embed", "index")},
        },
        "activity": {
            "scrape_runs": rng.integers(0, 2, minutes).tolist(),
            "integrity_checks": rng.integers(20, 40, minutes).tolist(),
        },
    }


DATA = {
    "freshness": freshness_data,
    "edit_detection": edit_detection_data,
    "confusion": confusion_data,
    "reliability": reliability_data,
    "backlog": backlog_data,
    "realtime": realtime_data,
}
