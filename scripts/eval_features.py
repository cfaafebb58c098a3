"""Every figure the reading layer's documentation gives, printed from committed data and code.

    .venv/bin/python scripts/eval_features.py [--archive ../shared/data/classifier-dev/archive.jsonl]
                                              [--seeds 5] [--skip-sentiment]

Sections (each line starts with its name):

* ``readability``: the distribution of ``readability_flesch_pt`` and ``readability_flesch`` over
  production's archive export (956 real articles, when ``--archive`` exists) and over the 360
  committed articles of ``evaluation/sentiment``; the share below 0 and every such article with its
  words per sentence and syllables per word (why it is below 0); production's English figure on
  the raw markdown beside it (what the portal showed before).
* ``sentiment``: the labelled set (``evaluation/sentiment``): the two labelling passes' agreement
  (raw and Cohen's kappa); the sentiment head cross-validated (5 folds stratified by label) over
  ``--seeds`` fold seeds: accuracy, macro-F1, F1 per label and the score's mean absolute error
  against the passes' scores, mean and standard deviation over the seeds; the lexicon alone (not
  fitted). Needs the bundled model (the classifier's vectors, ~10 s).
* ``entities``: ``scripts/eval_entities.py``'s precision and recall per type, on the dev half, the
  test half and all 100 articles of ``evaluation/entities``.
* ``trending``: the chance that an ordinary day's article of a theme publishing at a steady
  (Poisson) rate earns the "Em alta" badge (score >= 1.5), without a minimum and with
  ``DGB_TRENDING_MIN_DAY`` (simulated, seed 5): why the minimum is 5.

The last line sums up: ``features: readability_pt_negative=<share> sentiment_accuracy=<mean>
sentiment_macro_f1=<mean> entities_min_precision=<x> entities_min_recall=<x>`` (entities on the
test half). No figure is asserted; the script only prints.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "classifier-dev"
EVALUATION = ROOT / "evaluation"
LABELS = ("positive", "neutral", "negative")


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


# --------------------------------------------------------------------------- readability


def readability(name: str, articles: list[dict]) -> float:
    from dgb.features import reading

    pt, en, raw_en, negative = [], [], [], []
    for a in articles:
        content = a.get("content") or ""
        if not isinstance(content, str):
            continue
        sentences = reading.reader_sentences(content)
        figure = reading.flesch_pt(sentences)
        keys = reading.reading_features(content)
        if keys["readability_flesch_pt"] is None:
            continue
        pt.append(keys["readability_flesch_pt"])
        en.append(keys["readability_flesch"])
        if reading.word_count(content) >= reading.MIN_WORDS:
            raw_en.append(reading.flesch_reading_ease(content))
        if figure[0] < 0:
            negative.append((figure[0], figure[2], figure[3], a.get("title", "")[:70]))
    q = (0, 5, 25, 50, 75, 95, 100)

    def dist(values: list[float]) -> str:
        return " ".join(f"p{p}={v:.1f}" for p, v in zip(q, np.percentile(values, q)))

    share = len(negative) / len(pt) if pt else 0.0
    print(f"readability[{name}]: {len(pt)} articles with a figure (of {len(articles)})")
    print(f"readability[{name}]: flesch_pt {dist(pt)}; below 0: {len(negative)} ({share:.1%})")
    print(
        f"readability[{name}]: flesch (production's English formula, clean text) {dist(en)}; "
        f"below 0: {sum(v < 0 for v in en)} ({sum(v < 0 for v in en) / len(en):.1%})"
    )
    print(
        f"readability[{name}]: flesch on the raw markdown (before) {dist(raw_en)}; "
        f"below 0: {sum(v < 0 for v in raw_en)} ({sum(v < 0 for v in raw_en) / len(raw_en):.1%})"
    )
    for value, per_sentence, per_word, title in sorted(negative):
        print(
            f"readability[{name}]:   {value:6.1f}  {per_sentence:5.1f} words/sentence  "
            f"{per_word:.2f} syllables/word  {title}"
        )
    return share


# --------------------------------------------------------------------------- sentiment


def kappa(a: list[str], b: list[str]) -> tuple[float, float]:
    n = len(a)
    agree = sum(x == y for x, y in zip(a, b)) / n
    chance = sum((a.count(lab) / n) * (b.count(lab) / n) for lab in LABELS)
    return agree, (agree - chance) / (1 - chance)


def sentiment(seeds: int) -> tuple[float, float]:
    from dgb.embed import get_embedder
    from dgb.enrich import sentiment as head_module
    from dgb.enrich import sentiment_training as st
    from dgb.enrich.local import LocalClassifier

    folder = EVALUATION / "sentiment"
    first = {r["id"]: r["label"] for r in rows(folder / "pass1.jsonl")}
    second = {r["id"]: r["label"] for r in rows(folder / "pass2.jsonl")}
    ids = sorted(first)
    agree, k = kappa([first[i] for i in ids], [second[i] for i in ids])
    labelled = st.load_labelled(folder)
    counts = {lab: labelled.labels.count(lab) for lab in LABELS}
    print(f"sentiment: {len(labelled.items)} articles; gold {counts}")
    print(
        f"sentiment: passes agree on {agree:.3f} of the articles, Cohen's kappa {k:.3f}; "
        f"{sum(first[i] != second[i] for i in ids)} settled by a third reading"
    )
    lex = st.lexicon_figures(labelled.items, labelled.labels, labelled.scores)
    print(
        f"sentiment: lexicon alone (nothing fitted): accuracy {lex.accuracy:.3f}, macro-F1 {lex.macro_f1:.3f}"
    )
    clf = LocalClassifier(get_embedder(prefer="local"), head=False, sentiment_head=False)
    x = head_module.inputs(clf.features(labelled.items).X, labelled.items)
    runs = [st.cross_validate(x, labelled.labels, labelled.scores, seed=seed) for seed in range(seeds)]

    def ms(values: list[float]) -> str:
        return f"{np.mean(values):.3f} (sd {np.std(values):.3f}, {min(values):.3f}-{max(values):.3f})"

    accuracy = ms([r.accuracy for r in runs])
    print(f"sentiment: head, 5-fold cross-validation over {seeds} seeds: accuracy {accuracy}")
    print(f"sentiment: head: macro-F1 {ms([r.macro_f1 for r in runs])}")
    for lab in LABELS:
        print(f"sentiment: head: F1 {lab} {ms([r.per_label_f1[lab] for r in runs])}")
    print(f"sentiment: head: score MAE against the passes' scores {ms([r.score_mae for r in runs])}")
    return float(np.mean([r.accuracy for r in runs])), float(np.mean([r.macro_f1 for r in runs]))


# --------------------------------------------------------------------------- entities


def entities() -> tuple[float, float]:
    spec = importlib.util.spec_from_file_location("eval_entities", ROOT / "scripts" / "eval_entities.py")
    ev = importlib.util.module_from_spec(spec)
    sys.modules["eval_entities"] = ev  # its dataclasses look their module up
    spec.loader.exec_module(ev)
    from dgb.features import rules_ner

    articles = ev.load(ev.DATA / "articles.jsonl")
    gold = {g["id"]: g["entities"] for g in ev.load(ev.DATA / "gold.jsonl")}
    test_scores = None
    for split in ("dev", "test", "all"):
        chosen = [a for a in articles if split == "all" or ev.split_of(a["id"]) == split]
        scores = ev.evaluate(chosen, gold, rules_ner.extract)
        figures = "  ".join(f"{t} P {scores[t].precision:.3f} R {scores[t].recall:.3f}" for t in ev.TYPES)
        print(f"entities[{split}, {len(chosen)} articles]: {figures}")
        if split == "test":
            test_scores = scores
    return (
        min(test_scores[t].precision for t in ev.TYPES),
        min(test_scores[t].recall for t in ev.TYPES),
    )


# --------------------------------------------------------------------------- trending


def trending() -> None:
    from dgb.engagement.formula import EM_ALTA, MIN_DAY

    rng = np.random.default_rng(5)
    print(
        f"trending: chance an ordinary day's article earns 'Em alta' (>= {EM_ALTA}), steady Poisson "
        f"rate, 200,000 simulated weeks each"
    )
    for rate in (0.5, 1, 2, 3, 4, 6, 10, 20):
        days = rng.poisson(rate, size=(200_000, 7))
        today, week = days[:, 6], days.sum(axis=1)
        live = today >= 1  # an article exists today
        score = np.where(week > 0, today * 7 / np.maximum(week, 1), 0)
        badge = score >= EM_ALTA
        print(
            f"trending:   {rate:>4} articles/day: no minimum {badge[live].mean():.1%}; "
            f"minimum {MIN_DAY}: {(badge & (today >= MIN_DAY))[live].mean():.2%}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archive", type=Path, default=SHARED / "archive.jsonl")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--skip-sentiment", action="store_true", help="no model: leave the sentiment section out")
    args = ap.parse_args(argv)
    share = math.nan
    if args.archive.exists():
        share = readability("archive", rows(args.archive))
    readability("evaluation/sentiment", rows(EVALUATION / "sentiment" / "articles.jsonl"))
    acc = f1 = math.nan
    if not args.skip_sentiment:
        acc, f1 = sentiment(args.seeds)
    precision, recall = entities()
    trending()
    print(
        f"features: readability_pt_negative={share:.4f} sentiment_accuracy={acc:.3f} "
        f"sentiment_macro_f1={f1:.3f} entities_min_precision={precision:.3f} entities_min_recall={recall:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
