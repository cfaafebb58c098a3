#!/usr/bin/env python
"""Peak memory and time of hostile model inputs, each case in its own process (so the peak RSS
is that case's): what once took one `dgb classify` line to 18 GB RSS. Prints numbers only.

    .venv/bin/python scripts/bench_model_input.py [--cases NAME ...]

Cases (the bundled model, in-process):

* ``classify_2mb_unpunctuated``: one article whose content is 2 MB of words without punctuation;
* ``classify_2mb_no_spaces``: 2 MB without a space or a full stop;
* ``classify_1mb_title``: a 1 MB title;
* ``classify_surrogate_batch``: 64 corpus articles, one with a lone surrogate and a NUL;
* ``embed_2mb``: the embed stage's text (:func:`dgb.embed.model.prepare_text`) of a 2 MB body;
* ``baseline``: the model loaded and one ordinary article classified (what every case pays).

Each line: ``case=<name> seconds=<s> peak_rss_mb=<MB> ok=<classified or embedded items>``; the
last line is the worst case. Figures are noisy on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "include" / "dgb" / "data" / "corpus" / "articles.jsonl"
CASES = (
    "baseline",
    "classify_2mb_unpunctuated",
    "classify_2mb_no_spaces",
    "classify_1mb_title",
    "classify_surrogate_batch",
    "embed_2mb",
)


def run_case(name: str) -> None:
    from dgb.embed.model import load_model, prepare_text
    from dgb.enrich.base import ArticleText, Classification
    from dgb.enrich.local import LocalClassifier

    arts = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]

    def item(a: dict, **over) -> ArticleText:
        fields = {"title": a["title"], "subtitle": a.get("subtitle"), "content": a["content"], **over}
        return ArticleText(a["url_slug"], fields["title"], fields["subtitle"], None, fields["content"])

    model = load_model()
    t0 = time.perf_counter()
    if name == "embed_2mb":
        vectors = model.encode([prepare_text("Boletim", None, "palavra " * 260_000)])
        ok = len(vectors)
    else:
        clf = LocalClassifier(model).warm()
        t0 = time.perf_counter()
        if name == "baseline":
            items = [item(arts[0])]
        elif name == "classify_2mb_unpunctuated":
            items = [item(arts[0], content="palavra " * 260_000)]
        elif name == "classify_2mb_no_spaces":
            items = [item(arts[0], content="palavra" * 300_000)]
        elif name == "classify_1mb_title":
            items = [item(arts[0], title="Título " * 150_000)]
        elif name == "classify_surrogate_batch":
            items = [item(a) for a in arts[:64]]
            items[7] = item(arts[7], title="Vacina\ud800ção\x00 contra a gripe")
        else:
            raise SystemExit(f"unknown case {name!r}; one of {', '.join(CASES)}")
        ok = sum(isinstance(r, Classification) for r in clf.classify_batch(items))
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"case={name} seconds={seconds:.2f} peak_rss_mb={peak:.0f} ok={ok}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    parser.add_argument("--case", help=argparse.SUPPRESS)  # one case, in this process
    args = parser.parse_args()
    if args.case:
        run_case(args.case)
        return 0
    worst = (0.0, "", 0.0)
    for name in args.cases:
        proc = subprocess.run(
            [sys.executable, __file__, "--case", name], capture_output=True, text=True, timeout=900
        )
        line = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
        if proc.returncode != 0 or not line:
            print(f"case={name} FAILED rc={proc.returncode}: {proc.stderr.strip()[-300:]}")
            continue
        print(line, flush=True)
        fields = dict(part.split("=", 1) for part in line.split())
        peak = float(fields["peak_rss_mb"])
        if peak > worst[0]:
            worst = (peak, name, float(fields["seconds"]))
    print(f"worst: case={worst[1]} peak_rss_mb={worst[0]:.0f} seconds={worst[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
