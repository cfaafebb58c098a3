"""Backlog benchmark: N articles queued at once, through the real local stack.

Stores N new articles in one burst with the production store (rows + dgb.news.scraped events in
the outbox, as a big scrape would), relays them to Pub/Sub, and times the running Airflow stack
until every one is indexed with theme and embedding. In the same run it times the model work
alone for the same articles: the local classifier (its sentence encoding dominates) and the
embedding of title + summary, in-process, no Airflow, database or Typesense. Prints both and
their ratio (target <= 1.5). The articles are marked removed at the end (hidden from search).

    .venv/bin/python scripts/bench_backlog.py [--n 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "include"))

from dgb import db, outbox
from dgb.config import settings
from dgb.scraper.models import Article
from dgb.scraper.store import save_articles

CORPUS = Path(__file__).resolve().parents[1] / "include" / "dgb" / "data" / "corpus" / "articles.jsonl"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--timeout", type=float, default=1800.0)
    args = ap.parse_args()
    s = settings()
    os.environ.setdefault("PUBSUB_EMULATOR_HOST", s.pubsub_emulator_host)
    from google.cloud import pubsub_v1

    templates = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    run = uuid.uuid4().hex[:6]
    now = datetime.now(UTC)
    articles = []
    for i in range(args.n):
        t = templates[i % len(templates)]
        articles.append(
            Article(
                url=f"https://www.gov.br/{t['agency']}/bench/{run}/{i}",
                agency=t["agency"],
                title=f"{t['title']} (lote {run}-{i})",
                subtitle=t.get("subtitle"),
                category=t.get("category"),
                tags=list(t.get("tags") or []),
                published_at=now - timedelta(minutes=i),
                content=t["content"],
            )
        )
    conn = db.connect(s.pg_dsn())
    by_agency: dict[str, list[Article]] = {}
    for a in articles:
        by_agency.setdefault(a.agency, []).append(a)
    t0 = time.monotonic()
    ids: list[str] = []
    for agency, batch in by_agency.items():
        ids += save_articles(conn, agency, None, batch).new
    outbox.relay(conn, pubsub_v1.PublisherClient(), s.gcp_project, batch_size=1000, max_batches=10)
    done = 0
    while time.monotonic() - t0 < args.timeout:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT count(*) FROM news WHERE unique_id = ANY(%s) AND indexed_version = version"
                " AND embedded_at IS NOT NULL AND most_specific_theme_id IS NOT NULL",
                (ids,),
            )
            done = cur.fetchone()[0]
        conn.commit()
        if done == len(ids):
            break
        time.sleep(2.0)
    pipeline_s = time.monotonic() - t0

    # the model work alone, same articles, same run
    from dgb.embed.model import load_model, prepare_text
    from dgb.enrich.base import ArticleText, get_classifier

    model = load_model(s.embedding_model, s.embedding_dim)
    classifier = get_classifier(s, embedder=model, backend="local")
    classifier.classify_batch([ArticleText(None, "aquecimento", content="aquecimento do modelo")])
    items = [ArticleText(None, a.title, a.subtitle, a.editorial_lead, a.content) for a in articles]
    t1 = time.monotonic()
    results = []
    for start in range(0, len(items), 64):
        results += classifier.classify_batch(items[start : start + 64])
    texts = [prepare_text(a.title, getattr(r, "summary", None), a.content) for a, r in zip(articles, results)]
    model.encode(texts, batch_size=32)
    model_s = time.monotonic() - t1

    with db.transaction(conn) as cur:  # hide the synthetic articles from search from now on
        cur.execute(
            "UPDATE news SET removed_at = now(), problem = 'benchmark', indexed_version = NULL"
            " WHERE unique_id = ANY(%s)",
            (ids,),
        )
    conn.close()
    print(f"articles={len(ids)} indexed_with_theme_and_embedding={done}")
    print(f"pipeline_wall_s={pipeline_s:.1f} model_alone_s={model_s:.1f} ratio={pipeline_s / model_s:.2f}")
    return 0 if done == len(ids) else 1


if __name__ == "__main__":
    sys.exit(main())
