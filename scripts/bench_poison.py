"""Poison benchmark: do 1,000 poison rows slow a stage's sweep of 1,000 real pending articles?

For each stage, inside ONE transaction that is rolled back at the end (nothing is left behind and
no running stage ever sees the rows), it inserts ``--background`` articles done in every stage (a
table of realistic shape), 1,000 real articles pending for the stage and
times the stage's own sweep query (``definitions.<stage>.sweep``, ``ORDER BY since LIMIT 1000``,
as ``dgb.pipeline.runner.run_stage`` sends it); then it adds 1,000 poison rows, older than the real
work (so they come first in the sweep order), held in the stage and parked after failing
(``hold_stage``, ``parked_at``, ``problem='dead_letter'``), refreshes the planner's statistics and
times the sweep again. Each timing is the median of ``--repeat`` runs (sub-millisecond figures
are noisy on a shared machine: the shared buffers each sweep touches are printed too, free of that
noise). It also checks that the
sweep still returns the 1,000 real articles and shows how many the old rule (pending, poison not
excluded) would have reached.

    .venv/bin/python scripts/bench_poison.py [--poison 1000] [--real 1000] [--repeat 25] [--background 50000]

Last line: ``poison: sweep_ratio=<worst of the stages>`` (1.0 = no slowdown).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "include"))

from dgb import db
from dgb.config import settings
from dgb.pipeline.definitions import DEFINITIONS, params

MODEL = "bench-model"

# per stage: how far a row pending there has come (enriched? embedded?)
REACHED = {"enrich": (False, False), "embed": (True, False), "index": (True, True)}


def _insert(
    cur, run: str, kind: str, n: int, start: str, reached=(False, False), *, held: str | None = None
) -> None:
    """``n`` articles written once in their final state (no dead row versions left in the indexes
    by later UPDATEs, as after a vacuum)."""
    enriched, embedded = reached
    cur.execute(
        "INSERT INTO news (unique_id, agency_key, title, url, published_at, content, scraped_at, updated_at,"
        " enriched_at, embedded_at, embedding_model, indexed_version, indexed_at, hold_stage, hold_reason,"
        " hold_failures, parked_at, problem, attempts)"
        " SELECT %(run)s || '-' || %(kind)s || '-' || g, 'mec', 'Notícia ' || g,"
        " 'https://www.gov.br/mec/bench-poison/' || %(run)s || '/' || %(kind)s || '/' || g, now(),"
        " 'Texto.', t, t, CASE WHEN %(enriched)s THEN t END, CASE WHEN %(embedded)s THEN t END,"
        " CASE WHEN %(embedded)s THEN %(model)s END, CASE WHEN %(done)s THEN 1 END,"
        " CASE WHEN %(done)s THEN t END, h, CASE WHEN h IS NOT NULL THEN 'error' END,"
        " CASE WHEN h IS NOT NULL THEN 3 ELSE 0 END, CASE WHEN h IS NOT NULL THEN now() END,"
        " CASE WHEN h IS NOT NULL THEN 'dead_letter' END, CASE WHEN h IS NOT NULL THEN 3 ELSE 0 END"
        " FROM generate_series(1, %(n)s) g, LATERAL (SELECT %(held)s::text AS h,"
        " now() - %(start)s::interval + g * interval '1 second' AS t) ts",
        {
            "run": run,
            "kind": kind,
            "n": n,
            "start": start,
            "enriched": enriched,
            "embedded": embedded,
            "done": kind == "done",
            "model": MODEL,
            "held": held,
        },
    )


def _buffers(cur, sql: str, args: dict) -> int:
    """Shared buffers the query touches (EXPLAIN ANALYZE, BUFFERS): the work, free of timing noise."""
    cur.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", args)
    plan = cur.fetchone()[0][0]["Plan"]
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))


def _time(cur, sql: str, args: dict, repeat: int) -> tuple[float, list[str]]:
    times, ids = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        cur.execute(sql, args)
        ids = [r[0] for r in cur.fetchall()]
        times.append(time.perf_counter() - t0)
    return statistics.median(times), ids


def _background(cur, run: str, n: int) -> None:
    """``n`` articles done in every stage (a real table is mostly done work: the planner then
    reads the sweep's partial index instead of scanning the whole table)."""
    _insert(cur, run, "done", n, "30 days", (True, True))


def bench_stage(conn, name: str, n_poison: int, n_real: int, repeat: int, background: int) -> float:
    d = DEFINITIONS[name]
    run = f"bp{uuid.uuid4().hex[:6]}"
    args = {**params(MODEL), "limit": n_real}
    sweep = f"SELECT unique_id FROM news WHERE {d.sweep} ORDER BY {d.since} LIMIT %(limit)s"
    old = f"SELECT unique_id FROM news WHERE {d.pending} ORDER BY {d.since} LIMIT %(limit)s"
    try:
        with conn.cursor() as cur:
            _background(cur, run, background)
            _insert(cur, run, "real", n_real, "1 day", REACHED[name])
            cur.execute("ANALYZE news")
            _time(cur, sweep, args, 5)  # warm the cache (and set the new rows' hint bits)
            clean, clean_ids = _time(cur, sweep, args, repeat)
            clean_buf = _buffers(cur, sweep, args)
            # older than the real work: first in the sweep order
            _insert(cur, run, "poison", n_poison, "2 days", REACHED[name], held=name)
            cur.execute("ANALYZE news")
            _time(cur, sweep, args, 5)
            poisoned, poisoned_ids = _time(cur, sweep, args, repeat)
            poisoned_buf = _buffers(cur, sweep, args)
            _, old_ids = _time(cur, old, args, 1)
            cur.execute(f"EXPLAIN {sweep}", args)
            plan = " / ".join(r[0].strip() for r in cur.fetchall() if "Scan" in r[0])
    finally:
        conn.rollback()  # nothing of the benchmark stays
    real_reached = sum(1 for u in poisoned_ids if u.startswith(f"{run}-real-"))
    old_reached = sum(1 for u in old_ids if u.startswith(f"{run}-real-"))
    ratio = poisoned / clean if clean > 0 else float("inf")
    print(
        f"{name}: clean_ms={clean * 1000:.2f} with_poison_ms={poisoned * 1000:.2f} ratio={ratio:.2f}"
        f" real_reached={real_reached}/{n_real} (clean {sum(1 for u in clean_ids if u.startswith(run))})"
        f" old_rule_real_reached={old_reached}/{n_real} buffers={clean_buf}->{poisoned_buf}"
    )
    print(f"  plan: {plan}")
    return ratio


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--poison", type=int, default=1000)
    ap.add_argument("--real", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=25)
    ap.add_argument("--background", type=int, default=50_000, help="articles done in every stage")
    ap.add_argument("--stages", default="enrich,embed,index")
    args = ap.parse_args()
    conn = db.connect(settings().pg_dsn())
    try:
        ratios = [
            bench_stage(conn, s, args.poison, args.real, args.repeat, args.background)
            for s in args.stages.split(",")
        ]
    finally:
        conn.close()
    print(f"poison: sweep_ratio={max(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
