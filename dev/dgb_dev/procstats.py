"""CPU seconds and memory of the local stack's components, sampled over a benchmark run.

Each component is a process tree (``python -m dgb_dev.stack`` records its root pid); CPU counts
the tree's live processes and what their exited children used (a LocalExecutor's task processes
show up in the scheduler's tree once reaped). Used by ``scripts/bench_realtime.py`` and
``scripts/bench_backlog.py``.
"""

from __future__ import annotations

import os
import statistics
import time


class Sampler:
    """CPU seconds and RSS of each Airflow component's process tree, over the run."""

    def __init__(self, s, extra=("model", "mirror", "postgres")) -> None:
        import psutil

        from dgb_dev.stack.airflow import AIRFLOW_PARTS
        from dgb_dev.stack.components import component

        self.psutil = psutil
        self.names = [f"airflow-{p}" for p in AIRFLOW_PARTS] + list(extra)
        self.pids = {}
        for name in self.names:
            pid = component(s, name).proc.pid() if name != "postgres" else postgres_pid()
            if pid:
                self.pids[name] = pid
        self.cpu0 = {n: self._tree(p)[0] for n, p in self.pids.items()}
        self.main0 = {n: self._main(p)[0] for n, p in self.pids.items()}
        self.t0 = time.monotonic()
        self.rss: dict[str, list[float]] = {n: [] for n in self.pids}
        self.main_rss: dict[str, list[float]] = {n: [] for n in self.pids}
        self.machine = psutil.cpu_times()

    def _procs(self, pid: int):
        try:
            root = self.psutil.Process(pid)
            return [root, *root.children(recursive=True)]
        except self.psutil.Error:
            return []

    def _tree(self, pid: int) -> tuple[float, float]:
        cpu = rss = 0.0
        for p in self._procs(pid):
            try:
                t = p.cpu_times()
                cpu += t.user + t.system + t.children_user + t.children_system
                rss += p.memory_info().rss
            except self.psutil.Error:
                continue
        return cpu, rss / 2**20

    def _main(self, pid: int) -> tuple[float, float]:
        try:
            p = self.psutil.Process(pid)
            t = p.cpu_times()
            return t.user + t.system, p.memory_info().rss / 2**20
        except self.psutil.Error:
            return 0.0, 0.0

    def sample(self) -> None:
        for n, pid in self.pids.items():
            self.rss[n].append(self._tree(pid)[1])
            self.main_rss[n].append(self._main(pid)[1])

    def result(self) -> dict:
        wall = time.monotonic() - self.t0
        out = {}
        for n, pid in self.pids.items():
            cpu = self._tree(pid)[0] - self.cpu0[n]
            main = self._main(pid)[0] - self.main0[n]
            out[n] = {
                "cpu_s_tree": round(cpu, 1),
                "cpu_pct_tree": round(100 * cpu / wall, 1),
                "cpu_pct_process": round(100 * main / wall, 1),
                "rss_mb_process_max": round(max(self.main_rss[n] or [0]), 0),
                "rss_mb_tree_max": round(max(self.rss[n] or [0]), 0),
                "rss_mb_tree_mean": round(statistics.fmean(self.rss[n]) if self.rss[n] else 0, 0),
            }
        now = self.psutil.cpu_times()
        busy = sum(getattr(now, f) - getattr(self.machine, f) for f in ("user", "system", "nice"))
        total = busy + (now.idle - self.machine.idle) + (now.iowait - self.machine.iowait)
        out["machine"] = {"cpu_pct": round(100 * busy / total, 1) if total else 0.0, "cores": os.cpu_count()}
        return out


def postgres_pid() -> int | None:
    import psutil

    for p in psutil.process_iter(["name", "cmdline", "ppid"]):
        cmd = " ".join(p.info.get("cmdline") or [])
        if "postgres" in (p.info.get("name") or "") and "-D" in cmd and "15/main" in cmd:
            return p.pid
    return None
