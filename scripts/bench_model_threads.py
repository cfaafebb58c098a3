"""Does a second BLAS thread make the bundled model faster? The local classifier (its sentence
encoding dominates) over the bundled corpus, chunks of 25 as the enrich stage sends them, once
with ``DGB_MODEL_THREADS=1`` and once with 2, each in its own process, side by side in one run.
Prints wall and CPU seconds of each and their ratio. Never beside a test suite or another
benchmark (2 cores).

    .venv/bin/python scripts/bench_model_threads.py [--repeat 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "include" / "dgb" / "data" / "corpus" / "articles.jsonl"


def one(repeat: int) -> dict:
    """In this process, with the DGB_MODEL_THREADS it was started with."""
    from dgb.embed.model import load_model
    from dgb.enrich.base import ArticleText, get_classifier

    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    items = [ArticleText(None, r["title"], r.get("subtitle"), None, r["content"]) for r in rows * repeat]
    classifier = get_classifier(embedder=load_model("use-multilingual-v3", 512), backend="local")
    classifier.classify_batch(items[:4])  # warm
    t, c = time.monotonic(), time.process_time()
    for start in range(0, len(items), 25):
        classifier.classify_batch(items[start : start + 25])
    return {"articles": len(items), "wall_s": time.monotonic() - t, "cpu_s": time.process_time() - c}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=4, help="passes over the corpus (default 4)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one(args.repeat)))
        return 0
    out = {}
    for threads in (1, 2):
        env = {**os.environ, "DGB_MODEL_THREADS": str(threads), "DGB_EMBEDDER": "local"}
        cmd = [sys.executable, __file__, "--child", "--repeat", str(args.repeat)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        out[threads] = json.loads(done.stdout.strip().splitlines()[-1])
        r = out[threads]
        print(f"threads={threads} articles={r['articles']} wall_s={r['wall_s']:.2f} cpu_s={r['cpu_s']:.2f}")
    print(f"model_threads: wall_1_over_2={out[1]['wall_s'] / out[2]['wall_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
