"""Latency benchmark: new articles at a steady rate through the real local stack.

Each article is published on the local gov.br site, scraped with the production scrape code
(commit = the row and its event in one transaction) and its event relayed to Pub/Sub; from
there the running Airflow stack takes over (ack-mode trigger -> enrich_news -> embed_news ->
index_news). Prints p50/p95/max of commit -> indexed (with theme and embedding), then where the
time went, hop by hop, from timestamps the system records anyway: the outbox (``created_at`` =
the commit's transaction, ``published_at``, ``message_id``) and Airflow's metadata database (the
asset event carrying that message id, the DAG run it queued, its task instance's start), per stage:

    relay            commit -> the scraped event confirmed by Pub/Sub (outbox published_at)
    publish->asset   Pub/Sub publish -> asset event stored by the triggerer
    asset->run       asset event -> DAG run queued by the scheduler
    run->task start  DAG run queued -> task instance started by the executor
    work             task start -> the next event committed (index: indexed_at)
    next publish     the stage's event committed -> confirmed by Pub/Sub

An article picked up by a run that was already going (its sweep), or by a run another event woke
(the embed and index stages' runs started by the scraped event, ``DGB_STAGE_EARLY_WAKE``), has no
asset->task chain of its own for that stage; it counts in the stage's total and in ``swept or
woken`` only. A chain is the run of the stage's own DAG that the event queued (the scraped event
also queues the woken DAGs' runs).

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

from dgb import db, outbox, topology
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
    from dgb import pubsub_clients

    publisher = pubsub_clients.publisher_client()
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
    hops = hop_breakdown(conn, s, new_ids) if new_ids else None
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
    if hops:
        print_breakdown(hops)
    return 0 if len(latencies) == len(new_ids) else 1


# stage -> (DAG, the subscription whose asset event starts it on the path to searchable, the topic of
# that event, the topic the stage emits (None: the index stage, done at indexed_at))
PATH = (
    ("enrich", "enrich_news", topology.SUB_ENRICHMENT, topology.TOPIC_SCRAPED, topology.TOPIC_ENRICHED),
    ("embed", "embed_news", topology.SUB_EMBEDDINGS, topology.TOPIC_ENRICHED, topology.TOPIC_EMBEDDED),
    ("index", "index_news", topology.SUB_TYPESENSE_UPDATE, topology.TOPIC_EMBEDDED, None),
)


def hop_breakdown(conn, s, unique_ids: list[str]) -> dict[str, list[float]]:
    """Seconds per hop (name -> one value per article that has it), from the outbox, the news rows
    and the Airflow metadata database (asset events, DAG runs, task instances)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT aggregate_id, topic, created_at, published_at, message_id FROM outbox"
            " WHERE aggregate_id = ANY(%s) AND published_at IS NOT NULL ORDER BY created_at",
            (unique_ids,),
        )
        events: dict[tuple[str, str], tuple] = {}
        for uid, topic, created, published, mid in cur.fetchall():
            events.setdefault((uid, topic), (created, published, mid))  # the first one of each
        cur.execute("SELECT unique_id, indexed_at FROM news WHERE unique_id = ANY(%s)", (unique_ids,))
        indexed = dict(cur.fetchall())
    conn.commit()
    message_ids = [e[2] for e in events.values() if e[2]]
    # the emulator numbers its messages from 1 again after a restart: an older asset event can
    # carry the same message id, so only events stored after these articles' first publish count
    since = min((e[1] for e in events.values() if e[1] is not None), default=None)
    af = db.connect(s.pg_dsn(s.pg_airflow_db))
    with af.cursor() as cur:
        # asset event of each message -> the first DAG run it queued -> that run's task start
        cur.execute(
            "SELECT m.mid, a.name, e.timestamp, r.dag_id, r.queued_at, ti.start_date"
            "  FROM asset_event e JOIN asset a ON a.id = e.asset_id"
            # an event holds a pulled batch (payload.messages); older ones held one message
            "  CROSS JOIN LATERAL (SELECT x ->> 'message_id' AS mid FROM"
            "        jsonb_array_elements(coalesce(e.extra::jsonb -> 'payload' -> 'messages', '[]')) x"
            "        UNION ALL SELECT e.extra::jsonb -> 'payload' ->> 'message_id') m"
            # every DAG run the event queued: with the early wake the scraped event queues the
            # embed and index DAGs' runs too, and one of those can be the first
            "  LEFT JOIN LATERAL (SELECT r.dag_id, r.run_id, r.queued_at FROM dagrun_asset_event l"
            "        JOIN dag_run r ON r.id = l.dag_run_id WHERE l.event_id = e.id) r ON true"
            "  LEFT JOIN task_instance ti ON ti.dag_id = r.dag_id AND ti.run_id = r.run_id"
            " WHERE m.mid = ANY(%s) AND e.timestamp >= %s ORDER BY r.queued_at DESC",
            (message_ids, since),
        )
        # (message, asset, DAG) -> the first run of that DAG the event queued (rows newest first)
        chain = {(row[0], row[1], row[3]): row[2:] for row in cur.fetchall()}
    af.close()
    hops: dict[str, list[float]] = {}

    def add(name: str, start, end) -> None:
        if start is not None and end is not None:
            hops.setdefault(name, []).append((end - start).total_seconds())

    for uid in unique_ids:
        scraped = events.get((uid, topology.TOPIC_SCRAPED))
        if scraped is None:
            continue
        add("relay", scraped[0], scraped[1])
        for stage, dag_id, sub, topic, emits in PATH:
            event = events.get((uid, topic))
            done = events.get((uid, emits), (None,))[0] if emits else indexed.get(uid)
            if event is None or done is None:
                continue
            add(f"{stage}: total (publish -> next commit)", event[1], done)
            ts, _dag, queued, started = chain.get((event[2], sub, dag_id), (None, None, None, None))
            if ts is None or started is None or done < started:
                hops.setdefault(f"{stage}: swept or woken (no chain of its own)", []).append(0.0)
            else:
                add(f"{stage}: publish->asset", event[1], ts)
                add(f"{stage}: asset->run", ts, queued)
                add(f"{stage}: run->task start", queued, started)
                add(f"{stage}: work", started, done)
            if emits:
                add(f"{stage}: next publish", done, events.get((uid, emits), (None, None))[1])
    return hops


def print_breakdown(hops: dict[str, list[float]]) -> None:
    print("per hop (seconds; n = articles with that hop):")
    for name, values in hops.items():
        if "swept" in name:
            print(f"  {name:40s} n={len(values)}")
            continue
        values = sorted(values)
        p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
        print(
            f"  {name:40s} p50={statistics.median(values):6.2f} p95={p95:6.2f} "
            f"mean={statistics.fmean(values):6.2f} n={len(values)}"
        )


if __name__ == "__main__":
    sys.exit(main())
