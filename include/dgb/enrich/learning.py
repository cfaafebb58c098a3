"""The offline classifier's learning curve: its cross-validated agreement when each fold's head
sees only a share of its training articles, which says how much more labelled data would buy
(``scripts/bench_classify.py``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dgb.enrich import training

LEARNING_SHARES = (0.25, 0.5, 1.0)
LEARNING_SEEDS = 3  # draws averaged per share below 1


def learning_curve(
    X: np.ndarray,
    proto: np.ndarray,
    articles: Sequence[training.DevArticle],
    codes: Sequence[str],
    rows: np.ndarray,
    *,
    excerpt: tuple[np.ndarray, np.ndarray] | None = None,
    shares: Sequence[float] = LEARNING_SHARES,
    folds: int = training.FOLDS,
    seeds: int = LEARNING_SEEDS,
    known: dict[float, float] | None = None,
) -> list[tuple[float, int, float]]:
    """(share, mean training articles per fold, mean cross-validated level-1 agreement over the
    ``rows`` mask) when each head is trained on that share of its training articles: how much
    more labelled data would buy. Shares below 1 average ``seeds`` draws; ``known``: agreements
    already measured (share 1.0 is the plain cross-validation), not recomputed."""
    labels = np.array([a.l1 or "" for a in articles])
    groups = training.group_ids(articles)
    scored = np.flatnonzero(training.scored_rows(articles))
    labelled = np.array([a.l1 is not None for a in articles])
    per_fold = np.mean(
        [
            int((labelled & ~np.isin(groups, np.unique(groups[scored][f]))).sum())
            for f in training.grouped_folds(groups[scored], folds)
        ]
    )
    out = []
    for share in shares:
        if known and share in known:
            out.append((float(share), round(share * per_fold), float(known[share])))
            continue
        scores = []
        for seed in range(1 if share >= 1.0 else seeds):
            z, _ = training.out_of_fold_logits(
                X, proto, articles, codes, excerpt=excerpt, folds=folds, train_share=share, seed=seed
            )
            pred = np.array([codes[j] for j in z.argmax(1)])
            scores.append(float((pred[rows] == labels[rows]).mean()))
        out.append((float(share), round(share * per_fold), float(np.mean(scores))))
    return out
