#!/usr/bin/env python
"""Integrity service benchmark. Prints numbers only (key=value lines).

(a) Cheap change detection: for N unchanged pages of the local gov.br site (started here on a
    free 127.0.0.1 port), response bytes on the wire of the integrity check (conditional GET of
    the article with its stored ETag/Last-Modified -> 304, plus the image HEAD) divided by the
    bytes of a full re-fetch of the same article. Target <= 0.05.
(b) Due-set query at scale: 1,000,000 synthetic articles (and their integrity_state rows) in a
    temporary database ``dgb_bench_integrity`` (created, migrated, dropped at the end); the time
    of one tier's due query (LIMIT = the tier batch) for every tier, median of repeated runs,
    and whether the plan reads the ``integrity_state_tier_due_idx`` index. Target <= 0.5 s. Also
    the budget run's plan on those rows: loading every candidate, choosing an hour's checks, and
    the Python heap's peak while the candidates load (``due.plan_*``); the due-suspects query with
    and without its partial index (``due.suspects_*``).

    .venv/bin/python scripts/bench_integrity.py [--pages N] [--rows N] [--skip-db] [--skip-http]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "include" / "dgb" / "data" / "corpus" / "articles.jsonl"
BENCH_DB = "dgb_bench_integrity"


class CountingStream(httpx.SyncByteStream):
    def __init__(self, inner, counter: list[int]):
        self.inner, self.counter = inner, counter

    def __iter__(self):
        for chunk in self.inner:
            self.counter[0] += len(chunk)
            yield chunk

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close:
            close()


class CountingTransport(httpx.BaseTransport):
    """Counts response bytes on the wire: status line, headers and body."""

    def __init__(self, inner: httpx.BaseTransport):
        self.inner = inner
        self.counter = [0]
        self.requests = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        resp = self.inner.handle_request(request)
        self.requests += 1
        self.counter[0] += len(f"HTTP/1.1 {resp.status_code} {resp.reason_phrase}\r\n") + 2
        self.counter[0] += sum(len(k) + len(v) + 4 for k, v in resp.headers.raw)
        return httpx.Response(
            resp.status_code,
            headers=resp.headers,
            stream=CountingStream(resp.stream, self.counter),
            extensions=resp.extensions,
            request=request,
        )

    def close(self) -> None:
        self.inner.close()

    def reset(self) -> None:
        self.counter[0], self.requests = 0, 0

    @property
    def bytes(self) -> int:
        return self.counter[0]


def bench_bytes(pages: int) -> dict:
    from dgb.fetch import Fetcher, FetchPolicy
    from dgb.integrity.checks import (
        article_fields,
        check_content,
        check_image,
        parse_page,
        plone6_api_url,
        site_kind,
    )
    from dgb.urlpolicy import UrlPolicy, guarded_transport
    from dgb_dev.mirror.server import start_in_thread
    from dgb_dev.mirror.site import Site

    site = Site(CORPUS, extra_dir=None)
    server, base = start_in_thread(site)
    try:
        policy = UrlPolicy(allowed_hosts=["gov.br", "*.gov.br", base.split("//", 1)[1]], allow_loopback=True)
        fast = FetchPolicy(min_interval=0.0, retries=1, backoff_base=0.05)
        items = []
        for key in site.agency_keys():
            for a in site.articles(key):
                items.append((key, site.article_url(base, a)))
        items = (items * (pages // max(1, len(items)) + 1))[:pages]
        transport = CountingTransport(guarded_transport(policy))
        with Fetcher(fast, url_guard=policy.guard, transport=transport) as f:
            rows = []
            for agency, url in items:  # the stored state: what the scrape + first check saw
                kind = site_kind(None, agency, url)
                resource = (plone6_api_url(url, agency) if kind == "plone6_api" else None) or url
                resp = f.get(resource)
                effective = "html" if kind == "plone6_api" and resource == url else kind
                art = parse_page(effective, resp, url, agency, None)
                row = {
                    "url": url,
                    "agency_key": agency,
                    "published_at": art.published_at,
                    **article_fields(art),
                }
                state = {"etag": resp.headers.get("etag"), "last_modified": resp.headers.get("last-modified")}
                rows.append((resource, row, state))
            transport.reset()
            for resource, _, _ in rows:
                f.get(resource)
            full_bytes, full_requests = transport.bytes, transport.requests
            transport.reset()
            statuses = {}
            for _, row, state in rows:
                content = check_content(f, None, row, state)
                image = check_image(f, row["image_url"])
                statuses[content.status] = statuses.get(content.status, 0) + 1
                statuses["image_" + image.status] = statuses.get("image_" + image.status, 0) + 1
            check_bytes, check_requests = transport.bytes, transport.requests
    finally:
        server.shutdown()
        server.server_close()
    return {
        "pages": len(items),
        "full_refetch_bytes": full_bytes,
        "full_refetch_requests": full_requests,
        "integrity_check_bytes": check_bytes,
        "integrity_check_requests": check_requests,
        "ratio": round(check_bytes / full_bytes, 4) if full_bytes else None,
        "unchanged": statuses.get("unchanged", 0),
        "not_unchanged": pages - statuses.get("unchanged", 0),
        "images_ok": statuses.get("image_ok", 0) + statuses.get("image_no_image", 0),
    }


LOAD_SQL = """
INSERT INTO news (unique_id, agency_key, agency_name, title, url, image_url, content,
                  published_at, scraped_at)
SELECT %(prefix)s || g, 'ag' || (g %% 150), 'Agency ' || (g %% 150), 'Notícia sintética ' || g,
       'https://www.gov.br/ag' || (g %% 150) || '/pt-br/noticias/' || %(prefix)s || g,
       'https://www.gov.br/ag' || (g %% 150) || '/imagens/' || g || '.jpg', 'texto',
       now() - (random() * interval '1095 days'), now()
FROM generate_series(1, %(rows)s) g
"""

STATE_SQL = """
INSERT INTO integrity_state (news_id, tier, last_checked_at, next_due_at, checks)
SELECT n.id, t.tier, lc.last_checked_at,
       CASE WHEN lc.last_checked_at IS NULL THEN '-infinity'::timestamptz
            ELSE lc.last_checked_at + t.every END,
       CASE WHEN lc.last_checked_at IS NULL THEN 0 ELSE 1 + (n.id % 50)::int END
FROM news n
CROSS JOIN LATERAL (SELECT CASE
        WHEN n.published_at > now() - interval '3 days'  THEN '0_2d'
        WHEN n.published_at > now() - interval '8 days'  THEN '3_7d'
        WHEN n.published_at > now() - interval '31 days' THEN '8_30d'
        WHEN n.published_at > now() - interval '91 days' THEN '31_90d'
        ELSE 'gt90d' END AS tier) tn
CROSS JOIN LATERAL (SELECT tn.tier, CASE tn.tier
        WHEN '0_2d' THEN interval '10 minutes' WHEN '3_7d' THEN interval '1 hour'
        WHEN '8_30d' THEN interval '6 hours' WHEN '31_90d' THEN interval '1 day'
        ELSE interval '7 days' END AS every) t
CROSS JOIN LATERAL (SELECT CASE WHEN n.id % 50 = 0 THEN NULL   -- 2% never checked
        ELSE now() - random() * t.every * 1.5 END AS last_checked_at) lc
"""


def bench_due(rows: int, repeats: int = 7) -> dict:
    from dgb import db
    from dgb.config import Settings
    from dgb.integrity import tiers
    from dgb.integrity.backpressure import backlog
    from dgb_dev import stack

    settings = stack.ensure(["postgres"], Settings.from_env())
    pg = stack.Postgres(settings)
    pg._psql_admin(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')
    stack.ensure_database(pg, BENCH_DB)
    dsn = settings.pg_dsn(BENCH_DB)
    out: dict = {"rows": rows}
    try:
        db.migrate_dsn(dsn)
        conn = db.connect(dsn)
        t0 = time.monotonic()
        with db.transaction(conn) as cur:
            cur.execute("ALTER TABLE news DISABLE TRIGGER news_integrity_enrol")
            cur.execute(LOAD_SQL, {"rows": rows, "prefix": "bench-"})
            cur.execute(STATE_SQL)
            cur.execute("ALTER TABLE news ENABLE TRIGGER news_integrity_enrol")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("VACUUM ANALYZE news")
            cur.execute("VACUUM ANALYZE integrity_state")
        conn.autocommit = False
        out["load_seconds"] = round(time.monotonic() - t0, 1)
        schedule = tiers.Schedule()
        batch = 400
        worst = 0.0
        for tier in schedule.tiers:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT count(*), count(*) FILTER (WHERE next_due_at <= now())"
                    " FROM integrity_state WHERE tier = %s",
                    (tier.name,),
                )
                size, due = cur.fetchone()
            conn.commit()
            tiers.due_articles(conn, tier.name, batch)  # warm-up
            times = []
            for _ in range(repeats):
                t = time.perf_counter()
                got = tiers.due_articles(conn, tier.name, batch)
                times.append(time.perf_counter() - t)
            med = statistics.median(times)
            worst = max(worst, med)
            with conn.cursor() as cur:
                cur.execute(
                    "EXPLAIN (ANALYZE, BUFFERS) " + tiers.DUE_SQL,
                    {"tier": tier.name, "now": time_now(), "limit": batch},
                )
                plan = "\n".join(r[0] for r in cur.fetchall())
            conn.commit()
            out[f"tier_{tier.name}_rows"] = size
            out[f"tier_{tier.name}_due"] = due
            out[f"tier_{tier.name}_returned"] = len(got)
            out[f"tier_{tier.name}_due_query_seconds"] = round(med, 4)
            out[f"tier_{tier.name}_uses_index"] = int("integrity_state_tier_due_idx" in plan)
        out["due_query_seconds_max"] = round(worst, 4)
        # placing 1,000 new articles (trigger-enrolled, tier NULL) and the backlog probe
        with db.transaction(conn) as cur:
            cur.execute(LOAD_SQL, {"rows": 1000, "prefix": "bench-new-"})
        t = time.perf_counter()
        out["assign_tiers_placed"] = tiers.assign_tiers(conn, schedule)
        out["assign_tiers_seconds"] = round(time.perf_counter() - t, 4)
        t = time.perf_counter()
        backlog(conn, 5000, 60)
        out["backlog_probe_seconds"] = round(time.perf_counter() - t, 4)
        # the budget run's plan: every candidate loaded, then chosen (each round of a run does both)
        out.update(bench_plan(conn, repeats=3))
        out.update(bench_suspects(conn, repeats))
        from dgb.integrity.report import integrity_report

        t = time.perf_counter()
        integrity_report(conn)
        out["report_seconds"] = round(time.perf_counter() - t, 3)
        conn.close()
    finally:
        pg._psql_admin(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')
    return out


def bench_plan(conn, repeats: int) -> dict:
    """One budget round's plan on the loaded rows: :func:`tiers.load_candidates` (the query and the
    arrays) and :func:`tiers.choose` for an hour's capacity at 2 requests/s, median seconds of
    ``repeats``, and the Python heap's peak while the candidates load (tracemalloc, a separate call)."""
    import tracemalloc

    from dgb.integrity import tiers

    policy = tiers.BudgetPolicy.from_env()
    loads, chooses = [], []
    for _ in range(repeats):
        now = time_now()
        t = time.perf_counter()
        cands = tiers.load_candidates(conn, now, policy)
        loads.append(time.perf_counter() - t)
        t = time.perf_counter()
        plan = tiers.choose(cands, now.timestamp(), 7200.0, policy)
        chooses.append(time.perf_counter() - t)
    tracemalloc.start()
    tiers.load_candidates(conn, time_now(), policy)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "plan_candidates": len(cands),
        "plan_chosen": len(plan.index),
        "plan_load_candidates_seconds": round(statistics.median(loads), 3),
        "plan_choose_seconds": round(statistics.median(chooses), 3),
        "plan_load_candidates_peak_mib": round(peak / 2**20, 1),
    }


SUSPECTS_SQL = """
UPDATE integrity_state SET gone_since = now() - interval '20 minutes', gone_checks = 1,
       next_due_at = now() - random() * interval '10 minutes'
WHERE news_id % 1000 = 7
"""


def bench_suspects(conn, repeats: int) -> dict:
    """The due-suspects query a budget run asks every minute (one row in 1,000 with a gone answer
    waiting for its confirmation), median seconds with the partial index
    ``integrity_state_suspects_due_idx`` and, in the same run, without it (dropped, then made again)."""
    from dgb import db
    from dgb.integrity import tiers

    policy = tiers.BudgetPolicy.from_env()
    with db.transaction(conn) as cur:
        cur.execute(SUSPECTS_SQL)
        marked = cur.rowcount
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("ANALYZE integrity_state")
    conn.autocommit = False

    def timed() -> tuple[float, int, str]:
        tiers.load_due_suspects(conn, time_now(), policy, 400)  # warm-up
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            got = tiers.load_due_suspects(conn, time_now(), policy, 400)
            times.append(time.perf_counter() - t)
        with conn.cursor() as cur:
            cur.execute(
                "EXPLAIN " + tiers.DUE_SUSPECTS_SQL,
                {"now": time_now(), "recent": time_now(), "limit": 400},
            )
            plan = "\n".join(r[0] for r in cur.fetchall())
        conn.commit()
        return statistics.median(times), len(got), plan

    with db.transaction(conn) as cur:
        cur.execute("SELECT to_regclass('integrity_state_suspects_due_idx') IS NOT NULL")
        has_index = cur.fetchone()[0]
    out = {"suspects_marked": marked}
    if has_index:  # the migrations of the code measured made it (0022)
        with_idx, found, plan = timed()
        out["suspects_returned"] = found
        out["suspects_query_seconds"] = round(with_idx, 4)
        out["suspects_uses_index"] = int("integrity_state_suspects_due_idx" in plan)
        with db.transaction(conn) as cur:
            cur.execute("DROP INDEX integrity_state_suspects_due_idx")
    without_idx, found_without, _ = timed()
    out["suspects_returned_without_index"] = found_without
    out["suspects_query_seconds_without_index"] = round(without_idx, 4)
    if has_index:
        with db.transaction(conn) as cur:  # as the migration made it
            cur.execute(
                "CREATE INDEX integrity_state_suspects_due_idx ON integrity_state (next_due_at, news_id)"
                " WHERE gone_since IS NOT NULL"
            )
    return out


def time_now():
    from datetime import datetime

    return datetime.now(UTC)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=100)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--skip-db", action="store_true")
    ap.add_argument("--skip-http", action="store_true")
    args = ap.parse_args(argv)
    if not args.skip_http:
        for k, v in bench_bytes(args.pages).items():
            print(f"bytes.{k}={v}")
    if not args.skip_db:
        for k, v in bench_due(args.rows).items():
            print(f"due.{k}={v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
