"""Benchmark the offline article features (dgb.features: word count and readability, the
sentiment head, the rule-based entity extractor) on real gov.br news; prints articles/s.

    .venv/bin/python scripts/bench_features.py [--data PATH.jsonl ...] [--n 1000] [--rounds 3]
                                               [--dsn DSN] [--no-head]

* The sentiment is the local classifier's sentiment head, as in the enrich stage: its input
  vectors are the classifier's own (the stage computes them for the theme anyway), so they are
  computed once before the timed rounds (the model's encoding is not the features' cost; that is
  ``scripts/bench_classify.py``'s); each round times the head's own work (lemmas, lexicon, TF-IDF,
  the two linear models) plus :class:`~dgb.features.compute.FeatureComputer`. ``--no-head``: the
  lexicon fallback instead (no model needed).

* ``--data``: JSON lines with ``title`` and ``content`` (default: ../shared/data/classifier-dev's
  real.jsonl and archive.jsonl when present, else the shipped corpus include/dgb/data/corpus).
* Each round computes the features of ``--n`` articles (the list repeated as needed) in one
  process, one core; the first round also pays the one-time loads (the CMU dictionary, the
  catalogue and gazetteer), reported apart ("cold"). Warm rounds with distinct texts would be a
  little slower than repeated ones (per-word caches); the corpus rows are distinct up to its size.
* ``--dsn``: also write each article's features to that PostgreSQL database inside a rolled-back
  transaction (canonical-id lookups and registry inserts included), to see the database's share.
* The machine's load average is printed beside the figures: on a shared 2-core machine the wall
  figure is noisy, so the rate per CPU-second this process used is printed too (one core's
  throughput, whatever else runs). No figure is asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "classifier-dev"
CORPUS = ROOT / "include" / "dgb" / "data" / "corpus" / "articles.jsonl"


def load(paths: list[Path]) -> list[dict]:
    rows = []
    for p in paths:
        for line in p.read_text(encoding="utf-8").split("\n"):  # not splitlines: U+2028 in texts
            if line.strip():
                r = json.loads(line)
                rows.append({"title": r.get("title") or "", "content": r.get("content") or ""})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, nargs="*")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dsn", help="also write the features to this database (rolled back)")
    ap.add_argument("--no-head", action="store_true", help="the lexicon's sentiment, not the head's")
    args = ap.parse_args(argv)
    paths = (
        args.data or [p for p in (SHARED / "real.jsonl", SHARED / "archive.jsonl") if p.exists()] or [CORPUS]
    )
    rows = load(paths)
    if not rows:
        print("no articles", file=sys.stderr)
        return 2
    items = [rows[i % len(rows)] for i in range(args.n)]
    words = sum(len(r["content"].split()) for r in items) / len(items)
    print(
        f"{len(rows)} distinct articles from {', '.join(p.name for p in paths)}; {words:.0f} words on average"
    )

    from dgb.features.compute import FeatureComputer

    computer = FeatureComputer()
    head = views = texts = None
    if not args.no_head:
        from dgb.embed import get_embedder
        from dgb.enrich.contract import ArticleText
        from dgb.enrich.local import LocalClassifier
        from dgb.enrich.sentiment import inputs

        clf = LocalClassifier(get_embedder(prefer="local"), head=False)
        head = clf.sentiment_head
        distinct = rows[: len(items)]
        texts = [ArticleText(str(i), r["title"], None, None, r["content"]) for i, r in enumerate(distinct)]
        t = time.perf_counter()
        views = clf.features(texts).X
        took = time.perf_counter() - t
        print(f"the classifier's vectors of {len(texts)} articles (not timed below): {took:.1f} s")
    t = time.perf_counter()
    computer.compute(items[0]["title"], items[0]["content"])
    print(f"cold start (dictionaries, catalogue, gazetteer): {time.perf_counter() - t:.2f} s")

    def sentiments() -> list:
        if head is None:
            return [None] * len(items)
        idx = [i % len(texts) for i in range(len(items))]
        return head.predict(inputs(views[idx], [texts[i] for i in idx]))

    for r in range(args.rounds):
        t, c = time.perf_counter(), time.process_time()
        answers = sentiments()
        out = [
            computer.compute(it["title"], it["content"], classifier_sentiment=a)
            for it, a in zip(items, answers)
        ]
        dt, cpu = time.perf_counter() - t, time.process_time() - c
        mentions = sum(len(f.mentions) for f in out) / len(out)
        print(
            f"round {r + 1}: {len(items) / dt:.1f} articles/s wall, {len(items) / cpu:.1f} articles per "
            f"CPU-second of this process ({mentions:.1f} mentions per article)"
        )
    if args.dsn:
        from dgb import db
        from dgb.features import compute

        conn = db.connect(args.dsn)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT unique_id FROM news LIMIT %s", (len(out),))
                ids = [r[0] for r in cur.fetchall()]
                t = time.perf_counter()
                for uid, f in zip(ids, out):
                    compute.write(cur, uid, f)
                dt = time.perf_counter() - t
            conn.rollback()
        finally:
            conn.close()
        if ids:
            print(f"writes (news_features, registry, news_entities): {len(ids) / dt:.1f} articles/s")
    loadavg = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average (1, 5, 15 min): {loadavg}; cores: {os.cpu_count()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
