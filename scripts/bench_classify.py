"""Benchmark the local classifier on real gov.br news: honest agreement, calibration, hybrid
routing, summary overlap and speed.

    .venv/bin/python scripts/bench_classify.py [--data ../shared/data/classifier-dev] [--service]
                                               [--batch-size 64] [--folds 5] [--no-speed] [--no-curve]
                                               [--chart DIR]
    .venv/bin/python scripts/bench_classify.py --corpus PATH [--service] [--batch-size 64]

* Level-1 agreement with production's labels on real.jsonl, CROSS-VALIDATED by title: the
  titles of real.jsonl are dealt into folds, and each fold's head is trained on the other folds
  plus every row of the other files (labelled.jsonl, weak.jsonl, archive.jsonl, our corpus)
  whose title is not in the test fold (:func:`dgb.enrich.training.out_of_fold_logits`), so no
  article is ever scored by a head that saw it. Three figures: whole articles; excerpts (the
  title and the first 500 characters of the content, :func:`dgb.enrich.training.excerpt_item`);
  macro-averaged recall over the level-1 themes present. Also without the lexical part, with
  prototypes alone, and what the agency prior adds (the test rows' agency withheld; a head
  without agency features).
* Short texts as production writes them: labelled.jsonl's stored excerpts, dealt into the folds
  by title with real.jsonl (held out like it), and real.jsonl's excerpts, with and without the
  head's short-text prior correction (``short_bias``, :func:`dgb.enrich.calibration.prior_bias`).
* Learning curve: the same cross-validation with each head trained on 25% and 50% of its
  training articles (whole title groups, 3 draws each): the gain per doubling of labelled data.
* Level-2 agreement on real.jsonl where production's ``l2_label`` exists (our level-2 label
  compared by name, so it only means something once our tree carries production's labels).
* Confusion summary: the (production, ours) level-1 pairs most often confused on real.jsonl.
* Calibration of ``theme_confidence`` on whole articles and excerpts (expected calibration error,
  accuracy by confidence band; the temperatures, one for short texts and one for the rest, are
  fitted on the same out-of-fold predictions of both; the single temperature of local-emb-6
  beside them) and the hybrid mode simulated on both: share routed to Bedrock and
  overall agreement when production's label stands in for Bedrock's answer.
* The extractive summary against real.jsonl's ``reference_summary`` and production's own stored
  summaries (archive.jsonl ``reference_summary``): ROUGE-L precision, recall, F1 and lengths.
* Articles/s of ``classify_batch`` with the SHIPPED head over real.jsonl (warm model; one pass,
  on a shared machine: a noisy figure). ``--service`` goes through the resident model service.

``--chart DIR`` also writes two charts into DIR as SVG + JSON (:mod:`dgb_dev.benchcharts`): the
level-1 confusion matrix (``classify-confusion``: production's label against ours, out-of-fold, on
real.jsonl's whole articles) and the reliability diagram of ``theme_confidence``
(``classify-calibration``: whole articles and excerpts, out-of-fold, their ECE in the legend).

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
from dgb.enrich import calibration, learning, measure, training, training_level2
from dgb.enrich.base import ArticleText
from dgb.enrich.local import LocalClassifier
from dgb.enrich.text import split_sentences
from dgb.taxonomy import LEVEL1, load_taxonomy

SOURCES = ("real", "labelled", "weak", "corpus", "archive")
SHORT = calibration.SHORT_CHARS  # content of at most this many characters: calibrated as a short text


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


def _pred(logits: np.ndarray, codes: list[str]) -> np.ndarray:
    return np.array([codes[j] for j in logits.argmax(1)])


def chart_command(argv: list[str]) -> str:
    from dgb_dev import charts

    return charts.command_line(__file__, argv)


def confusion_chart(directory: Path, command: str, gold: np.ndarray, ours: np.ndarray) -> None:
    """``--chart``: production's level-1 theme against ours (the out-of-fold answers above), counts."""
    from dgb_dev import benchcharts

    gold = np.where(gold == "", "none", gold)
    codes = sorted({*gold.tolist(), *ours.tolist()})
    at = {c: k for k, c in enumerate(codes)}
    counts = np.zeros((len(codes), len(codes)), dtype=int)
    np.add.at(counts, ([at[g] for g in gold], [at[o] for o in ours]), 1)
    data = {
        "subset": "real.jsonl whole articles, out-of-fold",
        "codes": codes,
        "themes": {c: LEVEL1.get(c, "outside the tree") for c in codes},
        "counts": counts.tolist(),
        "agreement": round(float((gold == ours).mean()), 4),
    }
    for path in benchcharts.save(directory, "classify-confusion", "confusion", data, command):
        print(f"chart: {path}")


def calibration_chart(directory: Path, command: str, conf: np.ndarray, ok: np.ndarray, n: int) -> None:
    """``--chart``: the reliability diagram of the calibrated confidences above (whole articles are
    the first ``n``, their excerpts the next ``n``), with the ECE printed for each."""
    from dgb_dev import benchcharts

    series = []
    for label, sel in (("whole articles", slice(0, n)), ("excerpts", slice(n, 2 * n))):
        bins = measure.calibration_bins(conf[sel], ok[sel])
        series.append(
            {
                "label": label,
                "n": len(conf[sel]),
                "ece": round(measure.expected_calibration_error(conf[sel], ok[sel]), 4),
                "bins": [
                    [round(lo, 4), round(hi, 4), k, round(c, 4), round(a, 4)] for lo, hi, k, c, a in bins
                ],
            }
        )
    data = {"subset": "real.jsonl, out-of-fold", "bins": 10, "series": series}
    for path in benchcharts.save(directory, "classify-calibration", "reliability", data, command):
        print(f"chart: {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=training.DEV_DATA, help="development data folder")
    parser.add_argument("--service", action="store_true", help="use the model service instead of in-process")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--folds", type=int, default=training.FOLDS)
    parser.add_argument("--no-speed", action="store_true", help="skip the articles/s measurement")
    parser.add_argument("--no-curve", action="store_true", help="skip the learning curve")
    parser.add_argument(
        "--curve-seeds", type=int, default=learning.LEARNING_SEEDS, help="draws per learning-curve share"
    )
    parser.add_argument(
        "--chart",
        type=Path,
        default=None,
        metavar="DIR",
        help="also write the charts classify-confusion and classify-calibration (SVG + JSON) into DIR",
    )
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
    short = bare.features([training.excerpt_item(i) for i in items])
    excerpt = (short.X, short.proto)
    labels = np.array([a.l1 or "" for a in articles])
    source = np.array([a.source for a in articles])
    real = source == "real"
    print(
        f"embedder={embedder.name} articles={len(articles)} "
        + " ".join(f"{s}={int((source == s).sum())}" for s in SOURCES)
        + f" groups={len(set(training.group_ids(articles).tolist()))} folds={args.folds} "
        "(real.jsonl scored, cross-validated by title; every other row trains every fold)"
    )

    # -- level 1: the three figures, prototypes alone, without the lexical part ----------------
    def cv(**kw):
        return training.out_of_fold_logits(
            feats.X, feats.proto, articles, codes, excerpt=excerpt, folds=args.folds, **kw
        )

    oof, oof_ex = cv()
    whole_pred, ex_pred = _pred(oof, codes), _pred(oof_ex, codes)
    plain, plain_ex = cv(lexical_part=False)
    for name, pred, plain_pred, proto in (
        ("whole", whole_pred, _pred(plain, codes), feats.proto),
        (
            f"excerpts (title + first {training.EXCERPT_CHARS} chars)",
            ex_pred,
            _pred(plain_ex, codes),
            short.proto,
        ),
    ):
        print(
            f"l1_agreement[real, {name}] cv_head={_share(real, pred == labels)} "
            f"without_lexical={_share(real, plain_pred == labels)} "
            f"prototypes_only={_share(real, _pred(proto, codes) == labels)}"
        )
    (mw, themes), (me, _) = (measure.macro_recall(p[real], labels[real]) for p in (whole_pred, ex_pred))
    print(f"l1_macro_recall[real, {themes} themes] whole={mw:.3f} excerpts={me:.3f}")

    # -- short texts as production's own: labelled.jsonl's stored excerpts, held out too -------
    stored = (source == "labelled") & np.array([a.excerpt for a in articles])
    if stored.any():
        for name, kw in (("with", {}), ("without", {"short_prior": False})):
            z, _ = cv(score=real | (source == "labelled"), **kw)
            _, z_ex_real = cv(**kw) if kw else (None, oof_ex)
            pred_stored, pred_ex = _pred(z, codes)[stored], _pred(z_ex_real, codes)[real]
            print(
                f"short texts[{name} the short-text prior correction] labelled.jsonl stored excerpts "
                f"(held out by title with real.jsonl): {_share(stored, _pred(z, codes) == labels)} "
                f"macro={measure.macro_recall(pred_stored, labels[stored])[0]:.3f}; real.jsonl excerpts "
                f"{_share(real, _pred(z_ex_real, codes) == labels)} "
                f"macro={measure.macro_recall(pred_ex, labels[real])[0]:.3f}"
            )
    for name, kw in (
        ("agency withheld at test", {"agency_at_test": False}),
        ("no agency features", {"agency_prior": False}),
    ):
        z, z_ex = cv(**kw)
        print(
            f"agency prior[real, {name}] whole={_share(real, _pred(z, codes) == labels)} "
            f"excerpts={_share(real, _pred(z_ex, codes) == labels)} "
            f"macro whole={measure.macro_recall(_pred(z, codes)[real], labels[real])[0]:.3f}"
        )

    # -- learning curve: how much more labelled data would buy --------------------------------
    if not args.no_curve:
        curve = learning.learning_curve(
            feats.X,
            feats.proto,
            articles,
            codes,
            real,
            excerpt=excerpt,
            folds=args.folds,
            seeds=args.curve_seeds,
            known={1.0: float((whole_pred == labels)[real].mean())},
        )
        print(
            "learning_curve[real, whole] (share of each fold's training articles: articles -> agreement): "
            + ", ".join(f"{share:.0%}: {n} -> {score:.3f}" for share, n, score in curve)
        )

    # -- calibration on whole articles and excerpts together ----------------------------------
    both = np.concatenate([oof[real], oof_ex[real]])
    both_labels = np.concatenate([labels[real], labels[real]])
    chars, excerpt_chars = training.content_chars(items)
    both_chars = np.concatenate([chars[real], excerpt_chars[real]])
    scale, short_scale = calibration.fit_scales(both, list(both_labels), codes, both_chars)

    def calibrated(z: np.ndarray, content_chars: np.ndarray) -> np.ndarray:
        return training.softmax(calibration.factors(content_chars, scale, short_scale, SHORT) * z)

    probs = calibrated(oof, chars)
    level2 = training_level2.out_of_fold_level2(feats.X, articles, taxonomy, folds=args.folds)
    results = bare.decide(items, feats, probs, level2)
    pred = np.array([r.theme_l1 for r in results])
    correct = pred == labels

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

    # -- calibration and hybrid routing, whole articles and excerpts ------------------------
    p_both = calibrated(both, both_chars)
    conf_all = p_both.max(1)
    ok_all = np.array([codes[j] for j in p_both.argmax(1)]) == both_labels
    n = int(real.sum())
    for name, sel in (("whole", slice(0, n)), ("excerpts", slice(n, 2 * n)), ("both", slice(0, 2 * n))):
        conf, ok = conf_all[sel], ok_all[sel]
        ece = measure.expected_calibration_error(conf, ok)
        print(
            f"calibration[real, {name}] scale={scale:.3f} short_scale={short_scale:.3f} "
            f"(content <= {SHORT} chars) ECE={ece:.3f} "
            f"mean_confidence={conf.mean():.3f} accuracy={ok.mean():.3f}"
        )
    one = calibration.fit_scale(both, list(both_labels), codes)  # the single temperature of emb-6
    p_one = training.softmax(one * both)
    c_one, ok_one = p_one.max(1), np.array([codes[j] for j in p_one.argmax(1)]) == both_labels
    views = (("whole", slice(0, n)), ("excerpts", slice(n, 2 * n)), ("both", slice(0, 2 * n)))
    print(
        f"calibration[real, one temperature for all inputs, as before local-emb-7] scale={one:.3f} ECE "
        + " ".join(f"{v}={measure.expected_calibration_error(c_one[r], ok_one[r]):.3f}" for v, r in views)
    )
    for lo, hi in ((0.0, 0.4), (0.4, 0.6), (0.6, 0.8), (0.8, 1.01)):
        m = (conf_all >= lo) & (conf_all < hi)
        print(
            f"  confidence [{lo:.1f}, {min(hi, 1.0):.1f}) (whole + excerpts): share {m.mean():.2f} "
            f"agreement {_share(m, ok_all)}"
        )
    if args.chart:
        command = chart_command(sys.argv[1:] if argv is None else argv)
        confusion_chart(args.chart, command, labels[real], pred[real])
        calibration_chart(args.chart, command, conf_all, ok_all, n)
    threshold = measure.choose_threshold(conf_all, ok_all)
    print(
        "hybrid[real, whole + excerpts] (production's label stands in for Bedrock's; best threshold "
        f"with <= 30% routed: {threshold:.2f}):"
    )
    for t, routed, overall in measure.routing_table(
        conf_all, ok_all, sorted({0.3, 0.4, 0.5, 0.6, 0.7, threshold})
    ):
        row = f"  threshold {t:.2f}: routed {routed:.1%} overall agreement {overall:.3f}"
        for name, sel in (("whole", slice(0, n)), ("excerpts", slice(n, 2 * n))):
            [(_, r, o)] = measure.routing_table(conf_all[sel], ok_all[sel], [t])
            row += f"; {name} routed {r:.1%} overall {o:.3f}"
        print(row)

    # -- summary: against real.jsonl's reference and production's own stored summaries ------
    for src in ("real", "archive"):
        refs = [
            (r.summary, a.reference_summary)
            for a, r in zip(articles, results)
            if a.source == src and a.reference_summary
        ]
        if not refs:
            continue
        prf = np.mean([measure.rouge_l(s, ref) for s, ref in refs], axis=0)
        print(
            f"summary[{src}] ROUGE-L F1={prf[2]:.3f} (P {prf[0]:.3f} R {prf[1]:.3f}) over {len(refs)}; "
            f"median chars ours={np.median([len(s or '') for s, _ in refs]):.0f} "
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
            f"{embedder.name} via {type(embedder).__name__}; batches of {args.batch_size}; "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: shared machine, noisy)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
