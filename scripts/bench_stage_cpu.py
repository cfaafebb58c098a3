"""CPU seconds per 1,000 articles of the stage tasks' per-article work that is not the model's:
enrich (classification around the model, the reading layer's features, the chunk's commit),
embed and the index documents, in one process, no server (:mod:`dgb_dev.stagework`).

    .venv/bin/python scripts/bench_stage_cpu.py [--n 2000] [--data PATH.jsonl ...] [--rounds 3]
                                                [--against TREE] [--profile N]

* The articles: the shipped corpus repeated to ``--n`` rows with the backlog's title suffix (what
  ``scripts/bench_backlog.py`` queues; a repeated row's content made distinct, as production's
  are), or ``--data`` JSON lines (``../shared/data``'s real news). The stages run as a stage task
  runs them: chunks of 25, numpy's BLAS threads as the task sets them.
* Each part is the CPU this process spent in it (``time.process_time``), the stand-in model's
  own CPU taken out; a first pass over 50 other rows pays the one-time loads (dictionaries, the
  heads, the catalogue) before anything is counted. Parts of enrich: ``classify.layout`` (the
  article's units), ``classify.level1`` (the head over the vectors, with its lexical part),
  ``classify.decide`` (levels 2-3 and the summary), ``classify.sentiment`` (the sentiment head's
  inputs and its models), ``features.reading``, ``features.sentiment``, ``features.ner``, ``commit``
  (persist, features and registry, outbox, cleared flags: every parameter dumped as psycopg
  would), ``other`` (the rest: the service client, the views, the prototype scores).
* ``--against TREE``: the same measurement of another checkout's ``include/`` and ``plugins/``
  (e.g. ``git archive <ref> include plugins | tar -x -C /tmp/base``), round by round alternately
  with this one, each in a fresh process, so both meet the same machine load; the table shows the
  median of the rounds of each and their ratio. ``--profile N``: the top N functions by own time
  (cProfile) instead.
* The machine's load average is printed with the figures: the harness counts CPU seconds, not
  wall time, but a busy machine still slows each CPU second a little. No figure is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (part, owner, attribute): the functions each part is; none of them calls another of the list
PARTS = (
    ("enrich.classify.layout", "dgb.enrich.local", "article_layout"),
    ("enrich.classify.level1", "dgb.enrich.local:LocalClassifier", "level1_probabilities"),
    ("enrich.classify.decide", "dgb.enrich.local:LocalClassifier", "decide"),
    ("enrich.classify.sentiment", "dgb.enrich.local:LocalClassifier", "sentiments"),
    ("enrich.features.reading", "dgb.features.reading", "reading_features"),
    ("enrich.features.sentiment", "dgb.features.sentiment", "features"),
    ("enrich.features.ner", "dgb.features.rules_ner", "extract"),
    ("enrich.commit", "dgb.pipeline.chunks", "commit"),
    ("embed.texts", "dgb.pipeline.stages:EmbedStage", "_texts"),
)


@contextmanager
def timed(spent: dict[str, float], part: str, owner: str, attribute: str):
    """``owner.attribute`` replaced, while inside, by a wrapper adding its CPU to ``spent[part]``
    (the embed stage's commit is counted under ``embed.commit``)."""
    import importlib

    module, _, cls = owner.partition(":")
    target = importlib.import_module(module)
    target = getattr(target, cls) if cls else target
    raw = target.__dict__[attribute]
    static = isinstance(raw, staticmethod)
    fn = raw.__func__ if static else raw

    def wrapper(*args, **kwargs):
        name = part
        if attribute == "commit" and getattr(args[1], "name", "") == "embed":
            name = "embed.commit"
        c = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.process_time() - c

    setattr(target, attribute, staticmethod(wrapper) if static else wrapper)
    try:
        yield
    finally:
        setattr(target, attribute, raw)


def measure(rows: list[dict], profile: int = 0) -> dict[str, float]:
    """CPU seconds of each part over ``rows`` (see the module docstring)."""
    from dgb_dev import stagework

    stagework.run(stagework.load_rows(n=50, label="warm"))  # the one-time loads, not counted
    spent, clock = stagework.clocked()
    with ExitStack() as stack:
        for part in PARTS:
            stack.enter_context(timed(spent, *part))
        if profile:
            import cProfile
            import pstats

            prof = cProfile.Profile()
            out = prof.runcall(stagework.run, rows, clock)
            pstats.Stats(prof).sort_stats("tottime").print_stats(profile)
        else:
            out = stagework.run(rows, clock)
    model = out["_model"]["cpu_s"]
    for stage in ("enrich", "embed"):
        inner = sum(v for k, v in spent.items() if k.startswith(f"{stage}."))
        spent[f"{stage}.other"] = spent[stage] - inner - model.get(stage, 0.0)
        spent[stage] -= model.get(stage, 0.0)
    spent["model (stand-in, not counted)"] = sum(model.values())
    return spent


def child(args) -> int:
    from dgb_dev import stagework

    rows = stagework.load_rows(args.data, args.n)
    print(json.dumps(measure(rows)))
    return 0


def table(results: dict[str, list[dict[str, float]]], n: int) -> None:
    names = list(results)
    parts = list(dict.fromkeys(k for runs in results.values() for r in runs for k in r))
    order = sorted(parts, key=lambda p: (p.startswith("model"), p.split(".")[0] not in ("enrich",), p))
    width = max(len(p) for p in order)
    print(f"CPU-s per 1,000 articles (median of {len(next(iter(results.values())))} round(s), n={n})")
    print(
        f"{'part':<{width}}  "
        + "  ".join(f"{name:>12}" for name in names)
        + ("  ratio" if len(names) == 2 else "")
    )
    for p in order:
        meds = [statistics.median(r.get(p, 0.0) for r in results[name]) * 1000 / n for name in names]
        ratio = f"  {meds[1] / meds[0]:.2f}" if len(names) == 2 and meds[0] > 0 else ""
        print(f"{p:<{width}}  " + "  ".join(f"{m:12.2f}" for m in meds) + ratio)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--data", type=Path, nargs="*")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--against", type=Path, help="another checkout, measured alternately with this one")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="print the top N functions instead")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    if args.profile:
        from dgb_dev import stagework

        measure(stagework.load_rows(args.data, args.n), args.profile)
        return 0
    trees = {"this": ROOT} if args.against is None else {"against": args.against.resolve(), "this": ROOT}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            # the tree's own dgb; this tree's harness (dgb_dev.stagework) for both
            path = os.pathsep.join(str(p) for p in (tree / "include", ROOT / "dev", tree / "plugins"))
            cmd = [sys.executable, __file__, "--child", "--n", str(args.n)]
            if args.data:
                cmd += ["--data", *map(str, args.data)]
            proc = subprocess.run(
                cmd, env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True, check=False
            )
            if proc.returncode != 0:
                print(proc.stderr[-2000:], file=sys.stderr)
                return 1
            results[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    table(results, args.n)
    loadavg = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average (1, 5, 15 min): {loadavg}; cores: {os.cpu_count()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
