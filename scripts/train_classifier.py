"""Train the local classifier's head on ALL the development data and write the shipped file.

    .venv/bin/python scripts/train_classifier.py [--data ../shared/data/classifier-dev] [--service]
                                                 [--out include/dgb/data/classifier/head.npz]
                                                 [--archive [--archive-limit 50000]]
                                                 [--archive-file FILE [--archive-file-limit N]]
                                                 [--no-dev-data]

The development data is real.jsonl, labelled.jsonl, weak.jsonl, our corpus and, when the folder
has it, archive.jsonl (whole articles exported from production's news table with production's
own label; four agencies only, so its rows teach no agency prior). ``--archive-file`` reads
another such export instead (``--archive-file-limit``: its first rows only; with
``--no-dev-data``: that file alone, e.g. the small sample the tests train on).

``--archive`` adds the operator's own labelled archive: the newest ``--archive-limit`` rows of the
configured database's ``news`` table whose theme production's classifier or Bedrock gave
(``dgb.enrich.training.load_archive``; never the local classifier's own answers). The head is
data-limited (``scripts/bench_classify.py`` prints its learning curve), so a deployment that adopted
production's database gets a better head this way; ``--no-dev-data`` trains on the archive alone
(a machine without ``../shared/data``). Embedding runs at ~60-140 articles/s on 2 cores (twice per
article: whole and as an excerpt). The head is written over the shipped file, which every
classifier loads; ``--out`` writes it elsewhere first.

Deterministic: the same data, taxonomy and model give the same figures and, on the same machine,
the same file (the logistic regression is lbfgs from zeros, the folds are dealt by title in file
order); another machine's floating point moves the weights by ~1e-4. Steps:

1. embed every article twice: whole, and as an excerpt (title + first 500 characters of the
   content); title, lead and body views, taxonomy-prototype scores;
2. out-of-fold logits of real.jsonl (folds by title; every other row trains every fold; without
   real.jsonl, the production-labelled rows are scored), whole and as excerpts, used to fit the
   calibration temperature on both and to choose the hybrid-mode threshold (<= 30% routed);
3. fit the head on everything, each whole article also as its excerpt, themes weighted alike
   (level 1 with its lexical part, a logistic regression over TF-IDF word counts; and level 2 on
   production's level-2 labels of real.jsonl that map to our tree) and save it with that
   calibration and the figures in its metadata.

The cross-validated agreement printed here is the honest figure; the benchmark
(``scripts/bench_classify.py``) recomputes it. Retrain after the taxonomy or the model changes.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np

from dgb.config import settings as current_settings
from dgb.embed import get_embedder
from dgb.enrich import calibration, measure, training, training_level2
from dgb.enrich.head import HEAD_FILE
from dgb.enrich.local import VERSION, LocalClassifier
from dgb.taxonomy import load_taxonomy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=training.DEV_DATA, help="development data folder")
    parser.add_argument("--out", type=Path, default=HEAD_FILE, help="where to write the head")
    parser.add_argument("--service", action="store_true", help="embed through the model service")
    parser.add_argument(
        "--archive", action="store_true", help="add the labelled articles of the configured database"
    )
    parser.add_argument(
        "--archive-limit",
        type=int,
        default=training.ARCHIVE_LIMIT,
        help="newest archive articles to read (0: all)",
    )
    parser.add_argument(
        "--archive-file",
        type=Path,
        default=None,
        help="an exported archive (archive.jsonl format) instead of the one in --data",
    )
    parser.add_argument(
        "--archive-file-limit", type=int, default=0, help="first rows of --archive-file to read (0: all)"
    )
    parser.add_argument("--no-dev-data", action="store_true", help="leave the development data out")
    args = parser.parse_args(argv)
    if args.no_dev_data and not (args.archive or args.archive_file):
        parser.error("--no-dev-data needs --archive or --archive-file: there would be nothing to train on")
    if args.archive_limit < 0 or args.archive_file_limit < 0:
        parser.error("--archive-limit and --archive-file-limit must be 0 (all) or a positive number")

    settings = current_settings()
    articles = (
        [] if args.no_dev_data else training.load_dev_data(args.data, archive=args.archive_file is None)
    )
    if args.archive_file is not None:
        exported = training.load_archive_file(args.archive_file, limit=args.archive_file_limit or None)
        print(f"archive file: {len(exported)} labelled articles from {args.archive_file}")
        articles += exported
    if args.archive:
        from dgb import db

        with db.connect(settings.pg_dsn()) as conn:
            archive = training.load_archive(conn, limit=args.archive_limit or None)
        print(f"archive: {len(archive)} labelled articles from {settings.pg_host}/{settings.pg_db}")
        articles += archive
    if not articles:
        print("nothing to train on: no development data and no labelled archive rows", file=sys.stderr)
        return 2
    embedder = get_embedder(settings, prefer="service" if args.service else "local")
    clf = LocalClassifier(
        embedder, load_taxonomy(), cache_dir=settings.state_dir / "cache", head=False
    ).warm()
    progress = (
        (lambda done, total: print(f"embedded {done}/{total}", flush=True))
        if len(articles) > training.FEATURE_CHUNK
        else None
    )
    X, proto = training.training_features(clf, [a.item for a in articles], progress=progress)
    excerpt = training.training_features(
        clf, [training.excerpt_item(a.item) for a in articles], progress=progress
    )
    codes = clf.level1_codes
    labels = np.array([a.l1 or "" for a in articles])
    scored = training.scored_rows(articles)

    # calibration and the hybrid threshold: out-of-fold predictions of whole articles AND excerpts
    oof, oof_ex = training.out_of_fold_logits(X, proto, articles, codes, excerpt=excerpt)
    both = np.concatenate([oof[scored], oof_ex[scored]])
    both_labels = np.concatenate([labels[scored], labels[scored]])
    chars, excerpt_chars = training.content_chars([a.item for a in articles])
    both_chars = np.concatenate([chars[scored], excerpt_chars[scored]])
    scale, short_scale = calibration.fit_scales(both, list(both_labels), codes, both_chars)
    probs = training.softmax(
        calibration.factors(both_chars, scale, short_scale, calibration.SHORT_CHARS) * both
    )
    pred = np.array([codes[j] for j in probs.argmax(1)])
    correct = pred == both_labels
    conf = probs.max(1)
    threshold = measure.choose_threshold(conf, correct)
    n = int(scored.sum())
    scored_source = articles[int(np.flatnonzero(scored)[0])].source
    cv = {
        scored_source: round(float(correct[:n].mean()), 4),
        f"{scored_source}_excerpts": round(float(correct[n:].mean()), 4),
    }
    macro = round(measure.macro_recall(pred[:n], both_labels[:n])[0], 4)
    sources = [src for src in training.SOURCE_WEIGHTS if any(a.source == src for a in articles)]

    labelled = np.flatnonzero(labels != "")
    fitted, lexical = training.fit_level1(labelled, X, articles, codes, excerpt_X=excerpt[0])
    digest = hashlib.sha256()
    for a in articles:
        digest.update(f"{a.source}\t{a.item.title}\t{a.l1}\n".encode())
    meta = {
        "version": VERSION,
        "trained_on": {src: sum(a.source == src for a in articles) for src in sources},
        "data_digest": digest.hexdigest()[:16],
        "cv_level1_agreement": cv,
        "cv_macro_recall": {scored_source: macro},
        "cv_ece_real": round(measure.expected_calibration_error(conf, correct), 4),
        "cv_ece_real_whole": round(measure.expected_calibration_error(conf[:n], correct[:n]), 4),
        "cv_ece_real_excerpts": round(measure.expected_calibration_error(conf[n:], correct[n:]), 4),
        "hybrid_threshold": threshold,
        "regularisation_c": training.REGULARISATION_C,
        "source_weights": training.SOURCE_WEIGHTS,
        "weak_whole_weight": training.WEAK_WHOLE_WEIGHT,
        "class_balance": training.CLASS_BALANCE,
        "excerpt_chars": training.EXCERPT_CHARS,
        "excerpt_weight": training.EXCERPT_WEIGHT,
        "short_prior_weight": calibration.SHORT_PRIOR_WEIGHT,
        "rows_without_agency_prior": sum(not a.agency_prior for a in articles),
        "taxonomy_prototypes": clf._protos.digest[:16],
    }
    meta["agencies_with_prior"] = len(fitted[2])
    targets = training_level2.level2_targets(articles, clf.taxonomy)
    level2 = training_level2.fit_level2(X, targets)
    meta["level2_trained_on"] = sum(1 for t in targets if t)
    meta["lexical_terms"] = len(lexical.terms) if lexical else 0
    meta["lexical_c"] = training.LEX_C
    head = training.make_head(
        fitted,
        codes,
        int(embedder.dim),
        scale=scale,
        short_scale=short_scale,
        short_chars=calibration.SHORT_CHARS,
        short_bias=training.short_bias(labelled, articles, codes),
        embedder=embedder.name,
        meta=meta,
        level2=level2,
        lexical=lexical,
    )
    head.save(args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")
    print(f"cross-validated level-1 agreement (grouped by title): {cv}; macro recall {macro}")
    print(
        f"calibration scale={scale:.4f} short_scale={short_scale:.4f} (content <= {calibration.SHORT_CHARS}"
        f" chars) ECE(whole + excerpts)={meta['cv_ece_real']} "
        f"hybrid_threshold={threshold}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
