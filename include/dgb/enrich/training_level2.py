"""Training the level-2 part of the offline classifier's head: a logistic regression over the
article vectors, trained on production's level-2 labels of real news that map to our tree
(``scripts/train_classifier.py`` fits it; ``scripts/bench_classify.py`` cross-validates it).
scikit-learn is imported only by the fitting functions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dgb.enrich.head import L2_UNSEEN_LOGPROB, Head
from dgb.enrich.training import FOLDS, DevArticle, group_ids, grouped_folds, title_key

LEVEL2_C = 1.0  # level-2 part: inverse L2 strength (~290 real articles, ~70 codes)


def level2_targets(articles: Sequence[DevArticle], taxonomy) -> list[str | None]:
    """Production's level-2 label of each article as OUR level-2 code (a child of its level-1
    code with the same label, compared loosely), or None (no label, or no such child: the
    label only maps once our tree carries production's labels)."""
    codes = {(t.parent_code, title_key(t.label)): t.code for t in taxonomy.level(2)}
    return [codes.get((a.l1, title_key(a.l2_label))) if a.l1 and a.l2_label else None for a in articles]


def fit_level2(
    X: np.ndarray, targets: Sequence[str | None], *, C: float = LEVEL2_C
) -> tuple[tuple[str, ...], np.ndarray, np.ndarray] | None:
    """(codes, W2, b2) of a logistic regression over the level-2 codes seen in ``targets``, or
    None with fewer than two of them."""
    from sklearn.linear_model import LogisticRegression

    rows = [i for i, t in enumerate(targets) if t]
    if len({targets[i] for i in rows}) < 2:
        return None
    model = LogisticRegression(C=C, max_iter=3000)
    model.fit(X[rows], [targets[i] for i in rows])
    return (
        tuple(str(c) for c in model.classes_),
        model.coef_.astype(np.float32),
        model.intercept_.astype(np.float32),
    )


def out_of_fold_level2(
    X: np.ndarray, articles: Sequence[DevArticle], taxonomy, *, folds: int = FOLDS
) -> tuple[tuple[str, ...], np.ndarray] | None:
    """(level-2 codes, log-probabilities of every article from a level-2 part trained on the
    OTHER folds); codes a fold never saw get :data:`~dgb.enrich.head.L2_UNSEEN_LOGPROB`."""
    targets = level2_targets(articles, taxonomy)
    codes = tuple(sorted({t for t in targets if t}))
    if len(codes) < 2:
        return None
    out = np.full((len(articles), len(codes)), L2_UNSEEN_LOGPROB, dtype=np.float64)
    for test in grouped_folds(group_ids(articles), folds):
        train = np.setdiff1d(np.arange(len(articles)), test)
        fitted = fit_level2(X[train], [targets[i] for i in train])
        if fitted is None:
            continue
        head = Head(
            (),
            np.zeros((0, X.shape[1])),
            np.zeros(0),
            0.0,
            1.0,
            1.0,
            "",
            X.shape[1] // 3,
            {},
            l2_codes=fitted[0],
            W2=fitted[1],
            b2=fitted[2],
        )
        cols = [codes.index(c) for c in fitted[0]]
        out[np.ix_(test, cols)] = head.level2_logprobs(X[test])
    return codes, out
