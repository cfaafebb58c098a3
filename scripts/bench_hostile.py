"""Hostile-page benchmark: each page of the hostile corpus through the real scrape path.

Serves :mod:`dgb_dev.hostile` on a free loopback port, then for every page runs, in a fresh
subprocess, one real scrape task of a listing holding just that page (plus the off-site links):
URL guard, fetch with its size cap, parse, store into PostgreSQL (the test database,
``DGB_TEST_PG_DB``, as the tests use it; the mec rows are deleted before each page). Each child
reports its wall time and its peak RSS (``VmHWM``, else ``resource.getrusage``; the
interpreter and imports included). A last child scrapes the whole hostile listing in one task,
as an Airflow task would.

Targets (issue 13, on 2 cores): each page <= 10 s, each task <= 500 MB RSS. Timings are noisy on
a shared machine. Last line::

    hostile: pages=<n> worst_s=<x> worst_rss_mb=<x>

    .venv/bin/python scripts/bench_hostile.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / d) for d in ("include", "dev")]

from dgb.config.bench import test_pg_db  # noqa: E402

# the tests' database, not the dev stack's (as tests/conftest.py does)
os.environ["DGB_PG_DB"] = test_pg_db()


def _peak_rss_mb() -> float:
    """This process's peak RSS: ``VmHWM`` (Linux; reset at exec, unlike ``ru_maxrss``, which a
    child inherits from the parent it was forked from), else ``getrusage``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(base: str, only: str) -> int:
    import time
    from dataclasses import replace

    from dgb import db
    from dgb.agencies import load_agencies
    from dgb.config import settings
    from dgb.fetch import Fetcher, FetchPolicy
    from dgb.scraper.run import scrape_agency
    from dgb_dev.hostile import LISTING_PATH

    os.environ.update(DGB_SOURCE_MODE="mirror", DGB_MIRROR_URL=base)
    conn = db.connect(settings().pg_dsn())
    with db.transaction(conn) as cur:
        cur.execute("DELETE FROM outbox WHERE payload->>'agency_key' = 'mec'")
        cur.execute("DELETE FROM news WHERE agency_key = 'mec'")
    query = f"?only={only}" if only else ""
    agency = replace(
        load_agencies(base_url=base)["mec"], site_kind="html", url=f"{base}{LISTING_PATH}{query}"
    )
    t0 = time.perf_counter()
    with Fetcher(FetchPolicy(min_interval=0.0, retries=0)) as fetcher:
        report = scrape_agency(conn, agency, fetcher)  # must not raise
    seconds = time.perf_counter() - t0
    conn.close()
    rss_mb = _peak_rss_mb()
    print(
        json.dumps(
            {
                "seconds": seconds,
                "rss_mb": rss_mb,
                "new": len(report.new),
                "problems": report.problems,
                "off_site_dropped": report.off_site_dropped,
            }
        )
    )
    return 0


def _run(base: str, only: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "include"), str(ROOT / "dev")])}
    out = subprocess.run(
        [sys.executable, __file__, "--child", base, only],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if out.returncode != 0:
        raise SystemExit(f"child for {only or 'the whole listing'} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    from dgb import db
    from dgb.config import Settings
    from dgb_dev import stack
    from dgb_dev.hostile import HostileSite

    settings = Settings.from_env()
    stack.ensure(["postgres"], settings)
    stack.ensure_database(stack.Postgres(settings), settings.pg_db)
    db.migrate_dsn(settings.pg_dsn())
    worst_s = worst_rss = 0.0
    with HostileSite() as site:
        slugs = list(site.pages)
        print(f"{'page':28} {'expect':10} {'s':>7} {'rss_mb':>7}  outcome")
        for slug in slugs:
            r = _run(site.base, slug)
            outcome = f"new={r['new']} problems={r['problems']} off_site_dropped={r['off_site_dropped']}"
            print(f"{slug:28} {site.pages[slug].expect:10} {r['seconds']:7.2f} {r['rss_mb']:7.1f}  {outcome}")
            worst_s, worst_rss = max(worst_s, r["seconds"]), max(worst_rss, r["rss_mb"])
        task = _run(site.base, "")
    print(
        f"whole listing in one task: s={task['seconds']:.2f} rss_mb={task['rss_mb']:.1f} new={task['new']}"
        f" problems={task['problems']} off_site_dropped={task['off_site_dropped']}"
    )
    worst_rss = max(worst_rss, task["rss_mb"])
    print(f"hostile: pages={len(slugs)} worst_s={worst_s:.2f} worst_rss_mb={worst_rss:.1f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        raise SystemExit(_child(sys.argv[2], sys.argv[3]))
    raise SystemExit(main())
