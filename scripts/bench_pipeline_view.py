"""Pipeline view benchmark: one load of the UI's pipeline view at production size.

Loads N articles (default 300,000 over 5 years, ~500 a day, content of a real article's size) into
a scratch database: all done long ago except the last hours' traffic (new articles moving through
the stages, edits re-entering them, a backlog waiting for embed), plus dead letters and a host
budget. Then times :func:`dgb.observe.overview.pipeline_overview` (what ``GET /pipeline`` reads)
and each of its parts, warm, median of 5, and prints them (numbers on a shared machine are noisy).

    .venv/bin/python scripts/bench_pipeline_view.py [--articles 300000] [--hours 6]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for sub in ("include", "dev"):
    sys.path.insert(0, str(ROOT / sub))

LOAD_SQL = """
INSERT INTO news (unique_id, agency_key, agency_name, title, url, content, published_at, scraped_at,
                  enriched_at, embedded_at, embedding_model, indexed_at, version, indexed_version)
SELECT 'bench-' || g, 'ag' || (g %% 160), 'Agency ' || (g %% 160), 'Notícia sintética ' || g,
       'https://www.gov.br/ag' || (g %% 160) || '/pt-br/noticias/bench-' || g,
       (SELECT string_agg(md5(g::text || ':' || i), ' ') FROM generate_series(1, 90) i),  -- ~3 kB
       p, p + interval '2 minutes', p + interval '3 minutes', p + interval '4 minutes', 'bench-model',
       p + interval '5 minutes', 1, 1
FROM generate_series(1, %(rows)s) g
CROSS JOIN LATERAL (SELECT %(now)s::timestamptz - (%(rows)s - g) * interval '5 years' / %(rows)s AS p) t
"""

# the last hours: 1 in 200 articles edited (re-scraped, back in enrich), and the newest ones still
# in the stages (enrich / embed / index pending)
RECENT_SQL = [
    """
UPDATE news SET scraped_at = %(now)s::timestamptz - (id %% 360) * interval '1 minute', version = 2,
       enriched_at = CASE WHEN id %% 3 = 0 THEN NULL
                          ELSE %(now)s::timestamptz - (id %% 360 - 1) * interval '1 minute' END,
       embedded_at = CASE WHEN id %% 3 = 1 THEN NULL ELSE embedded_at END
WHERE id %% 200 = 0""",
    """
UPDATE news SET enriched_at = NULL, embedded_at = NULL, indexed_at = NULL, indexed_version = NULL
WHERE published_at > %(now)s::timestamptz - interval '2 hours'""",
    """
INSERT INTO dead_letters (subscription, message_key, reason, first_seen)
SELECT 'dgb-enrichment', 'dl-' || g, (ARRAY['bad_payload', 'model_error', 'too_large'])[1 + g %% 3],
       %(now)s::timestamptz - g * interval '10 minutes'
FROM generate_series(1, 300) g""",
    "INSERT INTO host_budgets (host, rate_per_s, max_in_flight) VALUES ('www.gov.br', 2, 2)",
    """
INSERT INTO host_grants (host, at, priority)
SELECT 'www.gov.br', clock_timestamp() - g * interval '0.5 second', g % 2 FROM generate_series(1, 120) g""",
]


def timed(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--articles", type=int, default=300_000)
    ap.add_argument("--hours", type=float, default=6)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the scratch database (to EXPLAIN queries)")
    args = ap.parse_args()

    from dgb import db
    from dgb.config import Settings
    from dgb.integrity.report import band_figures
    from dgb.observe import overview
    from dgb.observe.status import pipeline_status
    from dgb_dev import stack

    settings = stack.ensure(["postgres"], Settings.from_env())
    bench_db = f"{settings.pg_db}_bench_pipeline"
    pg = stack.Postgres(settings)
    pg._psql_admin(f'DROP DATABASE IF EXISTS "{bench_db}" WITH (FORCE)')
    stack.ensure_database(pg, bench_db)
    dsn = settings.pg_dsn(bench_db)
    now = datetime.now(UTC)
    try:
        db.migrate_dsn(dsn)
        conn = db.connect(dsn)
        t0 = time.monotonic()
        with db.transaction(conn) as cur:
            cur.execute(LOAD_SQL, {"rows": args.articles, "now": now})
            for sql in RECENT_SQL:
                cur.execute(sql, {"now": now} if "%(now)s" in sql else None)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("VACUUM ANALYZE")
            cur.execute("SELECT pg_size_pretty(pg_table_size('news'))")
            size = cur.fetchone()[0]
        conn.autocommit = False
        print(f"loaded {args.articles} articles ({size}) in {time.monotonic() - t0:.1f}s")
        model, h = "bench-model", args.hours
        parts = {
            "pipeline_status": lambda: pipeline_status(conn, None, now, model=model),
            "backlog_history": lambda: overview.backlog_history(conn, now, hours=h, model=model),
            "latency_history": lambda: overview.latency_history(conn, now, hours=h),
            "dead_letters_by_reason": lambda: overview.dead_letters_by_reason(conn, now, hours=h),
            "band_figures": lambda: band_figures(conn, now),
            "pipeline_overview": lambda: overview.pipeline_overview(conn, now, hours=h, model=model),
        }
        results = {name: timed(fn, args.repeats) for name, fn in parts.items()}
        o = overview.pipeline_overview(conn, now, hours=h, model=model)
        print(f"backlog now: {o['backlog_history'][-1]}; dead-letter reasons: {len(o['dead_letters'])}")
        for name, seconds in results.items():
            print(f"  {name:24s} {seconds * 1000:8.1f} ms")
        conn.close()
    finally:
        if not args.keep:
            pg._psql_admin(f'DROP DATABASE IF EXISTS "{bench_db}" WITH (FORCE)')
    print(
        f"pipeline_view: articles={args.articles} page_load_s={results['pipeline_overview']:.3f}"
        f" backlog_history_s={results['backlog_history']:.3f} status_s={results['pipeline_status']:.3f}"
        f" bands_s={results['band_figures']:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
