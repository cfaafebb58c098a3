"""Benchmark the local classifier on real gov.br news: honest agreement, calibration, hybrid
routing, summary overlap and speed.

    .venv/bin/python scripts/bench_classify.py [--data ../shared/data/classifier-dev] [--service]
                                               [--batch-size 64] [--folds 5] [--no-speed] [--no-curve]
    .venv/bin/python scripts/bench_classify.py --corpus PATH [--service] [--batch-size 64]

* Level-1 agreement with production's labels, CROSS-VALIDATED: folds grouped by normalised title
  over all the files (real.jsonl, labelled.jsonl, weak.jsonl and our corpus), and the head is
  retrained on the other folds for every fold (:mod:`dgb.enrich.training`), so no article is
  ever scored by a head that saw it. Reported per file, plus prototypes alone (no head).
* Level-2 agreement on real.jsonl where production's ``l2_label`` exists (our level-2 label
  compared by name, so it only means something once our tree carries production's labels).
* Learning curve: the same cross-validation with each head trained on 25% and 50% of its
  training articles (whole title groups, 3 draws each): the gain per doubling of labelled data.
* Confusion summary: the (production, ours) level-1 pairs most often confused on real.jsonl.
* Calibration of ``theme_confidence`` (expected calibration error, accuracy by confidence band;
  the one temperature is fitted on the same out-of-fold predictions) and the hybrid mode
  simulated: share routed to Bedrock and overall agreement when production's label stands in for
  Bedrock's answer, for several thresholds.
* The extractive summary against real.jsonl's ``reference_summary``: ROUGE-L F1 and lengths.
* Articles/s of ``classify_batch`` with the SHIPPED head over real.jsonl (warm model; one pass,
  on a shared machine: a noisy figure). ``--service`` goes through the resident model service.

``--corpus PATH`` instead classifies one JSON Lines file with the SHIPPED classifier (no
retraining: an honest figure only for articles the head was not trained on), in our corpus
format (``theme_l1``) or the classifier-dev format (``l1``, ``l2_label``; rows without ``l1``
are skipped), and prints level-1 agreement, level-2 label agreement where labelled, articles/s.

Our corpus is invented (a development set), and the folds are measured on the same data the
knobs were chosen on: a sealed held-out set of other real news decides acceptance.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from dgb.config import settings as current_settings
from dgb.embed import get_embedder
from dgb.enrich import training
from dgb.enrich.base import ArticleText
from dgb.enrich.local import LocalClassifier
from dgb.enrich.text import split_sentences
from dgb.taxonomy import LEVEL1, load_taxonomy

SOURCES = ("real", "labelled", "weak", "corpus")


def _share(mask: np.ndarray, values: np.ndarray) -> str:
    return f"{values[mask].mean():.3f} ({int(values[mask].sum())}/{int(mask.sum())})" if mask.any() else "n/a"


def bench_file(args) -> int:
    """``--corpus PATH``: the shipped classifier over one labelled file (no cross-validation)."""
    settings = current_settings()
    arts = [json.loads(line) for line in args.corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    arts = [a for a in arts if a.get("theme_l1") or a.get("l1")]
    items = [
        ArticleText(
            a.get("url_slug") or a.get("id"),
            a["title"],
            a.get("subtitle"),
            a.get("editorial_lead"),
            a.get("content") or "",
            a.get("agency"),
        )
        for a in arts
    ]
    embedder = get_embedder(settings, prefer="service" if args.service else "local")
    taxonomy = load_taxonomy()
    clf = LocalClassifier(embedder, taxonomy, cache_dir=settings.state_dir / "cache").warm()
    clf.classify_batch(items[:8])
    start = time.perf_counter()
    results = []
    for i in range(0, len(items), args.batch_size):
        results.extend(clf.classify_batch(items[i : i + args.batch_size]))
    elapsed = time.perf_counter() - start
    correct = sum(
        getattr(r, "theme_l1", None) == (a.get("theme_l1") or a.get("l1")) for a, r in zip(arts, results)
    )
    print(f"embedder={embedder.name} articles={len(items)} ({clf.version})")
    print(f"l1_accuracy={correct / max(1, len(items)):.3f}")
    with_l2 = [(a, r) for a, r in zip(arts, results) if a.get("l2_label")]
    if with_l2:

        def l2_label(r) -> str | None:
            theme = taxonomy.get(getattr(r, "theme_l2", None))
            return theme.label if theme else None

        agree = sum(l2_label(r) == a["l2_label"] for a, r in with_l2)
        print(f"l2_label_agreement={agree / len(with_l2):.3f} (of {len(with_l2)} with a level-2 label)")
    print(f"articles_per_s={len(items) / elapsed:.1f} (one pass; load average {os.getloadavg()[0]:.1f})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=training.DEV_DATA, help="development data folder")
    parser.add_argument("--service", action="store_true", help="use the model service instead of in-process")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--folds", type=int, default=training.FOLDS)
    parser.add_argument("--no-speed", action="store_true", help="skip the articles/s measurement")
    parser.add_argument("--no-curve", action="store_true", help="skip the learning curve (~1 min)")
    parser.add_argument(
        "--corpus",
        type=Path,
        default=None,
        help="instead: classify this labelled JSON Lines file with the shipped classifier",
    )
    args = parser.parse_args(argv)
    if args.corpus is not None:
        return bench_file(args)

    settings = current_settings()
    taxonomy = load_taxonomy()
    articles = training.load_dev_data(args.data)
    items = [a.item for a in articles]
    embedder = get_embedder(settings, prefer="service" if args.service else "local")
    cache = settings.state_dir / "cache"
    bare = LocalClassifier(embedder, taxonomy, cache_dir=cache, head=False).warm()
    codes = bare.level1_codes
    feats = bare.features(items)
    labels = np.array([a.l1 or "" for a in articles])
    source = np.array([a.source for a in articles])
    real = source == "real"
    print(
        f"embedder={embedder.name} articles={len(articles)} "
        + " ".join(f"{s}={int((source == s).sum())}" for s in SOURCES)
        + f" groups={len(set(training.group_ids(articles).tolist()))} folds={args.folds}"
    )

    # -- level 1: prototypes alone, and the head cross-validated -------------------------------
    proto_pred = np.array([codes[j] for j in feats.proto.argmax(1)])
    oof = training.out_of_fold_logits(feats.X, feats.proto, articles, codes, folds=args.folds)
    oof_plain = training.out_of_fold_logits(
        feats.X, feats.proto, articles, codes, folds=args.folds, lexical_part=False
    )
    plain_pred = np.array([codes[j] for j in oof_plain.argmax(1)])
    scale = training.fit_scale(oof[real], list(labels[real]), codes)
    probs = training.softmax(scale * oof)
    level2 = training.out_of_fold_level2(feats.X, articles, taxonomy, folds=args.folds)
    results = bare.decide(items, feats, probs, level2)
    pred = np.array([r.theme_l1 for r in results])
    correct = pred == labels
    for s in SOURCES:
        m = source == s
        print(
            f"l1_agreement[{s}] cv_head={_share(m, correct)} "
            f"without_lexical={_share(m, plain_pred == labels)} "
            f"prototypes_only={_share(m, proto_pred == labels)}"
        )

    # -- learning curve: how much more labelled data would buy --------------------------------
    if not args.no_curve:
        curve = training.learning_curve(feats.X, feats.proto, articles, codes, real, folds=args.folds)
        print(
            "learning_curve[real] (share of each fold's training articles -> agreement): "
            + ", ".join(f"{share:.0%} {score:.3f}" for share, score in curve)
        )

    # -- level 2 (real.jsonl, by label) -----------------------------------------------------
    def label_of(code: str | None) -> str:
        theme = taxonomy.get(code) if code else None
        return training.title_key(theme.label) if theme else ""

    has_l2 = np.array([a.source == "real" and bool(a.l2_label) for a in articles])
    l2_ok = np.array(
        [
            bool(a.l2_label) and label_of(r.theme_l2) == training.title_key(a.l2_label)
            for a, r in zip(articles, results)
        ]
    )
    print(
        f"l2_agreement[real, by label] {_share(has_l2, l2_ok)}; "
        f"given level 1 right: {_share(has_l2 & correct, l2_ok)}"
        + ("" if level2 else " (no level-2 part: production's labels do not map to our tree)")
    )
    proto_l2 = bare.decide(items, feats, probs, ((), np.zeros((len(items), 0))))
    l2_proto_ok = np.array(
        [
            bool(a.l2_label) and label_of(r.theme_l2) == training.title_key(a.l2_label)
            for a, r in zip(articles, proto_l2)
        ]
    )
    print(f"l2_agreement[real, prototypes only] {_share(has_l2, l2_proto_ok)}")
    lab = np.array([a.source == "labelled" and bool(a.l2) for a in articles])
    code_ok = np.array([bool(a.l2) and r.theme_l2 == a.l2 for a, r in zip(articles, results)])
    print(
        f"l2_agreement[labelled, by code; codes of an older production taxonomy: indicative] "
        f"{_share(lab, code_ok)}"
    )

    # -- confusion summary ------------------------------------------------------------------
    pairs = collections.Counter((labels[i] or "none", pred[i]) for i in np.flatnonzero(real & ~correct))
    print("most confused on real.jsonl (production -> ours: count):")
    for (gold, ours), n in pairs.most_common(10):
        print(f"  {gold} {LEVEL1.get(gold, 'outside the tree')} -> {ours} {LEVEL1.get(ours, '?')}: {n}")
    recall = []
    for code in codes:
        m = real & (labels == code)
        if m.sum() >= 5:
            recall.append((correct[m].mean(), code, int(m.sum())))
    print(
        "weakest level-1 recall on real.jsonl (>= 5 articles): "
        + ", ".join(f"{c} {r:.2f} of {n}" for r, c, n in sorted(recall)[:6])
    )

    # -- calibration and hybrid routing -----------------------------------------------------
    conf = probs.max(1)
    ece = training.expected_calibration_error(conf[real], correct[real])
    print(
        f"calibration[real] scale={scale:.3f} ECE={ece:.3f} "
        f"mean_confidence={conf[real].mean():.3f} accuracy={correct[real].mean():.3f}"
    )
    for lo, hi in ((0.0, 0.4), (0.4, 0.6), (0.6, 0.8), (0.8, 1.01)):
        m = real & (conf >= lo) & (conf < hi)
        print(
            f"  confidence [{lo:.1f}, {min(hi, 1.0):.1f}): share {m.sum() / real.sum():.2f} "
            f"agreement {_share(m, correct)}"
        )
    threshold = training.choose_threshold(conf[real], correct[real])
    print(
        f"hybrid[real] (production's label stands in for Bedrock's; best threshold with <= 30% routed: "
        f"{threshold:.2f}):"
    )
    for t, routed, overall in training.routing_table(
        conf[real], correct[real], sorted({0.3, 0.4, 0.5, 0.6, 0.7, threshold})
    ):
        print(f"  threshold {t:.2f}: routed {routed:.1%} overall agreement {overall:.3f}")

    # -- summary ----------------------------------------------------------------------------
    refs = [
        (r.summary, a.reference_summary)
        for a, r in zip(articles, results)
        if a.source == "real" and a.reference_summary
    ]
    f1 = [training.rouge_l(s, ref)[2] for s, ref in refs]
    print(
        f"summary[real] ROUGE-L F1={np.mean(f1):.3f} over {len(refs)}; median chars ours="
        f"{np.median([len(s or '') for s, _ in refs]):.0f} "
        f"reference={np.median([len(ref) for _, ref in refs]):.0f}; "
        f"median sentences ours={np.median([len(split_sentences(s or '')) for s, _ in refs]):.0f} "
        f"reference={np.median([len(split_sentences(ref)) for _, ref in refs]):.0f}"
    )

    # -- speed with the shipped head --------------------------------------------------------
    if not args.no_speed:
        shipped = LocalClassifier(embedder, taxonomy, cache_dir=cache).warm()
        timed = [a.item for a in articles if a.source == "real"]
        shipped.classify_batch(timed[:8])
        start = time.perf_counter()
        for i in range(0, len(timed), args.batch_size):
            shipped.classify_batch(timed[i : i + args.batch_size])
        elapsed = time.perf_counter() - start
        print(
            f"speed: {len(timed) / elapsed:.1f} articles/s over real.jsonl ({shipped.version}; "
            f"batches of {args.batch_size}; load average {os.getloadavg()[0]:.1f}: shared machine, noisy)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
