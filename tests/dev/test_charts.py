"""dgb_dev.charts (a benchmark's chart written as SVG + JSON) and dgb_dev.benchcharts (what each
benchmark draws), on synthetic data: the SVG is byte-identical for the same data, the JSON gives
the data and the command back and is enough to draw the chart again, and each chart draws the
series it should. No benchmark runs here."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from dgb_dev import benchcharts, charts
from tests.support.charts import COMMAND, DATA, MACHINE, backlog_data, confusion_data, edit_detection_data

REPO = Path(__file__).resolve().parents[2]


def _simple(data: dict):
    fig, ax = charts.figure()
    ax.plot(data["x"], data["y"], label="a line")
    ax.set_title("a title")
    ax.set_xlabel("x (s)")
    ax.set_ylabel("y (articles)")
    ax.legend()
    return fig


def test_the_same_data_twice_writes_byte_identical_svg(tmp_path):
    data = {"x": [0, 1, 2, 3], "y": [1.5, 2.5, 2.0, 4.0], "note": "ç é →"}
    a = charts.write(tmp_path / "a", "demo", _simple(data), data, COMMAND, machine_info=MACHINE)
    b = charts.write(tmp_path / "b", "demo", _simple(data), data, COMMAND, machine_info=MACHINE)
    assert [p.name for p in a] == ["demo.svg", "demo.json"]
    svg = a[0].read_bytes()
    assert svg == b[0].read_bytes()
    assert b"<dc:date>" not in svg  # metadata={"Date": None}
    other = {**data, "y": [1.5, 2.5, 2.0, 4.5]}
    c = charts.write(tmp_path / "c", "demo", _simple(other), other, COMMAND, machine_info=MACHINE)
    assert c[0].read_bytes() != svg


def test_the_svg_footer_names_the_command_and_the_machine(tmp_path):
    data = {"x": [0, 1], "y": [0, 1]}
    fig = _simple(data)
    svg, _ = charts.write(tmp_path, "demo", fig, data, COMMAND, machine_info=MACHINE)
    text = svg.read_text(encoding="utf-8")
    assert f'id="{charts.FOOTER_GID}"' in text
    # glyphs are paths; matplotlib keeps each text as an XML comment beside them ("--" as "- -")
    assert f"<!-- $ {COMMAND}   ·   2 × Test CPU, 8 GiB RAM -->".replace("--c", "- -c") in text
    charts.write(tmp_path, "demo", fig, data, COMMAND, machine_info=MACHINE)  # written again: one footer
    assert [t.get_gid() for t in fig.texts].count(charts.FOOTER_GID) == 1


def test_the_json_round_trips_the_data_and_records_where_it_came_from(tmp_path):
    data = {"x": [0.25, 1e-9, 3], "y": [1, None, 2], "label": "água", "nested": {"a": [[1, 2], [3, 4]]}}
    _, path = charts.write(tmp_path, "demo", _simple({"x": [0, 1], "y": [0, 1]}), data, COMMAND, chart="x")
    doc = charts.read(path)
    assert doc["data"] == data
    assert doc["command"] == COMMAND and doc["name"] == "demo" and doc["chart"] == "x"
    m = doc["machine"]
    assert m["cpus"] >= 1 and m["cpu_model"] and len(m["load_average"]) == 3
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", doc["date"])
    assert doc["git"]["commit"] is None or re.fullmatch(r"[0-9a-f]{40}", doc["git"]["commit"])
    assert doc["matplotlib"]
    assert json.loads(path.read_text(encoding="utf-8")) == doc


def test_data_that_is_not_plain_json_is_refused_before_anything_is_written(tmp_path):
    fig = _simple({"x": [0, 1], "y": [0, 1]})
    with pytest.raises(ValueError):
        charts.write(tmp_path, "demo", fig, {"p95": float("nan")}, COMMAND)
    with pytest.raises(TypeError):
        charts.write(tmp_path, "demo", fig, {"x": np.arange(3)}, COMMAND)
    with pytest.raises(ValueError):
        charts.write(tmp_path, "../demo", fig, {}, COMMAND)
    assert list(tmp_path.iterdir()) == []


def test_the_machine_comes_from_proc(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: Some CPU @ 2GHz\n\nprocessor\t: 1\nmodel name\t: Some CPU @ 2GHz\n"
    )
    assert charts._cpuinfo(cpuinfo) == (2, "Some CPU @ 2GHz")
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24684544 kB\nMemFree: 1 kB\n")
    assert charts._memory_gib(meminfo) == 23.5
    assert charts._cpuinfo(tmp_path / "missing")[1] == "unknown CPU"
    assert charts.machine_line(MACHINE) == "2 × Test CPU, 8 GiB RAM"


def test_the_command_is_shown_from_the_repository_root():
    script = charts.REPO_ROOT / "scripts" / "bench_scale.py"
    assert charts.command_line(script, ["--days", "30", "--chart", "docs/a b"]) == (
        "scripts/bench_scale.py --days 30 --chart 'docs/a b'"
    )


def test_matplotlib_is_imported_by_the_charts_module_only():
    assert "matplotlib" in sys.modules  # this module imported dgb_dev.charts
    importing = re.compile(r"^\s*(import|from) matplotlib\b", re.MULTILINE)
    sources = [p for d in ("include", "plugins", "dev", "scripts", "dags") for p in (REPO / d).rglob("*.py")]
    assert [p.relative_to(REPO).as_posix() for p in sources if importing.search(p.read_text("utf-8"))] == [
        "dev/dgb_dev/charts.py"
    ]


def test_cdf_keeps_the_percentiles_the_benchmarks_print():
    values = np.random.default_rng(1).exponential(60, 1001)
    c = benchcharts.cdf(values)
    assert c["n"] == 1001 and len(c["quantiles"]) == benchcharts.CDF_POINTS
    assert c["quantiles"][100] == round(float(np.percentile(values, 50)), 1)
    assert c["quantiles"][190] == round(float(np.percentile(values, 95)), 1)
    assert c["quantiles"] == sorted(c["quantiles"])
    assert benchcharts.cdf([]) == {"n": 0, "quantiles": []}


@pytest.mark.parametrize("kind", sorted(benchcharts.CHARTS))
def test_a_chart_drawn_again_from_its_json_is_the_same_svg(kind, tmp_path):
    data = DATA[kind]()
    svg, path = benchcharts.save(tmp_path, kind, kind, data, COMMAND)
    fig, doc = benchcharts.redraw(path)
    assert doc["chart"] == kind and doc["data"] == data
    first, record = svg.read_bytes(), path.read_bytes()
    svg.unlink()
    assert benchcharts.main([str(path)]) == 0  # python -m dgb_dev.benchcharts FILE.json
    assert svg.read_bytes() == first
    assert path.read_bytes() == record  # the JSON (its date, machine, commit) is left as it was


def _labelled(ax) -> bool:
    return bool(ax.get_xlabel() or ax.get_ylabel())


def test_freshness_draws_one_curve_and_its_p50_p95_per_cadence():
    fig = benchcharts.freshness(DATA["freshness"]())
    [ax] = fig.axes
    assert len(ax.lines) == 2 * 3  # per cadence: the curve, the p50 point, the p95 point
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(legend) == 2 and legend[0].startswith("learnt cadence: p50 ") and "p95" in legend[0]
    assert ax.get_title() and "(seconds)" in ax.get_xlabel()


@pytest.mark.parametrize("policies", [("ours", "fixed"), ("ours",)])
def test_edit_detection_draws_a_panel_per_age_band_and_a_curve_per_policy(policies):
    fig = benchcharts.edit_detection(edit_detection_data(policies))
    assert len(fig.axes) == 3
    for ax in fig.axes:
        assert len(ax.lines) == 3 * len(policies)
        assert len(ax.get_legend().get_texts()) == len(policies)
        assert ax.get_xscale() == "log" and "(minutes" in ax.get_xlabel()
    assert [ax.get_title() for ax in fig.axes] == [
        "edits to articles < 3 h old",
        "edits to articles < 2 d old",
        "edits to articles 3-30 d old",
    ]


def test_confusion_is_normalised_per_production_row():
    data = confusion_data(k=6)
    fig = benchcharts.confusion(data)
    ax = fig.axes[0]
    [image] = ax.get_images()
    shown = image.get_array()
    assert shown.shape == (6, 6)
    assert np.allclose(shown[:5].sum(1), 1.0)
    assert shown.mask[5].all()  # a row production never used is left blank, not divided by zero
    assert [t.get_text() for t in ax.get_xticklabels()] == data["codes"]
    assert ax.get_yticklabels()[0].get_text().startswith("01 (n=")


def test_reliability_draws_the_diagonal_and_one_line_and_bar_set_per_input():
    data = DATA["reliability"]()
    fig = benchcharts.reliability(data)
    ax, below = fig.axes
    assert len(ax.lines) == 1 + 2
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[1] == f"whole articles: ECE {data['series'][0]['ece']:.3f} (n=800)"
    assert len(below.patches) == sum(len(s["bins"]) for s in data["series"])
    heights = [p.get_height() for p in below.patches]
    assert sum(heights) == pytest.approx(2.0)  # each input's shares sum to 1


def test_backlog_draws_each_stage_cumulatively():
    data = backlog_data(n=200)
    fig = benchcharts.backlog(data)
    [ax] = fig.axes
    assert len(ax.lines) == 4 + 1  # four stages and the model work alone
    heights = {line.get_label().split(":")[0]: line.get_ydata()[-1] for line in ax.lines[:4]}
    assert heights == {"stored": 200, "enriched": 200, "embedded": 200, "indexed": 197}
    assert "seconds since the burst" in ax.get_xlabel()


def test_realtime_draws_requests_backlog_and_activity_on_one_time_axis():
    data = DATA["realtime"](minutes=60)
    fig = benchcharts.realtime(data)
    requests, backlog, scrapes, checks = fig.axes
    assert len(requests.lines) == 2  # requests/s and the budget
    assert len(requests.lines[0].get_xdata()) == 360
    assert len(backlog.lines) == 3
    assert len(scrapes.patches) == 60 and len(checks.patches) == 60
    assert [p.get_height() for p in checks.patches] == data["activity"]["integrity_checks"]
    assert checks.get_xlim() == (0.0, 60.0)
    assert all(_labelled(ax) for ax in fig.axes)


def test_the_chaos_soak_marks_each_fault_on_every_panel():
    data = DATA["realtime"](minutes=60)
    data["faults"] = [
        {"fault": "kill_scheduler", "start_min": 10.0, "end_min": 10.5},
        {"fault": "typesense_down", "start_min": 30.0, "end_min": 35.0},
    ]
    fig = benchcharts.realtime(data)
    requests, backlog, scrapes, checks = fig.axes
    spans = [p for p in requests.patches if p.get_facecolor()[3] < 1]  # the translucent fault spans
    assert len(spans) == 2
    assert any(t.get_text() == "typesense_down" for t in backlog.texts)
    assert len(scrapes.patches) == 60 + 2 and len(checks.patches) == 60 + 2  # the bars, then the spans
