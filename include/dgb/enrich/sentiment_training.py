"""Training and measuring the sentiment head (:mod:`dgb.enrich.sentiment`) on a labelled set.

The labelled set is ``evaluation/sentiment`` (``articles.jsonl`` + ``gold.jsonl``: one label per
article; ``pass1.jsonl`` / ``pass2.jsonl``: the two labelling passes' scores, averaged into the
score target; ``adjudication.jsonl``: the settled score where the passes disagreed). scikit-learn
fits the two linear models here; the shipped head needs numpy only. The recipe's knobs are fixed
below, chosen before the cross-validated figures were taken (a handful of settings were compared
on those same folds; ``scripts/eval_features.py`` prints the figure over several fold seeds with
its spread).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dgb.enrich.contract import ArticleText
from dgb.enrich.sentiment import LABELS, Inputs, SentimentHead, Tfidf, band

VIEW_WEIGHT = 0.7  # the classifier's views against the lemma vectors (each L2-normalised)
C = 3.0  # inverse regularisation of the label model
RIDGE = 3.0  # regularisation of the score model
MIN_DF = 2  # a lemma enters the vocabulary when 2 training articles have it


@dataclass
class LabelledSet:
    items: list[ArticleText]
    labels: list[str]
    scores: np.ndarray  # the passes' mean score (the settled one where they disagreed)
    ids: list[str]


def load_labelled(folder: Path) -> LabelledSet:
    """``folder``'s articles with their gold label and score target."""

    def rows(name: str) -> list[dict]:
        with open(folder / name, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    gold = {r["id"]: r["label"] for r in rows("gold.jsonl")}
    first = {r["id"]: float(r["score"]) for r in rows("pass1.jsonl")}
    second = {r["id"]: float(r["score"]) for r in rows("pass2.jsonl")}
    settled = {r["id"]: float(r["score"]) for r in rows("adjudication.jsonl")}
    items, labels, scores, ids = [], [], [], []
    for a in rows("articles.jsonl"):
        uid = a["id"]
        if uid not in gold:
            continue
        items.append(
            ArticleText(
                uid,
                a["title"] or "",
                a.get("subtitle") or None,
                a.get("editorial_lead") or None,
                a.get("content") or "",
                a.get("agency"),
            )
        )
        labels.append(gold[uid])
        scores.append(settled.get(uid, (first[uid] + second[uid]) / 2))
        ids.append(uid)
    return LabelledSet(items, labels, np.array(scores), ids)


def _subset(x: Inputs, idx: Sequence[int]) -> Inputs:
    return Inputs(
        x.views[idx],
        [x.title_terms[i] for i in idx],
        [x.body_terms[i] for i in idx],
        x.lexicon[idx],
    )


def fit(x: Inputs, labels: Sequence[str], scores: np.ndarray, meta: dict | None = None) -> SentimentHead:
    """A head trained on ``x`` (labels in :data:`LABELS`)."""
    from sklearn.linear_model import LogisticRegression, Ridge

    unknown = sorted(set(labels) - set(LABELS))
    if unknown:
        raise ValueError(f"labels {unknown} are not {', '.join(LABELS)}")
    head = SentimentHead(
        Tfidf.fit(x.title_terms, MIN_DF),
        Tfidf.fit(x.body_terms, MIN_DF),
        VIEW_WEIGHT,
        np.zeros((3, 1)),
        np.zeros(3),
        np.zeros(1),
        0.0,
        dict(meta or {}),
    )
    design = head.design(x)
    y = np.array([LABELS.index(lab) for lab in labels])
    model = LogisticRegression(C=C, max_iter=5000, class_weight="balanced").fit(design, y)
    coef = np.zeros((3, design.shape[1]))
    intercept = np.full(3, -1e9)  # a class absent from training is never predicted
    for row, cls in enumerate(model.classes_):
        coef[cls], intercept[cls] = model.coef_[row], model.intercept_[row]
    if len(model.classes_) == 2:  # binary: sklearn gives one row for the second class
        coef[model.classes_[0]], intercept[model.classes_[0]] = 0.0, 0.0
        coef[model.classes_[1]], intercept[model.classes_[1]] = model.coef_[0], model.intercept_[0]
    ridge = Ridge(alpha=RIDGE).fit(design, scores)
    head.label_coef, head.label_intercept = coef, intercept
    head.score_coef, head.score_intercept = ridge.coef_.astype(np.float64), float(ridge.intercept_)
    return head


@dataclass
class Figures:
    accuracy: float
    macro_f1: float
    per_label_f1: dict[str, float]
    score_mae: float
    score_sign_agreement: float
    predictions: list[str]


def figures(gold: Sequence[str], pred: Sequence[str], target: np.ndarray, score: np.ndarray) -> Figures:
    """Accuracy, macro-F1 (and per label), the score's mean absolute error against the passes'
    score and how often its sign (zero within the neutral band) agrees."""
    gold, pred = list(gold), list(pred)
    f1 = {}
    for lab in LABELS:
        tp = sum(g == p == lab for g, p in zip(gold, pred))
        fp = sum(p == lab != g for g, p in zip(gold, pred))
        fn = sum(g == lab != p for g, p in zip(gold, pred))
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        f1[lab] = 2 * prec * rec / (prec + rec) if prec + rec else 0.0

    def sign(v: float) -> int:
        return 0 if abs(v) <= 0.2 else (1 if v > 0 else -1)

    return Figures(
        accuracy=sum(g == p for g, p in zip(gold, pred)) / len(gold),
        macro_f1=sum(f1.values()) / len(f1),
        per_label_f1=f1,
        score_mae=float(np.mean(np.abs(np.asarray(score) - np.asarray(target)))),
        score_sign_agreement=float(np.mean([sign(a) == sign(b) for a, b in zip(score, target)])),
        predictions=pred,
    )


def folds(labels: Sequence[str], k: int, seed: int) -> list[np.ndarray]:
    """``k`` folds stratified by label, dealt by a seeded shuffle."""
    rng = np.random.default_rng(seed)
    out: list[list[int]] = [[] for _ in range(k)]
    for lab in LABELS:
        idx = [i for i, g in enumerate(labels) if g == lab]
        rng.shuffle(idx)
        for n, i in enumerate(idx):
            out[n % k].append(i)
    return [np.array(sorted(f)) for f in out]


def cross_validate(
    x: Inputs, labels: Sequence[str], scores: np.ndarray, k: int = 5, seed: int = 0
) -> Figures:
    """Every article predicted by a head trained on the other folds."""
    pred: list[str] = [""] * len(labels)
    value = np.zeros(len(labels))
    for test in folds(labels, k, seed):
        train = np.setdiff1d(np.arange(len(labels)), test)
        head = fit(_subset(x, train), [labels[i] for i in train], scores[train])
        for i, p in zip(test, head.predict(_subset(x, test))):
            pred[i], value[i] = p["label"], p["score"]
    return figures(labels, pred, scores, value)


def lexicon_figures(items: Sequence[ArticleText], labels: Sequence[str], scores: np.ndarray) -> Figures:
    """The lexicon fallback alone (nothing fitted)."""
    from dgb.enrich import polarity

    out = [polarity.lexicon_sentiment(i.title, i.content) for i in items]
    return figures(
        labels, [o["label"] for o in out], scores, np.array([band(o["label"], o["score"]) for o in out])
    )
