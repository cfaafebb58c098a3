"""Chaos soak (issue 28): the whole stack at production scale for an hour with a fault every few
minutes, then the history checked article by article.

1. Brings the stack up exactly as scripts/bench_realtime.py does (its :func:`bring_up`: scratch
   names, the local site serving ``--articles`` synthetic articles and publishing and editing as
   production does, the database preloaded, every DAG unpaused, and the index caught up with the
   database: the restore of the preload's older documents ends before the first fault, so a
   fault's recovery measures the fault, not that warm-up).
2. For ``--minutes``, draws a fault every ``--fault-every-min`` minutes (+-20%) with the printed
   ``--seed`` (:mod:`faultsuite.chaos`: kill -9 of the scheduler, the triggerer, the DAG
   processor, a running task and the model service; restarts of PostgreSQL, Typesense and the
   Pub/Sub emulator; Typesense or the model service down for 5 minutes; the site answering 503
   for 3 minutes) and injects it; a process supervisor's turn after each (what systemd or
   Kubernetes would do). After each fault: its recovery time, until the work that existed at its
   end (articles scraped, events in the outbox) is searchable and sent again.
3. Then a drain: every scrape DAG triggered once (each agency polled after the last fault) and
   the pipeline given up to ``--drain-min`` minutes to catch up.
4. The history, checked:

   * every article the site published during the run is in PostgreSQL exactly once (``lost``,
     ``duplicated``; by its URL);
   * every edit made during the run is recorded at most once (history rows repeated for the same
     field and value count as duplicated edits; detected/made is printed);
   * the index equals the database: the ids and versions of every article that should be in
     Typesense (new during the run, or in the preload's indexed horizon), none more
     (``index_equal``);
   * no real article dead-lettered (``dead_lettered_healthy``);
   * the site never saw more than the budget in any 10 s (``max_rps_10s``, recoveries included);
   * publication -> searchable of the new articles, p95 during the faults and after them;
   * each fault's recovery time (``worst_recovery_s``).

It writes the whole history to ``.state/bench/soak-<time>.json`` and prints one summary line last:

    soak: lost=<n> duplicated=<n> dead_lettered_healthy=<n> index_equal=<0|1> max_rps_10s=<x>
    faults=<n> worst_recovery_s=<x> fresh_p95_s=<x> seed=<n>

    .venv/bin/python scripts/bench_soak.py [--minutes 60] [--seed N] [--articles 300000]

Never beside a test suite or another benchmark (2 cores). Loopback only. Exit 1 when anything
was lost, duplicated or dead-lettered, the index differs or the budget was exceeded.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for sub in ("include", "plugins", "dev", "scripts"):
    sys.path.insert(0, str(ROOT / sub))

import bench_realtime as realtime  # noqa: E402
from faultsuite.chaos import SOAK_FAULTS, Chaos, Injected  # noqa: E402
from faultsuite.context import Context  # noqa: E402
from faultsuite.plumbing import Db  # noqa: E402

RECOVERY_POLL_S = 10.0
TS_EXPORT_BATCH = 50


def log(msg: str) -> None:
    print(f"[soak {datetime.now(UTC):%H:%M:%S}] {msg}", flush=True)


# --------------------------------------------------------------------------- during the run


def backlog(db: Db, until: datetime) -> int:
    """Work that existed at ``until`` and is not done: articles scraped by then and not yet
    searchable at their version, and outbox events created by then and not yet sent."""
    rows = db.query(
        "SELECT (SELECT count(*) FROM news WHERE removed_at IS NULL AND scraped_at <= %(t)s"
        "        AND indexed_version IS DISTINCT FROM version)"
        " + (SELECT count(*) FROM outbox WHERE published_at IS NULL AND created_at <= %(t)s)",
        {"t": until},
    )
    return int(rows[0][0])


def measure_recoveries(db: Db, open_faults: list[Injected]) -> None:
    """Set the recovery time of each fault whose end-time work is done (then no longer open)."""
    for rec in list(open_faults):
        try:
            left = backlog(db, datetime.fromisoformat(rec.ended))
        except Exception as exc:
            log(f"recovery of {rec.fault}: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        if left == 0:
            rec.recovery_s = round(time.monotonic() - rec.ended_mono, 1)
            open_faults.remove(rec)
            log(f"{rec.fault}: recovered {rec.recovery_s:.0f}s after its end")


def drain(s, db: Db, scrape_dags: list[str], minutes: float) -> float:
    """Every scrape DAG triggered once, then until the work of that moment is done."""
    from dgb_dev.stack import airflow_rest

    t0 = time.monotonic()
    at = datetime.now(UTC)
    for dag_id in scrape_dags:
        try:
            airflow_rest.trigger_dag_run(s, dag_id)
        except Exception as exc:
            log(f"drain: trigger {dag_id}: {exc}")
    log(f"drain: {len(scrape_dags)} scrape DAGs triggered; waiting up to {minutes:.0f} min")
    deadline = t0 + minutes * 60
    while time.monotonic() < deadline:
        scraped = db.query(
            "SELECT count(DISTINCT dag_id) FROM task_instance WHERE dag_id = ANY(%s) AND start_date >= %s"
            " AND state IN ('success', 'failed', 'skipped')",
            (scrape_dags, at),
        )
        if scraped and scraped[0][0] >= len(scrape_dags):
            break
        time.sleep(15)
    return time.monotonic() - t0


# --------------------------------------------------------------------------- the history


def article_history(s, corpus, keys: set[str], start: datetime, stop: datetime) -> dict:
    """The site's articles published in [start, stop) of scraped agencies: in PostgreSQL once each,
    and publication -> searchable (indexed_at) of each."""
    lo, hi = start.timestamp(), stop.timestamp()
    wanted = {}
    for i in range(len(corpus)):
        if lo <= corpus.published[i] < hi and corpus.agencies[int(corpus.agency[i])] in keys:
            wanted[corpus.slug(i)] = float(corpus.published[i])
    db = Db(s.pg_dsn())
    rows = db.query(
        "SELECT url, unique_id, indexed_at, indexed_version = version FROM news WHERE published_at >= %s",
        (start - timedelta(hours=1),),
    )
    db.close()
    by_slug: dict[str, list[tuple]] = {}
    for url, uid, indexed_at, current in rows:
        by_slug.setdefault(url.rsplit("/", 1)[-1], []).append((uid, indexed_at, current))
    lost, dup, fresh = [], [], []
    for slug, pub in wanted.items():
        got = by_slug.get(slug, [])
        if not got:
            lost.append(slug)
            continue
        if len(got) > 1:
            dup.append(slug)
        uid, indexed_at, current = got[0]
        if indexed_at is None or not current:
            lost.append(slug)  # stored, never searchable
        else:
            fresh.append((pub, indexed_at.timestamp() - pub))
    return {"published": len(wanted), "lost": lost, "duplicated": dup, "fresh": fresh}


def edit_history(s, corpus, start: datetime, stop: datetime) -> dict:
    """Edits the site made during the run; history rows recorded for the run's edits, and rows
    repeating the same field and value of one article (an edit recorded more than once)."""
    lo, hi = start.timestamp(), stop.timestamp()
    made = int(((corpus.edit_time >= lo) & (corpus.edit_time < hi)).sum())
    db = Db(s.pg_dsn())
    rows = db.query(
        "SELECT count(*), count(DISTINCT news_id) FROM news_update_history WHERE detected_at >= %s",
        (start,),
    )
    repeated = db.query(
        "SELECT count(*) FROM (SELECT news_id, field_changed, md5(coalesce(new_value, '')) FROM"
        " news_update_history WHERE detected_at >= %s GROUP BY 1, 2, 3 HAVING count(*) > 1) r",
        (start,),
    )
    db.close()
    return {
        "edits_made": made,
        "history_rows": rows[0][0],
        "articles_with_history": rows[0][1],
        "duplicated": repeated[0][0],
    }


def index_equality(s, start: datetime, indexed_days: float) -> dict:
    """Typesense against PostgreSQL, ids and versions: every article that should be searchable
    (new or indexed during the run, or in the preload's indexed horizon) at its indexed version,
    and nothing else (the scratch index starts empty: dgb_dev.stack.typesense.drop_index)."""
    from dgb.search import schema

    db = Db(s.pg_dsn())
    rows = db.query(
        "SELECT unique_id, indexed_version FROM news WHERE removed_at IS NULL AND indexed_version IS NOT NULL"
        " AND (published_at >= %s OR indexed_at >= %s)",
        (start - timedelta(days=indexed_days), start),
    )
    removed = {r[0] for r in db.query("SELECT unique_id FROM news WHERE removed_at IS NOT NULL")}
    db.close()
    want = dict(rows)
    ts = schema.client(s, timeout=60.0)
    raw = ts.collections[s.typesense_collection].documents.export({"include_fields": "id,version"})
    have = {}
    for line in raw.splitlines():
        if line.strip():
            d = json.loads(line)
            have[d["id"]] = d.get("version")
    missing = sorted(u for u in want if u not in have)
    older = sorted(u for u in want if u in have and have[u] != want[u])
    extra = sorted(u for u in have if u not in want)  # removed, or never meant to be there
    return {
        "expected": len(want),
        "in_index": len(have),
        "missing": missing[:50],
        "missing_n": len(missing),
        "version_differs": older[:50],
        "version_differs_n": len(older),
        "unexpected": extra[:50],
        "unexpected_n": len(extra),
        "unexpected_removed_n": sum(1 for u in extra if u in removed),
        "equal": not missing and not older and not extra,
    }


def dead_lettered_healthy(s, start: datetime) -> list[str]:
    db = Db(s.pg_dsn())
    rows = db.query(
        "SELECT DISTINCT d.unique_id FROM dead_letters d JOIN news n ON n.unique_id = d.unique_id"
        " WHERE d.first_seen >= %s",
        (start,),
    )
    db.close()
    return [r[0] for r in rows]


# --------------------------------------------------------------------------- main


def summary_line(figures: dict) -> str:
    return (
        f"soak: lost={figures['lost']} duplicated={figures['duplicated']}"
        f" dead_lettered_healthy={figures['dead_lettered_healthy']} index_equal={figures['index_equal']}"
        f" max_rps_10s={figures['max_rps_10s']:.2f} faults={figures['faults']}"
        f" worst_recovery_s={figures['worst_recovery_s']:.1f} fresh_p95_s={figures['fresh_p95_s']:.1f}"
        f" seed={figures['seed']}"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--seed", type=int, help="the fault draw's seed (default: a random one, printed)")
    ap.add_argument("--articles", type=int, default=300_000)
    ap.add_argument("--fault-every-min", type=float, default=5.0)
    ap.add_argument("--outage-scale", type=float, default=1.0, help="outage lengths times this (smoke runs)")
    ap.add_argument("--drain-min", type=float, default=15.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the scratch database at the end")
    ap.add_argument(
        "--chart", type=Path, default=None, metavar="DIR", help="also write the chart soak-timeline into DIR"
    )
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 1_000_000)
    log(f"seed={seed}")

    from dgb import hostbudget
    from dgb.config import http as http_config
    from dgb_dev import stack
    from dgb_dev.stack.watchdog import stop_watchdog

    run = realtime.bring_up(args.articles, args.workers)
    s = run.s
    budget_rps = hostbudget.BudgetConfig(**http_config.host_budget()).default_rps
    ctx = Context.for_chaos(s, keep=args.keep)
    chaos = Chaos(ctx, seed, run.base, scale=args.outage_scale, faults=SOAK_FAULTS)
    run_start = datetime.now(UTC)
    epoch0 = time.time()
    faults: list[Injected] = []
    open_faults: list[Injected] = []
    deadline = time.monotonic() + args.minutes * 60
    next_fault = time.monotonic() + chaos.next_gap_s(args.fault_every_min * 60)
    try:
        while time.monotonic() < deadline:
            if time.monotonic() >= next_fault:
                rec = chaos.inject(chaos.draw())
                faults.append(rec)
                open_faults.append(rec)
                next_fault = time.monotonic() + chaos.next_gap_s(args.fault_every_min * 60)
            measure_recoveries(ctx.db, open_faults)
            chaos.supervise()
            time.sleep(RECOVERY_POLL_S)
        last_fault_end = max((f.ended for f in faults if f.ended), default=run_start.isoformat())
        published_until = datetime.now(UTC)
        drained_s = drain(s, ctx.af, run.scrape_dags, args.drain_min)
        end = time.monotonic() + args.drain_min * 60 - drained_s
        while open_faults and time.monotonic() < end:
            measure_recoveries(ctx.db, open_faults)
            time.sleep(RECOVERY_POLL_S)
        while time.monotonic() < end and backlog(ctx.db, datetime.now(UTC)) > 0:
            time.sleep(RECOVERY_POLL_S)
        run_stop = datetime.now(UTC)
        reqs = realtime.request_figures(realtime.mirror_requests(run.base, epoch0), epoch0, time.time())
        keys = {d.removeprefix("scrape_") for d in run.scrape_dags}
        arts = article_history(s, run.corpus, keys, run_start, published_until)
        edits = edit_history(s, run.corpus, run_start, run_stop)
        index = index_equality(s, run.start, realtime.INDEXED_DAYS)
        dlh = dead_lettered_healthy(s, run_start)
    finally:
        log("stopping Airflow, watchdog and the site of the run (`make up` brings the dev stack back)")
        stop_watchdog(s)
        for name in [f"airflow-{p}" for p in reversed(stack.AIRFLOW_PARTS)] + ["mirror"]:
            stack.component(s, name).down()

    cut = datetime.fromisoformat(last_fault_end).timestamp()
    during = [lag for pub, lag in arts["fresh"] if pub < cut]
    after = [lag for pub, lag in arts["fresh"] if pub >= cut]
    every = [lag for _, lag in arts["fresh"]]
    recoveries = [f.recovery_s for f in faults if f.recovery_s is not None]
    unrecovered = [f.fault for f in faults if f.recovery_s is None]
    figures = {
        "lost": len(arts["lost"]),
        "duplicated": len(arts["duplicated"]) + edits["duplicated"],
        "dead_lettered_healthy": len(dlh),
        "index_equal": int(index["equal"]),
        "max_rps_10s": reqs["max_rps_10s"],
        "faults": len(faults),
        "worst_recovery_s": max(recoveries) if recoveries else 0.0,
        "fresh_p95_s": realtime.pct(every, 95),
        "seed": seed,
    }
    print()
    print(
        f"run: {args.minutes:.0f} min from {run_start:%H:%M:%S}Z, seed {seed},"
        f" {run.info['articles']} preloaded"
    )
    for f in faults:
        rec = f"{f.recovery_s:.0f}s" if f.recovery_s is not None else "not recovered"
        print(f"  {f.started[11:19]} {f.fault:<20} recovery {rec:<14} {f.detail}")
    print(
        f"articles published during the run: {arts['published']}, lost {len(arts['lost'])},"
        f" stored twice {len(arts['duplicated'])}; publication -> searchable p50/p95:"
        f" during the faults {realtime.pct(during, 50):.0f}/{realtime.pct(during, 95):.0f} s ({len(during)}),"
        f" after them {realtime.pct(after, 50):.0f}/{realtime.pct(after, 95):.0f} s ({len(after)})"
    )
    print(
        f"edits made {edits['edits_made']}, history rows {edits['history_rows']} on"
        f" {edits['articles_with_history']} articles, repeated {edits['duplicated']}"
    )
    print(
        f"index: {index['expected']} expected, {index['in_index']} in Typesense,"
        f" missing {index['missing_n']},"
        f" older {index['version_differs_n']}, unexpected {index['unexpected_n']}"
        f" (of them removed {index['unexpected_removed_n']})"
    )
    print(
        f"requests to the site: {reqs['requests']}, max {reqs['max_rps_10s']:.2f}/s over any 10 s"
        f" (budget {budget_rps:g}/s), max {reqs['max_rps_1s']} in one second"
    )
    if unrecovered:
        print(f"not recovered by the end: {', '.join(unrecovered)}")
    out = ROOT / ".state" / "bench" / f"soak-{run_start:%Y%m%dT%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    history = {
        "args": vars(args),
        "seed": seed,
        "run_start": run_start.isoformat(),
        "run_stop": run_stop.isoformat(),
        "faults": [f.as_dict() for f in faults],
        "articles": {**arts, "fresh": [[round(p), round(lag, 1)] for p, lag in arts["fresh"]]},
        "edits": edits,
        "index": index,
        "dead_lettered_healthy": dlh,
        "requests": reqs,
        "budget_rps": budget_rps,
        "figures": figures,
    }
    out.write_text(json.dumps(history, indent=1, default=str))
    print(f"full history: {out}")
    if args.chart:  # read from PostgreSQL (still up) before the scratch database is dropped
        write_soak_chart(args, argv, run, s, reqs, budget_rps, faults, run_start, run_stop)
    if not args.keep:
        run.pg._psql_admin(f'DROP DATABASE IF EXISTS "{s.pg_db}" WITH (FORCE)')
    print(summary_line(figures))
    ok = (
        figures["lost"] == 0
        and figures["duplicated"] == 0
        and figures["dead_lettered_healthy"] == 0
        and figures["index_equal"] == 1
        and figures["max_rps_10s"] <= budget_rps + 1e-9
    )
    return 0 if ok else 1


def write_soak_chart(args, argv, run, s, reqs, budget_rps, faults, run_start, run_stop) -> None:
    """``--chart DIR``: the real-time timeline of the soak (requests/s, backlog per stage, scrape
    runs and integrity checks per minute) with each fault's span marked."""
    from dgb_dev import benchcharts, charts

    data = {"start": f"{run_start:%Y-%m-%d %H:%M} UTC", "minutes": args.minutes, "cadence": "learnt"}
    data |= {"articles": run.info["articles"], "budget_rps": budget_rps}
    data |= realtime.timeline(
        s, realtime.mirror_requests(run.base, run_start.timestamp()), run_start, run_stop
    )
    data["requests"]["max_rps_10s"] = reqs["max_rps_10s"]

    def minute(iso: str | None) -> float | None:
        return None if not iso else (datetime.fromisoformat(iso) - run_start).total_seconds() / 60

    data["faults"] = [
        {"fault": f.fault, "start_min": minute(f.started), "end_min": minute(f.ended) or minute(f.started)}
        for f in faults
    ]
    command = charts.command_line(__file__, sys.argv[1:] if argv is None else argv)
    for path in benchcharts.save(args.chart, "soak-timeline", "realtime", data, command):
        print(f"chart: {path}")


if __name__ == "__main__":
    sys.exit(main())
