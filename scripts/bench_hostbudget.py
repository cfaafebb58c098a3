"""The shared host budget under load: P OS processes x T threads hammer one loopback host through
real Fetchers + HostBudget (PostgreSQL), and we print what the host saw and what a grant costs.

    python scripts/bench_hostbudget.py [--rps 2] [--in-flight 2] [--procs 2] [--threads 3] [--seconds 20]

Prints: requests, the max requests in any 10 s window ÷ 10 (max_rps_10s, must stay <= --rps), the
max in flight seen by the server (<= --in-flight), and the grant latency with no contention
(one stream, budget far above what it asks: the limiter's own cost per request). Numbers are noisy
on a shared machine. Uses the database of the current settings (tables host_*), a host of its own.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "include"), str(REPO)]

from dgb.config import settings  # noqa: E402
from dgb.hostbudget import BudgetConfig, HostBudget  # noqa: E402


def _recorder():
    from tests.support.recorder import Recorder  # the loopback recording site of the tests

    srv = Recorder(delay=0.05)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rps", type=float, default=2.0)
    p.add_argument("--in-flight", type=int, default=2)
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--threads", type=int, default=3)
    p.add_argument("--seconds", type=float, default=20.0)
    args = p.parse_args()
    from dgb import db

    db.migrate_dsn(settings().pg_dsn())
    srv = _recorder()
    n = max(1, int(args.rps * args.seconds / (args.procs * args.threads)))
    worker = REPO / "tests" / "integration" / "budget_worker.py"
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "include"), os.environ.get("PYTHONPATH", "")])
    )
    t0 = time.monotonic()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(worker),
                "--base",
                f"{srv.base}/bench",
                "--tag",
                f"p{i}",
                "--n",
                str(n),
                "--threads",
                str(args.threads),
                "--rps",
                str(args.rps),
                "--in-flight",
                str(args.in_flight),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(args.procs)
    ]
    for proc in procs:
        out, _ = proc.communicate(timeout=args.seconds * 10 + 120)
        json.loads(out.strip().splitlines()[-1])
    wall = time.monotonic() - t0
    starts = sorted(s for _, s, _ in srv.hits)
    best = max(bisect.bisect_left(starts, t + 10.0) - i for i, t in enumerate(starts))
    window = min(10.0, starts[-1] - starts[0]) or 1.0
    # the limiter's own cost: one stream, a budget far above it
    host = f"127.0.0.1:{srv.server_address[1]}-solo"
    budget = HostBudget(settings().pg_dsn(), BudgetConfig(overrides={host: (10_000.0, 4)}))
    costs = []
    for _ in range(200):
        t = time.perf_counter()
        slot = budget.take(host, "scrape")
        budget.release(slot)
        costs.append((time.perf_counter() - t) * 1000)
    budget.close()
    srv.shutdown()
    print(
        f"hostbudget: requests={len(starts)} from {args.procs} processes x {args.threads} streams"
        f" in {wall:.1f}s; "
        f"budget {args.rps}/s, {args.in_flight} in flight"
    )
    print(
        f"hostbudget: max_rps_10s={best / window:.2f} max_in_flight={srv.max_overlap()} "
        f"grant_ms_p50={statistics.median(costs):.2f} grant_ms_p95={sorted(costs)[189]:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
