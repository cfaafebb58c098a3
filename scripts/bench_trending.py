"""Trending benchmark: one run of the trending job's PostgreSQL part at production size, and the
rate of partial updates to Typesense.

Loads N articles (default 300,000 over 5 years, ~165 a day, a level-1 theme each) into a scratch
database, the last day busier; every article older than a day holds a stale non-zero
``trending_score`` in ``news_features`` (an adopted production database: its scores never
expire). Times :func:`dgb.engagement.trending.compute`:

* the first run (no watermark: every stale score is set to 0),
* a steady run (a watermark 10 minutes old: only the live day is rescored), median of 5;

then sends ``--updates`` partial updates (``trending_score`` only) to a scratch Typesense
collection of minimal documents and prints updates/s. Numbers on a shared machine are noisy.

    .venv/bin/python scripts/bench_trending.py [--articles 300000] [--updates 5000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for sub in ("include", "dev"):
    sys.path.insert(0, str(ROOT / sub))

LOAD_SQL = """
INSERT INTO news (unique_id, agency_key, title, url, published_at, theme_l1_id, enriched_at)
SELECT 'bench-' || g, 'ag' || (g %% 160), 'Notícia sintética ' || g,
       'https://www.gov.br/ag' || (g %% 160) || '/bench-' || g, p,
       (SELECT id FROM themes WHERE level = 1 ORDER BY id OFFSET (g::bigint * 7919) %% 25 LIMIT 1), p
  FROM generate_series(1, %(rows)s) g
 CROSS JOIN LATERAL (SELECT %(now)s::timestamptz - (%(rows)s - g) * interval '5 years' / %(rows)s AS p) t
"""
BUSY_DAY_SQL = """
INSERT INTO news (unique_id, agency_key, title, url, published_at, theme_l1_id, enriched_at)
SELECT 'today-' || g, 'ag1', 'Notícia de hoje ' || g, 'https://www.gov.br/ag1/today-' || g,
       %(now)s::timestamptz - g * interval '1 minute', (SELECT id FROM themes WHERE code = '01'), now()
  FROM generate_series(1, 600) g
"""
STALE_SQL = """
INSERT INTO news_features (unique_id, features)
SELECT unique_id, jsonb_build_object('trending_score', 1.75, 'word_count', 420)
  FROM news WHERE published_at < %(now)s::timestamptz - interval '1 day'
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--articles", type=int, default=300_000)
    ap.add_argument("--updates", type=int, default=5_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    from dgb import db
    from dgb.config import Settings
    from dgb.engagement.trending import compute
    from dgb.search import schema
    from dgb.search.partial import update_fields
    from dgb.taxonomy import load_taxonomy, themes_rows
    from dgb_dev import stack

    settings = stack.ensure(["postgres", "typesense"], Settings.from_env())
    bench_db = f"{settings.pg_db}_bench_trending"
    pg = stack.Postgres(settings)
    pg._psql_admin(f'DROP DATABASE IF EXISTS "{bench_db}" WITH (FORCE)')
    stack.ensure_database(pg, bench_db)
    dsn = settings.pg_dsn(bench_db)
    now = datetime.now(UTC)
    try:
        db.migrate_dsn(dsn)
        conn = db.connect(dsn)
        db.upsert_themes(conn, themes_rows(load_taxonomy()))
        t0 = time.monotonic()
        with db.transaction(conn) as cur:
            for sql in (LOAD_SQL, BUSY_DAY_SQL, STALE_SQL):
                cur.execute(sql, {"rows": args.articles, "now": now})
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("VACUUM ANALYZE")
        conn.autocommit = False
        print(f"loaded {args.articles} articles + 600 today in {time.monotonic() - t0:.1f}s")

        t = time.perf_counter()
        first = compute(conn, now=now, since=None)
        first_s = time.perf_counter() - t
        print(
            f"first run: {first_s:.3f}s live={first['live']} expired={first['expired']}"
            f" changed={len(first['changed'])}"
        )
        steady = []
        for k in range(args.repeats):
            t = time.perf_counter()
            out = compute(conn, now=now + timedelta(minutes=k), since=now - timedelta(minutes=10))
            steady.append(time.perf_counter() - t)
        steady_s = statistics.median(steady)
        print(f"steady run: {steady_s:.3f}s (median of {args.repeats}) changed={len(out['changed'])}")
        conn.close()
    finally:
        pg._psql_admin(f'DROP DATABASE IF EXISTS "{bench_db}" WITH (FORCE)')

    ts = schema.client(settings, timeout=30)
    body = schema.collection_schema(8, f"bench_trending_{int(time.time())}")
    ts.collections.create(body)
    try:
        docs = ts.collections[body["name"]].documents
        ids = [f"d{i}" for i in range(args.updates)]
        docs.import_("\n".join(f'{{"id": "{i}", "unique_id": "{i}", "published_at": 1}}' for i in ids))
        t = time.perf_counter()
        res = update_fields(ts, body["name"], {i: {"trending_score": 1.5} for i in ids})
        push_s = time.perf_counter() - t
        assert len(res.updated) == args.updates, res.as_dict()
    finally:
        ts.collections[body["name"]].delete()
    print(
        f"trending: articles={args.articles} first_run_s={first_s:.3f} steady_run_s={steady_s:.3f}"
        f" partial_updates_per_s={args.updates / push_s:.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
