"""A worker OS process for the host-budget tests: fetch URLs of one host through the shared budget
(one Fetcher + HostBudget per thread, as one task each) and print one JSON line of results.

``--hold``: take one in-flight slot, print its id and sleep (the test kills the process)."""

from __future__ import annotations

import argparse
import json
import threading
import time
from urllib.parse import urlsplit

from dgb.config import settings
from dgb.fetch import Fetcher, FetchPolicy
from dgb.hostbudget import BudgetConfig, HostBudget
from dgb.urlpolicy import UrlPolicy


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--base", required=True, help="http://127.0.0.1:PORT/prefix")
    p.add_argument("--tag", default="w")
    p.add_argument("--n", type=int, default=1, help="requests per thread")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--priority", default="scrape")
    p.add_argument("--rps", type=float, default=2.0)
    p.add_argument("--in-flight", type=int, default=2)
    p.add_argument("--reserved", type=int, default=0)
    p.add_argument("--lease", type=float, default=90.0)
    p.add_argument("--retries", type=int, default=0)
    p.add_argument("--hold", action="store_true")
    args = p.parse_args()
    host = urlsplit(args.base).netloc
    cfg = BudgetConfig(
        overrides={host: (args.rps, args.in_flight)}, reserved=args.reserved, lease_s=args.lease
    )
    dsn = settings().pg_dsn()
    if args.hold:
        budget = HostBudget(dsn, cfg)
        slot = budget.take(host, args.priority)
        print(json.dumps({"slot": slot.id}), flush=True)
        time.sleep(3600)
        return 0
    statuses: list[int] = []
    waits: list[float] = []
    lock = threading.Lock()

    errors: list[str] = []

    def run(t: int) -> None:
        try:
            work(t)
        except BaseException as exc:
            errors.append(repr(exc))
            raise

    def work(t: int) -> None:
        policy = FetchPolicy(min_interval=0.0, retries=args.retries, backoff_base=0.01, backoff_max=0.05)
        # the test's own loopback server is the one host this worker's URL guard allows
        guard = UrlPolicy([host], allow_loopback=True).guard
        with Fetcher(policy, budget=HostBudget(dsn, cfg), priority=args.priority, url_guard=guard) as f:
            for i in range(args.n):
                r = f.get(f"{args.base}/{args.tag}-{t}/{i}", raise_for_status=False, check_robots=False)
                with lock:
                    statuses.append(r.status)
            with lock:
                waits.append(f.stats.polite_wait_s)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(args.threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    print(json.dumps({"statuses": statuses, "polite_wait_s": waits, "errors": errors}), flush=True)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
