"""Writing a benchmark's chart: ``<dir>/<name>.svg`` and ``<dir>/<name>.json`` (issue 38).

The one module that imports matplotlib; a benchmark imports it only when asked to chart
(``--chart DIR``), so the benchmarks run without it. What each benchmark draws is
:mod:`dgb_dev.benchcharts`; this module gives it a figure (:func:`figure`) and writes the result
(:func:`write`):

* the SVG is deterministic for the same figure: matplotlib's style defaults (no matplotlibrc of the
  machine), a fixed ``svg.hashsalt`` for the ids, no date in the metadata, glyphs as paths (the
  fonts matplotlib ships); its footer names the command and the machine (CPUs, memory), nothing that
  changes from one run to the next;
* the JSON holds the data the chart plots, the command, the machine (CPU count and model from
  /proc/cpuinfo, memory, the load average when written), the date and the checkout's git commit:
  enough to redraw it (:func:`dgb_dev.benchcharts.redraw`) and to tell where it came from.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.style
from matplotlib.figure import Figure

from dgb.config import REPO_ROOT

HASH_SALT = "dgb-pipeline"  # rcParams["svg.hashsalt"]: the SVG's ids depend on the content alone
STYLE = {
    "svg.fonttype": "path",
    "svg.hashsalt": HASH_SALT,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
}
# no display, no pyplot: the Agg backend; the style defaults, not this machine's matplotlibrc, so
# the same data draws the same SVG anywhere
matplotlib.use("Agg")
matplotlib.style.use(["default", STYLE])

FOOTER_IN = 0.25  # inches kept free at the bottom of every figure for the footer line
FOOTER_GID = "dgb-footer"


def figure(nrows: int = 1, ncols: int = 1, *, size: tuple[float, float] = (8.0, 4.5), **subplots) -> tuple:
    """A new figure (constrained layout, room left for the footer) and its axes, as
    :meth:`matplotlib.figure.Figure.subplots` returns them. No pyplot: nothing global to close."""
    fig = Figure(figsize=size, layout="constrained")
    fig.get_layout_engine().set(rect=(0.0, FOOTER_IN / size[1], 1.0, 1.0 - FOOTER_IN / size[1]))
    return fig, fig.subplots(nrows, ncols, **subplots)


def _cpuinfo(path: Path = Path("/proc/cpuinfo")) -> tuple[int, str]:
    """(processors, model name) from /proc/cpuinfo; the CPU count Python sees and "unknown CPU"
    where the file or the field is missing."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    count = sum(1 for line in lines if line.split(":")[0].strip() == "processor")
    models = [line.split(":", 1)[1].strip() for line in lines if line.split(":")[0].strip() == "model name"]
    return count or (os.cpu_count() or 0), (models[0] if models else "unknown CPU")


def _memory_gib(path: Path = Path("/proc/meminfo")) -> float | None:
    try:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def machine() -> dict[str, Any]:
    """This machine now: CPU count and model, memory, load average (1, 5, 15 min)."""
    cpus, model = _cpuinfo()
    return {
        "cpus": cpus,
        "cpu_model": model,
        "memory_gib": _memory_gib(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def machine_line(m: dict[str, Any]) -> str:
    """The machine as the footer names it: what does not change between runs (no load average)."""
    memory = f", {m['memory_gib']:g} GiB RAM" if m.get("memory_gib") else ""
    return f"{m['cpus']} × {m['cpu_model']}{memory}"


def git_commit(repo: Path = REPO_ROOT) -> dict[str, Any]:
    """The checkout's commit, and whether tracked files differ from it (None: not a git checkout)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def command_line(script: str | Path, argv: Sequence[str]) -> str:
    """The command as run from the repository's root: the script's path and its arguments."""
    path = Path(script).resolve()
    try:
        shown = path.relative_to(REPO_ROOT)
    except ValueError:
        shown = path
    return shlex.join([str(shown), *argv])


def _footer(fig: Figure, command: str, m: dict[str, Any]) -> None:
    for text in [t for t in fig.texts if t.get_gid() == FOOTER_GID]:  # written before: replaced
        text.remove()
    width = max(40, int(fig.get_figwidth() * 72 / 4.2))  # characters of 7 pt that fit the width
    line = f"$ {command}   ·   {machine_line(m)}"
    line = line if len(line) <= width else line[: width - 2] + " …"  # the JSON has all of it
    fig.text(0.01, 0.012, line, fontsize=7, color="0.35", ha="left", va="bottom", gid=FOOTER_GID)


def write_svg(path: str | Path, fig: Figure, command: str, m: dict[str, Any]) -> Path:
    """The SVG alone, with the footer naming ``command`` and the machine ``m`` (:func:`write` calls
    it; :func:`dgb_dev.benchcharts.redraw_svg` too, to draw a chart again from its JSON)."""
    _footer(fig, command, m)
    with matplotlib.rc_context({"svg.hashsalt": HASH_SALT, "svg.fonttype": "path"}):
        fig.savefig(path, format="svg", metadata={"Date": None})
    return Path(path)


def write(
    directory: str | Path,
    name: str,
    fig: Figure,
    data: Any,
    command: str,
    *,
    chart: str | None = None,
    machine_info: dict[str, Any] | None = None,
) -> tuple[Path, Path]:
    """Write ``fig`` as ``<directory>/<name>.svg`` (with the footer: ``command`` and the machine)
    and ``data`` (JSON-serialisable, what the chart plots) with where it came from as
    ``<directory>/<name>.json``. ``chart``: the :mod:`dgb_dev.benchcharts` function that draws
    ``data``. ``machine_info``: the machine to record (default: this one, now). Returns both paths."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"a chart name is a plain file stem, got {name!r}")
    payload = json.dumps(data, ensure_ascii=False, allow_nan=False)  # fails before anything is written
    m = machine_info if machine_info is not None else machine()
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    svg, meta = out / f"{name}.svg", out / f"{name}.json"
    write_svg(svg, fig, command, m)
    record = {
        "name": name,
        "chart": chart,
        "command": command,
        "machine": m,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "git": git_commit(),
        "matplotlib": matplotlib.__version__,
        "data": json.loads(payload),
    }
    meta.write_text(_dumps(record) + "\n", encoding="utf-8")
    return svg, meta


def _dumps(value: Any, depth: int = 0) -> str:
    """JSON with one line per key of the record and of its ``data``, the values below compact:
    readable in a diff without a line per number."""
    if isinstance(value, dict) and value and depth < 2:
        pad = " " * (depth + 1)
        items = [
            f"{pad}{json.dumps(k, ensure_ascii=False)}: {_dumps(v, depth + 1)}" for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def read(path: str | Path) -> dict[str, Any]:
    """A chart's JSON as :func:`write` wrote it."""
    return json.loads(Path(path).read_text(encoding="utf-8"))
