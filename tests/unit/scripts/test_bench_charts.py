"""The benchmarks' ``--chart DIR`` glue (scripts/bench_scale.py, bench_classify.py, bench_backlog.py,
realtime_results.py of bench_realtime.py): from the values each script already computed to the
chart's data and files, on synthetic values. No benchmark runs here (bench_backlog and
bench_realtime need the running stack)."""

from __future__ import annotations

import math
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from dgb.enrich import measure
from dgb_dev import benchcharts, charts
from tests.support import charts as support

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))

import bench_backlog  # noqa: E402
import bench_classify  # noqa: E402
import bench_scale  # noqa: E402
import realtime_results  # noqa: E402


def _scale_results(rng, policies):
    """What bench_scale.main holds after its simulations: per policy (store, max rps, delays, ages)."""
    out = {}
    for name in policies:
        age = rng.uniform(0, 40 * 86400, 4000)
        out[name] = (None, 1.9, rng.exponential(1800, 4000), age)
    return out


@pytest.mark.parametrize("policies", [("ours", "fixed"), ("ours",)])
def test_bench_scale_charts_freshness_and_edit_detection_by_the_scale_line_bands(tmp_path, capsys, policies):
    rng = np.random.default_rng(3)
    fresh = {mode: SimpleNamespace(lags=rng.exponential(90, 2000)) for mode in ("learnt", "fixed")}
    results = _scale_results(rng, policies)
    args = SimpleNamespace(chart=tmp_path, days=30.0, budget_rps=2.0, agencies_listing=160)
    bench_scale.write_charts(args, ["--days", "30", "--chart", str(tmp_path)], fresh, results)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "scale-edit-detection.json",
        "scale-edit-detection.svg",
        "scale-freshness.json",
        "scale-freshness.svg",
    ]
    doc = charts.read(tmp_path / "scale-freshness.json")
    assert doc["command"] == f"scripts/bench_scale.py --days 30 --chart {tmp_path}"
    learnt = doc["data"]["series"][0]
    assert learnt["p95"] == round(bench_scale.pct(fresh["learnt"].lags, 95), 1)  # the script's own figure
    assert learnt["n"] == 2000 and len(learnt["quantiles"]) == benchcharts.CDF_POINTS
    edits = charts.read(tmp_path / "scale-edit-detection.json")["data"]
    assert [b["label"] for b in edits["bands"]] == ["< 3 h", "< 2 d", "3-30 d"]
    assert [p["name"] for p in edits["policies"]] == list(policies)
    _, _, d, age = results["ours"]
    in_2d = d[age < 2 * 86400]
    assert edits["policies"][0]["bands"][1]["n"] == len(in_2d)
    assert edits["policies"][0]["bands"][1]["p95"] == round(bench_scale.pct(in_2d, 95), 1)
    assert capsys.readouterr().out.count("chart: ") == 4


def test_bench_scale_chart_of_a_band_without_edits_has_no_percentiles(tmp_path):
    rng = np.random.default_rng(4)
    fresh = {mode: SimpleNamespace(lags=rng.exponential(90, 50)) for mode in ("learnt", "fixed")}
    results = {"ours": (None, 1.0, np.array([60.0, 120.0]), np.array([100.0, 200.0]))}  # no 3-30 d edit
    args = SimpleNamespace(chart=tmp_path, days=1.0, budget_rps=0.5, agencies_listing=20)
    bench_scale.write_charts(args, [], fresh, results)
    band = charts.read(tmp_path / "scale-edit-detection.json")["data"]["policies"][0]["bands"][2]
    assert band == {"n": 0, "quantiles": [], "label": "3-30 d", "p50": None, "p95": None}


def test_bench_classify_charts_the_confusion_and_the_calibration_it_measured(tmp_path):
    rng = np.random.default_rng(5)
    codes = ["01", "02", "03", "05"]
    gold = rng.choice(codes + [""], 300)
    ours = np.where(rng.random(300) < 0.7, gold, rng.choice(codes, 300))
    ours = np.where(ours == "", "02", ours)
    bench_classify.confusion_chart(tmp_path, "scripts/bench_classify.py --chart x", gold, ours)
    data = charts.read(tmp_path / "classify-confusion.json")["data"]
    assert data["codes"] == ["01", "02", "03", "05", "none"]  # production's empty label shown as "none"
    counts = np.array(data["counts"])
    assert counts.sum() == 300 and np.trace(counts) == int((gold == ours).sum())
    assert data["agreement"] == round(float((gold == ours).mean()), 4)
    assert data["themes"]["none"] == "outside the tree"

    n = 400
    conf = rng.uniform(0.1, 1.0, 2 * n)
    ok = rng.random(2 * n) < conf
    bench_classify.calibration_chart(tmp_path, "scripts/bench_classify.py --chart x", conf, ok, n)
    series = charts.read(tmp_path / "classify-calibration.json")["data"]["series"]
    assert [s["label"] for s in series] == ["whole articles", "excerpts"]
    assert series[1]["ece"] == round(measure.expected_calibration_error(conf[n:], ok[n:]), 4)
    assert sum(b[2] for b in series[0]["bins"]) == n


def test_calibration_bins_are_the_bins_the_calibration_error_sums():
    rng = np.random.default_rng(6)
    conf = rng.uniform(0.0, 1.0, 1000)
    ok = rng.random(1000) < conf
    bins = measure.calibration_bins(conf, ok)
    assert sum(b[2] for b in bins) == 1000
    ece = sum(k * abs(acc - c) for _, _, k, c, acc in bins) / 1000
    assert ece == pytest.approx(measure.expected_calibration_error(conf, ok), abs=1e-12)


def test_bench_backlog_chart_data_from_the_stage_timestamps():
    burst = datetime(2026, 3, 1, 12, tzinfo=UTC)

    def at(s):
        return None if s is None else burst + timedelta(seconds=s)

    rows = [tuple(at(s) for s in r) for r in [(0, 5, 9, 10), (0.5, 7.25, None, None), (1, None, None, None)]]
    data = bench_backlog.stage_chart_data(3, rows, model_s=4.0, pipeline_s=12.0)
    assert data["burst_at"] == burst.isoformat()
    assert data["stages"] == {
        "stored": [0.0, 0.5, 1.0],
        "enriched": [5.0, 7.25],
        "embedded": [9.0],
        "indexed": [10.0],
    }
    fig = benchcharts.backlog(data)
    assert [line.get_ydata()[-1] for line in fig.axes[0].lines[:4]] == [3, 2, 1, 1]
    assert bench_backlog.stage_chart_data(0, [], 1.0, 1.0)["stages"]["indexed"] == []


def test_realtime_requests_per_window_from_the_sites_log():
    start = datetime.fromtimestamp(1_000_000, UTC)
    stop = start + timedelta(seconds=35)
    log = {"per_second": [[999_999, 9], [1_000_000, 2], [1_000_009, 1], [1_000_010, 20], [1_000_035, 9]]}
    assert realtime_results.request_windows(log, start, stop) == [
        0.3,
        2.0,
        0.0,
    ]  # the last 5 s: no whole window
    assert math.isclose(sum(realtime_results.request_windows(log, start, stop, 5)) * 5, 23)


def _keys(value):
    """The nested dict keys of a chart's data (lists by their first item): its shape."""
    if isinstance(value, dict):
        return {k: _keys(v) for k, v in value.items()}
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [_keys(value[0])]
    return None


def test_the_chart_tests_synthetic_data_has_the_shape_the_scripts_write(tmp_path):
    """tests/dev/test_charts.py draws tests.support.charts' data: the same shape as the scripts'."""
    rng = np.random.default_rng(7)
    fresh = {mode: SimpleNamespace(lags=rng.exponential(90, 200)) for mode in ("learnt", "fixed")}
    args = SimpleNamespace(chart=tmp_path, days=30.0, budget_rps=2.0, agencies_listing=160)
    bench_scale.write_charts(args, [], fresh, _scale_results(rng, ("ours", "fixed")))
    gold = rng.choice(["01", "02"], 50)
    bench_classify.confusion_chart(tmp_path, "x", gold, gold)
    conf = rng.uniform(0, 1, 100)
    bench_classify.calibration_chart(tmp_path, "x", conf, conf > 0.5, 50)
    written = {
        "freshness": "scale-freshness",
        "edit_detection": "scale-edit-detection",
        "confusion": "classify-confusion",
        "reliability": "classify-calibration",
    }
    for kind, name in written.items():
        data = charts.read(tmp_path / f"{name}.json")["data"]
        synthetic = support.DATA[kind]()
        if kind == "confusion":  # theme names keyed by code
            data["themes"], synthetic["themes"] = {}, {}
        assert _keys(data) == _keys(synthetic), kind
    rows = [(datetime(2026, 1, 1, tzinfo=UTC),) * 4]
    assert _keys(bench_backlog.stage_chart_data(1, rows, 1.0, 2.0)) == _keys(support.backlog_data())
