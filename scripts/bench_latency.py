"""Latency benchmark: new articles at a steady rate through the real local stack.

Each article is published on the local gov.br site, scraped with the production scrape code
(commit = the row and its event in one transaction) and its event relayed to Pub/Sub; from
there the running Airflow stack takes over (ack-mode trigger -> enrich_news -> embed_news ->
index_news). Prints p50/p95/max of commit -> indexed (with theme and embedding).

    .venv/bin/python scripts/bench_latency.py [--n 20] [--interval 5] [--agency mec]

Needs `make up` running. Loopback traffic only. No assertions: it prints numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "include"))

from dgb import db, outbox
from dgb.config import settings
from dgb.fetch import Fetcher, FetchPolicy
from dgb.scraper.dags import agency_by_key
from dgb.scraper.run import scrape_agency

CORPUS = Path(__file__).resolve().parents[1] / "include" / "dgb" / "data" / "corpus" / "articles.jsonl"


def publish(mirror: str, article: dict) -> None:
    req = urllib.request.Request(
        f"{mirror}/_control/publish",
        data=json.dumps(article).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        resp.read()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--interval", type=float, default=5.0, help="seconds between two new articles")
    ap.add_argument("--agency", default="mec")
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    s = settings()
    os.environ.setdefault("PUBSUB_EMULATOR_HOST", s.pubsub_emulator_host)
    from google.cloud import pubsub_v1

    publisher = pubsub_v1.PublisherClient()
    conn = db.connect(s.pg_dsn())
    agency = agency_by_key(args.agency, s)
    templates = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    run = uuid.uuid4().hex[:6]
    new_ids: list[str] = []
    policy = FetchPolicy(min_interval=0.1)
    t_start = time.monotonic()
    for i in range(args.n):
        base = templates[(i * 7) % len(templates)]
        article = {
            "agency": args.agency,
            "title": f"{base['title']} (bench {run}-{i})",
            "subtitle": base.get("subtitle"),
            "content": base["content"],
            "category": base.get("category"),
            "tags": base.get("tags"),
            "published_at": datetime.now(UTC).isoformat(),
            "url_slug": f"bench-{run}-{i}",
        }
        publish(s.mirror_url, article)
        with Fetcher(policy) as f:
            report = scrape_agency(conn, agency, f)
        outbox.relay(conn, publisher, s.gcp_project)
        new_ids += report.new
        sleep = (i + 1) * args.interval - (time.monotonic() - t_start)
        if sleep > 0:
            time.sleep(sleep)
    deadline = time.monotonic() + args.timeout
    latencies: list[float] = []
    while time.monotonic() < deadline:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT extract(epoch FROM indexed_at - scraped_at) FROM news WHERE unique_id = ANY(%s)"
                " AND indexed_version = version AND embedded_at IS NOT NULL"
                " AND most_specific_theme_id IS NOT NULL",
                (new_ids,),
            )
            latencies = [float(r[0]) for r in cur.fetchall()]
        conn.commit()
        if len(latencies) == len(new_ids):
            break
        time.sleep(1.0)
    conn.close()
    latencies.sort()
    print(
        f"articles: {len(new_ids)} committed, {len(latencies)} indexed with theme+embedding "
        f"(rate: one per {args.interval:.1f}s)"
    )
    if latencies:
        p95 = latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))]
        print(
            f"commit->indexed p50_s={statistics.median(latencies):.2f} p95_s={p95:.2f} "
            f"max_s={latencies[-1]:.2f} min_s={latencies[0]:.2f}"
        )
    return 0 if len(latencies) == len(new_ids) else 1


if __name__ == "__main__":
    sys.exit(main())
