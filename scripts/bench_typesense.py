#!/usr/bin/env python
"""Typesense: our sync() rate vs a raw bulk import of the same documents. Prints numbers only.

    .venv/bin/python scripts/bench_typesense.py [--docs 2000] [--rounds 3]

Needs a running stack's Typesense and PostgreSQL (settings from the environment). Uses its own
temporary alias ``bench_<uuid>`` and a temporary database ``dgb_bench`` (created, migrated,
filled with synthetic articles, dropped at the end).

* raw: the documents prebuilt in memory (Python dicts), ``documents.import_`` once per 500,
  into a fresh collection (the client serialises them);
* raw_jsonl: the same documents pre-serialised to JSONL before the clock starts (what the
  server alone costs: the floor for any client);
* sync: ``dgb.search.sync.sync`` from PostgreSQL (fetch whole documents with theme joins,
  upsert, check every result, mark indexed in PostgreSQL) into a fresh collection, at the same
  batch size (500) and at its default (100).
Each figure is the median over ``--rounds`` runs; ratio = sync / raw (target >= 0.8).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "include" / "dgb" / "data" / "corpus" / "articles.jsonl"
BENCH_DB = "dgb_bench"
RAW_BATCH = 500


def corpus() -> list[dict]:
    try:
        return [json.loads(x) for x in CORPUS.read_text(encoding="utf-8").splitlines() if x.strip()]
    except FileNotFoundError:
        return [
            {
                "title": "Notícia sintética",
                "content": "Texto sintético da notícia. " * 100,
                "subtitle": "Linha fina",
                "category": "Geral",
                "tags": ["sintético"],
            }
        ]


def fill(conn, n: int, dim: int) -> list[str]:
    from dgb import db

    rng = random.Random(42)
    pool = corpus()
    base = datetime(2026, 1, 1, tzinfo=UTC)
    with db.transaction(conn) as cur:
        cur.execute("TRUNCATE news RESTART IDENTITY CASCADE")
        cur.execute(
            "INSERT INTO agencies (key, name, url) VALUES ('bench', 'Agência Bench', "
            "'https://www.gov.br/bench') ON CONFLICT (key) DO NOTHING"
        )
        for code, label, level, parent in (
            ("01", "Tema", 1, None),
            ("01.01", "Subtema", 2, "01"),
            ("01.01.01", "Assunto", 3, "01.01"),
        ):
            cur.execute(
                "INSERT INTO themes (code, label, full_name, level, parent_code, description)"
                " VALUES (%s, %s, %s, %s, %s, 'bench') ON CONFLICT (code) DO NOTHING",
                (code, label, label, level, parent),
            )
        cur.execute("SELECT code, id FROM themes WHERE code IN ('01', '01.01', '01.01.01')")
        t = dict(cur.fetchall())
        rows = []
        for i in range(n):
            a = pool[i % len(pool)]
            vec = [rng.gauss(0, 1) for _ in range(dim)]
            norm = sum(x * x for x in vec) ** 0.5
            rows.append(
                (
                    f"bench-{i:06d}",
                    "bench",
                    "Agência Bench",
                    f"{a['title']} ({i})",
                    f"https://www.gov.br/bench/noticias/{i}",
                    a.get("subtitle"),
                    a.get("category"),
                    list(a.get("tags") or []),
                    a["content"],
                    a.get("subtitle"),
                    base + timedelta(minutes=i),
                    f"hash-{i}",
                    [x / norm for x in vec],
                    "bench-model",
                    dim,
                    t["01"],
                    t["01.01"],
                    t["01.01.01"],
                    t["01.01.01"],
                )
            )
        cur.executemany(
            "INSERT INTO news (unique_id, agency_key, agency_name, title, url, subtitle, category, tags,"
            " content, summary, published_at, content_hash, content_embedding, embedding_model,"
            " embedding_dim, theme_l1_id, theme_l2_id, theme_l3_id, most_specific_theme_id, enriched_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s::real[], %s, %s, %s, %s, %s, %s,"
            " now())",
            rows,
        )
    return [r[0] for r in rows]


def fresh_collection(ts, settings) -> str:
    from dgb.search import schema

    alias = settings.typesense_collection
    name = schema.collection_schema(settings.embedding_dim, alias)["name"]
    try:
        ts.collections[name].delete()
    except Exception:
        pass
    schema.ensure_collection(settings, ts)
    return alias


def drop_alias(ts, alias: str) -> None:
    for c in ts.collections.retrieve():
        if c["name"].startswith(alias + "_"):
            ts.collections[c["name"]].delete()
    try:
        ts.aliases[alias].delete()
    except Exception:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from dgb import db
    from dgb.config import Settings
    from dgb.search import documents, schema, sync
    from dgb_dev import stack
    from dgb_dev.stack.process import http_ok, port_open

    base = Settings.from_env()
    if not http_ok(f"http://{base.typesense_host}:{base.typesense_port}/health"):
        print(
            f"typesense not running at {base.typesense_host}:{base.typesense_port} (make up)", file=sys.stderr
        )
        return 2
    if not port_open(base.pg_host, base.pg_port):
        print(f"postgres not running at {base.pg_host}:{base.pg_port} (make up)", file=sys.stderr)
        return 2
    alias = f"bench_{uuid.uuid4().hex[:8]}"
    settings = replace(base, typesense_collection=alias, pg_db=BENCH_DB)
    dim = settings.embedding_dim
    pg = stack.Postgres(settings)
    stack.ensure_database(pg, BENCH_DB)
    db.migrate_dsn(settings.pg_dsn(BENCH_DB))
    ts = schema.client(settings, timeout=60.0)
    conn = db.connect(settings.pg_dsn(BENCH_DB))
    raw_rates, jsonl_rates, sync_rates, sync100_rates = [], [], [], []
    try:
        ids = fill(conn, args.docs, dim)
        docs = list(documents.fetch_documents(conn, ids, dim).docs.values())
        payload_mb = sum(len(json.dumps(d)) for d in docs) / 1e6
        for _ in range(args.rounds):
            fresh_collection(ts, settings)
            t0 = time.perf_counter()
            ok = 0
            for start in range(0, len(docs), RAW_BATCH):
                lines = ts.collections[alias].documents.import_(
                    docs[start : start + RAW_BATCH], {"action": "upsert"}
                )
                ok += sum(1 for x in lines if x.get("success"))
            raw_rates.append(len(docs) / (time.perf_counter() - t0))
            assert ok == len(docs), f"raw import: {ok}/{len(docs)} succeeded"

            bodies = [
                "\n".join(json.dumps(d) for d in docs[i : i + RAW_BATCH])
                for i in range(0, len(docs), RAW_BATCH)
            ]
            fresh_collection(ts, settings)
            t0 = time.perf_counter()
            ok = 0
            for body in bodies:
                answer = ts.collections[alias].documents.import_(body, {"action": "upsert"})
                ok += sum(1 for x in answer.splitlines() if json.loads(x).get("success"))
            jsonl_rates.append(len(docs) / (time.perf_counter() - t0))
            assert ok == len(docs), f"raw jsonl import: {ok}/{len(docs)} succeeded"

            for batch, rates in ((RAW_BATCH, sync_rates), (100, sync100_rates)):
                fresh_collection(ts, settings)
                with db.transaction(conn) as cur:
                    cur.execute("UPDATE news SET indexed_at = NULL, indexed_version = NULL")
                t0 = time.perf_counter()
                res = sync.sync(ts, alias, conn, ids, dim, batch_size=batch)
                rates.append(len(ids) / (time.perf_counter() - t0))
                assert len(res.indexed) == len(ids) and res.marked == len(ids), (len(res.indexed), res.failed)
    finally:
        conn.close()
        drop_alias(ts, alias)
        try:
            pg._psql_admin(f'DROP DATABASE IF EXISTS "{BENCH_DB}"')
        except Exception as exc:
            print(f"could not drop {BENCH_DB}: {exc}", file=sys.stderr)

    raw, jsonl, syn, syn100 = (
        statistics.median(x) for x in (raw_rates, jsonl_rates, sync_rates, sync100_rates)
    )
    print(f"docs={len(ids)} embedding_dim={dim} payload_mb={payload_mb:.1f} rounds={args.rounds}")
    print(f"raw_import_docs_per_s={raw:.0f} (batch {RAW_BATCH})")
    print(f"raw_jsonl_import_docs_per_s={jsonl:.0f} (batch {RAW_BATCH}, pre-serialised)")
    print(f"sync_docs_per_s={syn:.0f} (batch {RAW_BATCH})")
    print(f"sync_batch100_docs_per_s={syn100:.0f}")
    print(f"ratio_sync_over_raw={syn / raw:.2f}")
    print(f"ratio_sync_batch100_over_raw={syn100 / raw:.2f}")
    print(f"ratio_sync_over_raw_jsonl={syn / jsonl:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
