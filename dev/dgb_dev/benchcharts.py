"""What each benchmark draws with ``--chart DIR`` (issue 38): one function per chart, from the
JSON-serialisable data the benchmark collected to a figure of :func:`dgb_dev.charts.figure`.

A chart is ``(name, kind, data)``: :func:`save` draws ``data`` with ``CHARTS[kind]`` and writes
the SVG and the JSON (:func:`dgb_dev.charts.write`); the JSON names the kind, so :func:`redraw`
draws the same figure again from the JSON alone (``python -m dgb_dev.benchcharts FILE.json ...``
rewrites the SVGs from their JSON, which it leaves as it is). The helpers (:func:`cdf`) turn a
benchmark's arrays into the data; the benchmarks' own figures (p50, p95, ECE) are passed in as
they computed them, never recomputed here.

* ``freshness`` (``bench_scale.py``): publication -> scraped, CDF per scrape cadence;
* ``edit_detection`` (``bench_scale.py``): edit -> detection, CDF per age band and policy;
* ``confusion`` (``bench_classify.py``): production's level-1 theme against ours, row-normalised;
* ``reliability`` (``bench_classify.py``): accuracy against confidence per bin, ECE in the legend;
* ``backlog`` (``bench_backlog.py``): each stage's cumulative commits since the burst;
* ``realtime`` (``bench_realtime.py``): requests/s, backlog, scrape and integrity activity.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dgb_dev import charts

CDF_POINTS = 201  # quantiles 0, 0.5, ..., 100 %: p50 and p95 are points of the curve


def cdf(values: Sequence[float] | np.ndarray, points: int = CDF_POINTS, digits: int = 1) -> dict[str, Any]:
    """The empirical distribution as ``points`` evenly spaced quantiles (numpy's linear
    percentiles, as the benchmarks' own p50/p95): ``{"n": count, "quantiles": [...]}``."""
    v = np.asarray(values, dtype=float)
    q = np.percentile(v, np.linspace(0.0, 100.0, points)) if len(v) else np.zeros(0)
    return {"n": len(v), "quantiles": [round(float(x), digits) for x in q]}


def _share_axis(ax) -> None:
    ax.set_ylim(0, 1.0)
    ax.yaxis.set_major_formatter("{x:.0%}")


def _seconds(s: float | None) -> str:
    """A delay as the benchmarks print it: seconds, minutes, hours or days."""
    if s is None:
        return "-"
    if s < 300:
        return f"{s:.0f} s"
    if s < 2 * 3600:
        return f"{s / 60:.1f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def _curve(ax, series: dict, scale: float, color: str, style: str, label: str, floor: float = 0.0) -> None:
    """One CDF of :func:`cdf` (x divided by ``scale``) with its p50 and p95 marked."""
    qs = np.maximum(np.asarray(series["quantiles"], dtype=float) / scale, floor)
    if not len(qs):
        return
    ys = np.linspace(0.0, 1.0, len(qs))
    ax.plot(qs, ys, color=color, linestyle=style, label=label)
    for key, y, marker in (("p50", 0.5, "o"), ("p95", 0.95, "s")):
        if series.get(key) is not None:
            ax.plot([max(series[key] / scale, floor)], [y], marker=marker, color=color, linestyle="none")


def freshness(data: dict) -> Any:
    """Publication -> scraped of new articles, one CDF per cadence, p50 (circle) and p95 (square)."""
    fig, ax = charts.figure()
    for k, s in enumerate(data["series"]):
        p50, p95 = (f"{s[q]:.0f} s" if s[q] is not None else "-" for q in ("p50", "p95"))
        _curve(
            ax, s, 1.0, f"C{k}", "-" if k == 0 else "--", f"{s['label']}: p50 {p50}, p95 {p95} (n={s['n']:,})"
        )
    ax.set_title(
        "Freshness of the scrape cadence: publication → scraped of the new articles\n"
        f"{data['days']:g} simulated days, {data['agencies']} agencies, {data['budget_rps']:g} requests/s"
        " to the host (circle p50, square p95)"
    )
    ax.set_xlabel("publication → scraped (seconds)")
    ax.set_ylabel("new articles scraped within (cumulative share)")
    ax.set_xlim(left=0)
    _share_axis(ax)
    ax.legend(loc="lower right")
    return fig


def edit_detection(data: dict) -> Any:
    """Edit -> detection per age band (one panel each), one CDF per policy, minutes on a log axis
    (delays under 0.1 min drawn at 0.1)."""
    bands = data["bands"]
    fig, axes = charts.figure(1, len(bands), size=(11.0, 5.0), sharey=True, squeeze=False)
    for b, (ax, band) in enumerate(zip(axes[0], bands)):
        for k, policy in enumerate(data["policies"]):
            s = policy["bands"][b]
            label = f"{policy['label']}: p50 {_seconds(s['p50'])}, p95 {_seconds(s['p95'])} (n={s['n']:,})"
            _curve(ax, s, 60.0, f"C{k}", "-" if k == 0 else "--", label, floor=0.1)
        ax.set_xscale("log")
        ax.set_title(f"edits to articles {band['label']} old")
        ax.set_xlabel("edit → detection (minutes, log scale)")
        if ax.lines:  # below the panel: the curves fill it from left to right
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=7)
        else:
            ax.text(0.5, 0.5, "no edits in this band", transform=ax.transAxes, ha="center", color="0.4")
    axes[0][0].set_ylabel("edits detected within (cumulative share)")
    _share_axis(axes[0][0])
    fig.suptitle(
        f"Integrity: edit → detection by article age, {data['days']:g} simulated days,"
        f" {data['budget_rps']:g} requests/s shared with the scrapes (circle p50, square p95)",
        fontsize=10,
    )
    return fig


def confusion(data: dict) -> Any:
    """Level-1 confusion: rows production's theme, columns ours, each row normalised to 1."""
    codes = data["codes"]
    counts = np.asarray(data["counts"], dtype=float)
    rows = counts.sum(1, keepdims=True)
    share = np.divide(counts, rows, out=np.full_like(counts, np.nan), where=rows > 0)
    fig, ax = charts.figure(size=(8.5, 8.0))
    image = ax.imshow(np.ma.masked_invalid(share), cmap="Blues", vmin=0.0, vmax=1.0)
    ax.grid(False)
    for i, j in zip(*np.nonzero(np.nan_to_num(share) >= 0.05)):
        ax.text(
            j,
            i,
            f"{100 * share[i, j]:.0f}",
            ha="center",
            va="center",
            fontsize=6,
            color="white" if share[i, j] > 0.6 else "black",
        )
    ax.set_xticks(range(len(codes)), codes, rotation=90)
    ax.set_yticks(range(len(codes)), [f"{c} (n={int(n)})" for c, n in zip(codes, rows[:, 0])])
    ax.set_xlabel("our level-1 theme (out-of-fold)")
    ax.set_ylabel("production's level-1 theme (articles)")
    ax.set_title(
        f"Level-1 theme, production vs ours: {data['subset']}, n={int(counts.sum()):,},"
        f" agreement {data['agreement']:.3f}\n(% of each production row; cells under 5% unlabelled)"
    )
    fig.colorbar(
        image, ax=ax, shrink=0.7, label="share of the row (production's theme)"
    ).ax.yaxis.set_major_formatter("{x:.0%}")
    return fig


def reliability(data: dict) -> Any:
    """Reliability diagram: accuracy against mean confidence per bin, one line per input kind,
    the ECE in the legend; below, the share of articles in each bin."""
    fig, (ax, below) = charts.figure(2, 1, size=(7.0, 6.5), sharex=True, height_ratios=[3, 1])
    ax.plot([0, 1], [0, 1], color="0.5", linestyle=":", label="perfectly calibrated")
    width = 1.0 / (data["bins"] * (len(data["series"]) + 1))
    for k, s in enumerate(data["series"]):
        lo, _, n, conf, acc = np.asarray(s["bins"], dtype=float).reshape(-1, 5).T
        ax.plot(
            conf, acc, marker="o", color=f"C{k}", label=f"{s['label']}: ECE {s['ece']:.3f} (n={s['n']:,})"
        )
        below.bar(
            lo + width * (k + 0.5),
            n / max(1, s["n"]),
            width=width,
            align="edge",
            color=f"C{k}",
            label=s["label"],
        )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("agreement with production (share)")
    ax.set_title(f"Calibration of theme_confidence: {data['subset']}\n({data['bins']} equal-width bins)")
    ax.legend(loc="upper left")
    below.set_xlabel("theme_confidence (calibrated, out-of-fold), mean of the bin")
    below.set_ylabel("articles (share)")
    below.yaxis.set_major_formatter("{x:.0%}")
    return fig


def backlog(data: dict) -> Any:
    """Each stage's cumulative committed articles over the seconds since the burst."""
    fig, ax = charts.figure()
    for k, (stage, times) in enumerate(data["stages"].items()):
        t = np.sort(np.asarray(times, dtype=float))
        last = f", last at {t[-1]:.1f} s" if len(t) else ""
        ax.step(
            np.concatenate([[0.0], t]),
            np.arange(len(t) + 1),
            where="post",
            color=f"C{k}",
            label=f"{stage}: {len(t):,}{last}",
        )
    if data.get("model_alone_s") is not None:
        ax.axvline(
            data["model_alone_s"],
            color="0.4",
            linestyle=":",
            label=f"the model work alone: {data['model_alone_s']:.1f} s",
        )
    ax.set_xlim(left=0)
    ax.set_ylim(0, data["n"] * 1.02)
    ax.set_xlabel("seconds since the burst (the first article stored)")
    ax.set_ylabel("articles committed (cumulative)")
    ax.set_title(f"A backlog of {data['n']:,} articles: each stage's commits through the running stack")
    ax.legend(loc="lower right")
    return fig


def realtime(data: dict) -> Any:
    """The real-time hour: requests/s per 10-s window, pending backlog per stage, scrape DAG runs
    and integrity checks per minute; minutes since the start of the run on every panel."""
    fig, axes = charts.figure(4, 1, size=(9.0, 9.0), sharex=True, height_ratios=[2, 2, 1, 1])
    req = data["requests"]
    window = req["window_s"]
    rps = np.asarray(req["rps"], dtype=float)
    axes[0].step(
        np.arange(len(rps)) * window / 60,
        rps,
        where="post",
        color="C0",
        linewidth=0.8,
        label=f"requests/s per {window:g}-s window (max over any 10 s: {req['max_rps_10s']:.2f})",
    )
    if data.get("budget_rps") is not None:
        axes[0].axhline(
            data["budget_rps"], color="C3", linestyle="--", label=f"budget {data['budget_rps']:g}/s"
        )
    axes[0].set_ylabel("requests/s")
    axes[0].set_ylim(0, 1.2 * max([data.get("budget_rps") or 0.0, *rps, 0.1]))
    axes[0].legend(loc="lower right")
    minutes = data["backlog"]["minutes"]
    for k, (stage, counts) in enumerate(data["backlog"]["stages"].items()):
        axes[1].plot(minutes, counts, color=f"C{k}", label=stage)
    axes[1].set_ylabel("pending articles")
    axes[1].set_ylim(bottom=0)
    axes[1].legend(loc="upper right", title="backlog per stage", title_fontsize=8)
    for ax, key, label, color in (
        (axes[2], "scrape_runs", "scrape DAG runs / min", "C2"),
        (axes[3], "integrity_checks", "integrity checks / min", "C4"),
    ):
        counts = data["activity"][key]
        ax.bar(np.arange(len(counts)) + 0.5, counts, width=0.9, color=color)
        ax.set_ylabel(label)
        ax.yaxis.get_major_locator().set_params(integer=True)
    for k, fault in enumerate(data.get("faults") or []):  # the chaos soak's faults, on every panel
        for ax in axes:
            ax.axvspan(
                fault["start_min"],
                max(fault["end_min"], fault["start_min"] + 0.2),
                color="C3",
                alpha=0.15,
                label="fault" if (k == 0 and ax is axes[1]) else None,
            )
        axes[1].annotate(fault["fault"], (fault["start_min"], 0), fontsize=6, rotation=90, va="bottom")
    if data.get("faults"):
        axes[1].legend(loc="upper right", title="backlog per stage", title_fontsize=8)
    axes[3].set_xlabel("minutes since the start of the measured run")
    axes[3].set_xlim(0, data["minutes"])
    axes[0].set_title(
        f"The whole stack in real time: {data['minutes']:g} minutes, {data['articles']:,} articles,"
        f" {data['cadence']} cadence, from {data['start']}"
    )
    return fig


CHARTS: dict[str, Callable[[dict], Any]] = {
    "freshness": freshness,
    "edit_detection": edit_detection,
    "confusion": confusion,
    "reliability": reliability,
    "backlog": backlog,
    "realtime": realtime,
}


def save(directory: str | Path, name: str, kind: str, data: dict, command: str) -> tuple[Path, Path]:
    """Draw ``data`` as chart ``kind`` and write ``<directory>/<name>.svg`` and ``.json``."""
    return charts.write(directory, name, CHARTS[kind](data), data, command, chart=kind)


def redraw(path: str | Path) -> tuple[Any, dict]:
    """The figure of a chart's JSON, drawn again from it alone, and the JSON."""
    doc = charts.read(path)
    return CHARTS[doc["chart"]](doc["data"]), doc


def redraw_svg(path: str | Path) -> Path:
    """Draw the SVG beside a chart's JSON again from the JSON (with its command and machine), the
    JSON untouched: a chart restyled without running its benchmark again. Returns the SVG's path."""
    fig, doc = redraw(path)
    return charts.write_svg(Path(path).with_suffix(".svg"), fig, doc["command"], doc["machine"])


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dgb_dev.benchcharts docs/benchmarks/*.json``: each SVG drawn again from its JSON."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("json", nargs="+", type=Path, help="a chart's JSON, as --chart DIR wrote it")
    for path in ap.parse_args(argv).json:
        print(f"chart: {redraw_svg(path)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
