"""Train the local classifier's sentiment head on the labelled set and write the shipped file.

    .venv/bin/python scripts/train_sentiment.py [--data evaluation/sentiment]
                                                [--out include/dgb/data/classifier/sentiment.npz]

Steps: the lemma table (:mod:`dgb.enrich.lemmas`) is compiled from simplemma's dictionary for
every lemma the labelled articles and the polarity lexicon have, and written first (the head then
reads the same lemmas here and at run time); the local classifier computes its three views of
every labelled article (one encode call per batch, the embedder of ``DGB_EMBEDDER``: the model
service when it runs, else in-process);
the head (:mod:`dgb.enrich.sentiment`) is fitted on all of them (:mod:`dgb.enrich.sentiment_training`)
and saved with the embedder's name and dimension (a classifier with another model ignores it).
It prints the cross-validated figures first (5 folds, seed 0): the honest figure;
``scripts/eval_features.py`` prints them over several seeds. Deterministic for the same data and
model (lbfgs from zeros, folds dealt by a seeded shuffle).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

from dgb.config import REPO_ROOT
from dgb.config import settings as current_settings
from dgb.embed import get_embedder
from dgb.enrich import lemmas, polarity, sentiment, sentiment_training
from dgb.enrich.local import LocalClassifier


def vocabulary(items) -> set[str]:
    """Every distinct word of the titles and the reader's text the head reads."""
    words: set[str] = set()
    for item in items:
        for text in (item.title or "", sentiment.reader_text(item)):
            words.update(sentiment._WORD.findall(text))
    return words


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO_ROOT / "evaluation" / "sentiment")
    parser.add_argument("--out", type=Path, default=sentiment.HEAD_FILE)
    args = parser.parse_args(argv)
    labelled = sentiment_training.load_labelled(args.data)
    needed = {lemmas.dictionary_lemma(w) for w in vocabulary(labelled.items)}
    single, multi = polarity.lexicon()
    needed |= set(single) | {w for term in multi for w in term}
    table = lemmas.build_table(needed)
    lemmas.save_table(table)
    print(f"lemma table: {len(table)} forms of {len(needed)} lemmas -> {lemmas.TABLE}", file=sys.stderr)
    embedder = get_embedder(current_settings())
    clf = LocalClassifier(embedder, head=False, sentiment_head=False)
    feats = clf.features(labelled.items)
    x = sentiment.inputs(feats.X, labelled.items)
    cv = sentiment_training.cross_validate(x, labelled.labels, labelled.scores, seed=0)
    print(
        f"cross-validated (5 folds, seed 0): accuracy {cv.accuracy:.3f}, macro-F1 {cv.macro_f1:.3f}, "
        f"score MAE {cv.score_mae:.3f}",
        file=sys.stderr,
    )
    data_hash = hashlib.sha256(
        "".join(sorted(f"{i}:{lab}" for i, lab in zip(labelled.ids, labelled.labels))).encode()
    ).hexdigest()[:16]
    head = sentiment_training.fit(
        x,
        labelled.labels,
        labelled.scores,
        meta={
            "embedder": embedder.name,
            "dim": int(embedder.dim),
            "articles": len(labelled.items),
            "labels": data_hash,
            "cv_accuracy": round(cv.accuracy, 4),
            "cv_macro_f1": round(cv.macro_f1, 4),
            "method": sentiment.METHOD,
        },
    )
    head.save(args.out)
    print(f"sentiment head: {len(labelled.items)} articles, {embedder.name}/{embedder.dim} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
