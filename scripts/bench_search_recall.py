"""Search quality on real news: production's summaries as paraphrase queries.

    .venv/bin/python scripts/bench_search_recall.py [--data ../shared/data/classifier-dev]
                                                    [--sources real,archive] [--keep]

Real gov.br articles (``real.jsonl``: 300 of January-March 2026, ~100 agencies; ``archive.jsonl``:
956 of production's 2015-2025 export) go through the pipeline's own stage code into a scratch
database (``dgb_recall``) and a scratch Typesense alias (``recall_news``): stored as the scraper
stores them, enriched by the local classifier (theme, extractive summary, features), embedded and
indexed by the index stage, as in production. Then each article's ``reference_summary`` (an
LLM-written summary: production's stored one for the archive) is sent as a query, as ``dgb search``
sends it (:func:`dgb.search.query.search`): keyword, and ``--semantic`` (hybrid: keyword and vector
fused), and the vector query alone. Recall@k is the share of queries whose own article is among
the first k hits. Printed per source and mode; the last line::

    recall: hybrid_at1=<x> keyword_at1=<x> vector_at1=<x> hybrid_at5=<x> n=<queries> load=<1-min>

Needs PostgreSQL and Typesense (``make up`` or the test servers); the embedder of ``DGB_EMBEDDER``
(the model service, or the bundled model in-process). The scratch database and alias are dropped
at the end unless ``--keep`` (then a rerun with ``--reuse`` only queries).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "dev")]
SHARED = ROOT.parent / "shared" / "data" / "classifier-dev"
SCRATCH_DB = "dgb_recall"
SCRATCH_ALIAS = "recall_news"


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def load_articles(data: Path, sources: list[str], known_agencies: set[str]) -> list[tuple[dict, str]]:
    """(row, source) of every article with a reference summary and a known agency, one per title."""
    out, titles = [], set()
    for source in sources:
        for r in rows(data / f"{source}.jsonl"):
            summary = r.get("reference_summary")
            if not isinstance(summary, str) or not summary.strip() or r["agency"] not in known_agencies:
                continue
            if r["title"] in titles:
                continue
            titles.add(r["title"])
            out.append((r, source))
    return out


def store(conn, articles: list[tuple[dict, str]]) -> dict[str, tuple[str, str]]:
    """Store the articles as the scraper would; returns unique_id -> (summary query, source)."""
    from dgb.agencies import load_agencies
    from dgb.scraper.models import Article
    from dgb.scraper.store import save_articles

    catalogue = load_agencies()
    by_agency: dict[str, list[tuple[Article, dict, str]]] = {}
    for r, source in articles:
        published = datetime.fromisoformat(str(r["published_at"]).replace("Z", "+00:00"))
        art = Article(
            url=f"https://www.gov.br/{r['agency']}/pt-br/assuntos/noticias/recall-{r['id']}",
            agency=r["agency"],
            title=r["title"],
            subtitle=r.get("subtitle") if isinstance(r.get("subtitle"), str) else None,
            editorial_lead=r.get("editorial_lead") if isinstance(r.get("editorial_lead"), str) else None,
            content=r["content"],
            published_at=published,
        )
        by_agency.setdefault(r["agency"], []).append((art, r, source))
    queries = {}
    for agency, items in by_agency.items():
        save_articles(conn, agency, catalogue[agency].name, [a for a, _, _ in items])
        for art, r, source in items:
            queries[art.unique_id] = (r["reference_summary"], source)
    return queries


def run_pipeline(conn, s, embedder, ts) -> None:
    from dgb.enrich.local import LocalClassifier
    from dgb.features.compute import FeatureComputer
    from dgb.pipeline import stages
    from dgb.pipeline.runner import RunOptions, run_stage

    enrich = stages.EnrichStage(
        LocalClassifier(embedder), conn, embedder=embedder, features=FeatureComputer()
    )
    embed = stages.EmbedStage(embedder, s.embedding_model)
    index = stages.IndexStage(ts, s.typesense_collection, conn, s.embedding_dim)
    for stage in (enrich, embed, index):
        t = time.monotonic()
        done = 0
        while True:
            report = run_stage(stage, conn, [], RunOptions(sweep_limit=500, quiet=True))
            done += len(report.processed)
            if not report.processed:
                break
        print(
            f"stage {stage.definition.name}: {done} articles in {time.monotonic() - t:.1f} s", file=sys.stderr
        )


def vector_only(ts, alias: str, vec, limit: int) -> list[str]:
    from dgb.search import query

    res = query._multi_search(
        ts,
        alias,
        [
            {
                "collection": alias,
                "q": "*",
                "per_page": limit,
                "group_by": "content_hash",
                "group_limit": 1,
                "include_fields": "unique_id",
                "vector_query": f"content_embedding:([{query._vector_literal(vec)}], k: {limit})",
            }
        ],
    )[0]
    return [h["document"]["unique_id"] for h in query._hits(res)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=SHARED)
    ap.add_argument("--sources", default="real,archive")
    ap.add_argument("--keep", action="store_true", help="keep the scratch database and alias")
    ap.add_argument("--reuse", action="store_true", help="query a kept scratch index (no pipeline run)")
    args = ap.parse_args(argv)

    from dgb import db
    from dgb.agencies import load_agencies
    from dgb.config import settings as current
    from dgb.embed import get_embedder
    from dgb.search import query, schema
    from dgb_dev.stack.components import component
    from dgb_dev.stack.postgres import ensure_database

    s = replace(current(), pg_db=SCRATCH_DB, typesense_collection=SCRATCH_ALIAS)
    pg = component(s, "postgres")
    if not args.reuse:
        pg._psql_admin(f'DROP DATABASE IF EXISTS "{SCRATCH_DB}" WITH (FORCE)')
    ensure_database(pg, SCRATCH_DB)
    conn = db.connect(s.pg_dsn())
    ts = schema.client(s, timeout=30)
    embedder = get_embedder(s)
    articles = load_articles(args.data, args.sources.split(","), set(load_agencies()))
    if args.reuse:
        with conn.cursor() as cur:
            cur.execute("SELECT unique_id, url FROM news")
            urls = {url.rsplit("recall-", 1)[-1]: uid for uid, url in cur.fetchall()}
        conn.rollback()
        queries = {urls[r["id"]]: (r["reference_summary"], src) for r, src in articles if r["id"] in urls}
    else:
        db.migrate(conn)
        conn.close()  # the migrations leave the connection in autocommit
        conn = db.connect(s.pg_dsn())
        db.upsert_agencies(conn, load_agencies().values())
        from dgb.taxonomy import load_taxonomy, themes_rows

        db.upsert_themes(conn, themes_rows(load_taxonomy()))
        try:
            ts.aliases[SCRATCH_ALIAS].delete()
        except Exception:
            pass
        schema.ensure_collection(s, ts)
        queries = store(conn, articles)
        run_pipeline(conn, s, embedder, ts)

    modes = ("keyword", "hybrid", "vector")
    ranks: dict[str, dict[str, list[int | None]]] = {m: {} for m in modes}
    t = time.monotonic()
    for uid, (text, source) in queries.items():
        vec = embedder.encode([text])[0]
        got = {
            "keyword": [h.unique_id for h in query.search(ts, SCRATCH_ALIAS, text, limit=10)],
            "hybrid": [
                h.unique_id
                for h in query.search(
                    ts, SCRATCH_ALIAS, text, semantic=True, embedder=_Fixed(embedder, vec), limit=10
                )
            ],
            "vector": vector_only(ts, SCRATCH_ALIAS, vec, 10),
        }
        for mode in modes:
            ids = got[mode]
            ranks[mode].setdefault(source, []).append(ids.index(uid) + 1 if uid in ids else None)
    print(f"{len(queries)} queries in {time.monotonic() - t:.1f} s", file=sys.stderr)

    def at(values: list[int | None], k: int) -> float:
        return sum(1 for r in values if r is not None and r <= k) / len(values) if values else 0.0

    summary = {}
    for mode in modes:
        everything = [r for v in ranks[mode].values() for r in v]
        for source, values in sorted(ranks[mode].items()):
            print(
                f"recall[{mode}, {source}, n={len(values)}]: @1 {at(values, 1):.3f}  @5 {at(values, 5):.3f}"
                f"  @10 {at(values, 10):.3f}"
            )
        a1, a5 = at(everything, 1), at(everything, 5)
        print(f"recall[{mode}, all, n={len(everything)}]: @1 {a1:.3f}  @5 {a5:.3f}")
        summary[mode] = (at(everything, 1), at(everything, 5))
    if not args.keep:
        conn.close()
        pg._psql_admin(f'DROP DATABASE IF EXISTS "{SCRATCH_DB}" WITH (FORCE)')
        try:
            target = ts.aliases[SCRATCH_ALIAS].retrieve()["collection_name"]
            ts.aliases[SCRATCH_ALIAS].delete()
            ts.collections[target].delete()
        except Exception:
            pass
    print(
        f"recall: hybrid_at1={summary['hybrid'][0]:.3f} keyword_at1={summary['keyword'][0]:.3f} "
        f"vector_at1={summary['vector'][0]:.3f} hybrid_at5={summary['hybrid'][1]:.3f} "
        f"n={len(queries)} load={os.getloadavg()[0]:.2f}"
    )
    return 0


class _Fixed:
    """An embedder that answers the query's vector already computed (one encode per query)."""

    def __init__(self, embedder, vec):
        self.name, self.dim, self._vec = embedder.name, embedder.dim, vec

    def encode(self, texts, **kwargs):
        return [self._vec for _ in texts]


if __name__ == "__main__":
    sys.exit(main())
