"""Memory of the idle local stack: PSS per component, summed over each component's process tree.

    .venv/bin/python scripts/bench_memory.py [--settle 60] [--samples 5] [--interval 10] [--json PATH]

PSS (proportional set size, ``/proc/<pid>/smaps_rollup``) counts each shared page once over the
processes that share it: Airflow forks its workers from one parent, so their RSS added up counts
the parent's imported modules many times; PSS adds up to what the machine really holds. For each
component `make up` starts (PostgreSQL's cluster with all its backends, the Pub/Sub emulator's
JVM, Typesense, the local site, the model service, each Airflow component with its children, the
watchdog) it waits ``--settle`` seconds for the stack to be idle (no stage or scrape run going),
then takes ``--samples`` samples ``--interval`` seconds apart and prints, per component, the mean
PSS of its tree and its process count, then the total, the spread of the samples' totals (a
long window, e.g. ``--samples 40 --interval 15``, covers the periodic tasks that come and go:
an integrity run holds a worker and a task process for minutes); the last line::

    memory: total_pss_mib=<x> airflow_pss_mib=<x> processes=<n> load=<1-min load average>

Needs `make up` running. Reads /proc only; no traffic.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "dev")]


def pss_kib(pid: int) -> int:
    """The process's PSS in KiB (0 when it is gone or unreadable)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    import psutil

    try:
        root = psutil.Process(pid)
        return [root.pid, *(c.pid for c in root.children(recursive=True))]
    except psutil.Error:
        return []


def components(s) -> dict[str, int]:
    """name -> root pid of every running component of this checkout's stack."""
    from dgb_dev.procstats import postgres_pid
    from dgb_dev.stack.airflow import AIRFLOW_PARTS
    from dgb_dev.stack.components import component

    names = ["pubsub", "typesense", "mirror", "model", *(f"airflow-{p}" for p in AIRFLOW_PARTS)]
    out: dict[str, int] = {}
    pg = postgres_pid()
    if pg:
        out["postgres"] = pg
    for name in names:
        pid = component(s, name).proc.pid()
        if pid:
            out[name] = pid
    try:  # the watchdog is a process of its own, not a component
        watchdog = int((s.state_dir / "run" / "watchdog.pid").read_text().strip())
        os.kill(watchdog, 0)
        out["watchdog"] = watchdog
    except (OSError, ValueError):
        pass
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settle", type=float, default=60.0, help="seconds to wait before sampling")
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--interval", type=float, default=10.0)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    from dgb.config import settings

    roots = components(settings())
    if not any(n.startswith("airflow-") for n in roots):
        print("bench_memory: Airflow is not running (make up first)", file=sys.stderr)
        return 2
    time.sleep(args.settle)
    samples: dict[str, list[float]] = {n: [] for n in roots}
    counts: dict[str, int] = {}
    totals: list[float] = []
    for k in range(args.samples):
        for name, pid in roots.items():
            pids = tree(pid)
            counts[name] = len(pids)
            samples[name].append(sum(pss_kib(p) for p in pids) / 1024)
        totals.append(sum(v[-1] for v in samples.values()))
        if k < args.samples - 1:
            time.sleep(args.interval)
    figures = {n: round(statistics.fmean(v), 1) for n, v in samples.items()}
    total = sum(figures.values())
    airflow = sum(v for n, v in figures.items() if n.startswith("airflow-"))
    width = max(len(n) for n in figures)
    for name in sorted(figures, key=lambda n: -figures[n]):
        print(f"{name.ljust(width)}  {figures[name]:8.1f} MiB PSS  {counts[name]:3d} processes")
    load = os.getloadavg()[0]
    print(f"{'total'.ljust(width)}  {total:8.1f} MiB PSS ({total / 1024:.2f} GiB)")
    over = sum(1 for t in totals if t > 1536)
    print(
        f"samples' totals: min {min(totals):.0f} / median {statistics.median(totals):.0f} / "
        f"max {max(totals):.0f} MiB over {len(totals)} samples; above 1.5 GiB in {over}"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"pss_mib": figures, "processes": counts, "load": load, "sample_totals_mib": totals}, indent=2
            )
        )
    print(
        f"memory: total_pss_mib={total:.0f} airflow_pss_mib={airflow:.0f} "
        f"processes={sum(counts.values())} load={load:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
