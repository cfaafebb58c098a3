"""Benchmark the local classifier on our corpus: level-1 accuracy and articles/s (warm model).

    .venv/bin/python scripts/bench_classify.py [--repeat 3] [--batch-size 64] [--service] [--corpus PATH]

The default corpus (include/dgb/data/corpus) is our DEVELOPMENT set (invented articles): its accuracy
is not the acceptance figure. ``--corpus`` takes another JSON Lines file, in that format
(``theme_l1``) or in the classifier-dev format of real gov.br news (``l1``, ``l2_label``; rows with
no ``l1`` are skipped); for the latter the level-2 label agreement is printed too. Prints numbers only.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from dgb.config import settings as current_settings
from dgb.embed import get_embedder
from dgb.enrich.base import ArticleText
from dgb.enrich.local import LocalClassifier
from dgb.taxonomy import DEFAULT_FOLDER, load_taxonomy

CORPUS = DEFAULT_FOLDER.parent / "corpus" / "articles.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed passes over the corpus (best is kept)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--service", action="store_true", help="use the model service instead of in-process")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="JSON Lines file of labelled articles")
    args = parser.parse_args()

    settings = current_settings()
    arts = [json.loads(line) for line in args.corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    for a in arts:
        a.setdefault("theme_l1", a.get("l1"))
    arts = [a for a in arts if a["theme_l1"]]
    items = [ArticleText(a.get("url_slug") or a.get("id"), a["title"], a.get("subtitle"),
                         a.get("editorial_lead"), a["content"]) for a in arts]
    embedder = get_embedder(settings, prefer="service" if args.service else "local")
    taxonomy = load_taxonomy()
    clf = LocalClassifier(embedder, taxonomy, cache_dir=settings.state_dir / "cache").warm()
    clf.classify_batch(items[:8])  # warm

    best = None
    results = []
    for _ in range(max(1, args.repeat)):
        start = time.perf_counter()
        results = []
        for i in range(0, len(items), args.batch_size):
            results.extend(clf.classify_batch(items[i:i + args.batch_size]))
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    correct = sum(getattr(r, "theme_l1", None) == a["theme_l1"] for a, r in zip(arts, results))
    print(f"embedder={embedder.name} articles={len(items)}")
    print(f"l1_accuracy={correct / len(items):.3f}")
    with_l2 = [(a, r) for a, r in zip(arts, results) if a.get("l2_label")]
    if with_l2:
        def l2_label(r) -> str | None:
            theme = taxonomy.get(getattr(r, "theme_l2", None))
            return theme.label if theme else None

        agree = sum(l2_label(r) == a["l2_label"] for a, r in with_l2)
        print(f"l2_label_agreement={agree / len(with_l2):.3f} (of {len(with_l2)} with a level-2 label)")
    print(f"articles_per_s={len(items) / best:.1f}")


if __name__ == "__main__":
    main()
