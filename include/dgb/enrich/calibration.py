"""The offline classifier's calibration: the temperatures that turn its head's logits into a
``theme_confidence`` that reads as a probability (among articles at ~0.8, ~80% agree with
production's label), for whole articles and short texts alike.

Both are fitted by likelihood on out-of-fold predictions of real news, each article scored whole
and as an excerpt (``scripts/train_classifier.py``, ``scripts/bench_classify.py``): ``scale`` on
the rows whose content is longer than :data:`SHORT_CHARS` characters, ``short_scale`` on the
others (the excerpts, and short notes). One temperature for both left whole articles
overconfident and short texts underconfident (local-emb-6, cross-validated: ECE 0.113 on whole
articles, 0.084 on excerpts); the head applies the one that fits each input
(:meth:`dgb.enrich.head.Head.scales`).

Short texts also lose the class prior the head learnt from its training rows
(:func:`prior_bias`, ``short_bias`` of the head): a short text carries little evidence, so the
skew of the training mix (the archive's four agencies make Public Security and Sports common)
decided too many of them; the themes of a set of short texts balanced over the themes were then
under-recalled. Cross-validated (``scripts/bench_classify.py``): held-out stored excerpts of
labelled.jsonl 0.561 -> 0.595 (macro recall 0.514 -> 0.609), real.jsonl's excerpts one answer of
300 fewer (0.657 -> 0.653, macro recall 0.584 -> 0.592).

scikit-learn is not needed: a golden-section search on the log of the factor (deterministic).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dgb.enrich.softmax import log_softmax

SHORT_CHARS = 1200  # content of at most this many characters: calibrated as a short text
SHORT_PRIOR_WEIGHT = 0.75  # share of the training rows' log class prior a short text loses


def fit_scale(logits: np.ndarray, labels: Sequence[str | None], codes: Sequence[str]) -> float:
    """The factor ``s`` minimising the negative log-likelihood of softmax(s * logits) over the
    rows whose label is a code (golden-section search on log s; deterministic)."""
    rows = [i for i, lab in enumerate(labels) if lab in codes]
    if not rows:
        raise ValueError("no labelled rows to calibrate on")
    z = logits[rows]
    target = np.array([list(codes).index(labels[i]) for i in rows])

    def nll(log_s: float) -> float:
        return float(-log_softmax(np.exp(log_s) * z)[np.arange(len(rows)), target].mean())

    lo, hi = np.log(1e-3), np.log(1e2)
    ratio = (np.sqrt(5) - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = nll(a), nll(b)
    for _ in range(80):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = nll(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = nll(b)
    return float(np.exp((lo + hi) / 2))


def fit_scales(
    logits: np.ndarray,
    labels: Sequence[str | None],
    codes: Sequence[str],
    content_chars: Sequence[int] | np.ndarray,
    *,
    short_chars: int = SHORT_CHARS,
) -> tuple[float, float]:
    """(``scale``, ``short_scale``): :func:`fit_scale` on the rows whose content is longer than
    ``short_chars`` characters, and on the others. A side with no labelled row takes the factor
    fitted on every row."""
    chars = np.asarray(content_chars)
    if chars.shape != (len(labels),):
        raise ValueError(f"content_chars has shape {chars.shape}, expected ({len(labels)},)")
    overall = fit_scale(logits, labels, codes)
    fitted = []
    for rows in (np.flatnonzero(chars > short_chars), np.flatnonzero(chars <= short_chars)):
        side = [labels[i] for i in rows]
        fitted.append(fit_scale(logits[rows], side, codes) if any(lab in codes for lab in side) else overall)
    return fitted[0], fitted[1]


def prior_bias(
    labels: Sequence[str | None],
    weights: Sequence[float] | np.ndarray,
    codes: Sequence[str],
    weight: float = SHORT_PRIOR_WEIGHT,
) -> np.ndarray:
    """(len(codes),) ``-weight * log(share)`` of each code among the labelled training rows
    (their weights summed, plus one per code so a theme without rows is finite): added to a
    short text's logits, it takes that share of the training mix's class prior out."""
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (len(labels),):
        raise ValueError(f"weights has shape {w.shape}, expected ({len(labels)},)")
    index = {c: j for j, c in enumerate(codes)}
    counts = np.ones(len(codes), dtype=np.float64)
    for label, row_weight in zip(labels, w):
        if label in index:
            counts[index[label]] += row_weight
    return -float(weight) * np.log(counts / counts.sum())


def factors(
    content_chars: Sequence[int] | np.ndarray, scale: float, short_scale: float | None, short_chars: int
) -> np.ndarray:
    """(n, 1) factors for logits of inputs with these content lengths: ``short_scale`` where the
    content has at most ``short_chars`` characters, ``scale`` elsewhere (and everywhere when
    ``short_scale`` is None)."""
    chars = np.asarray(content_chars, dtype=np.int64).reshape(-1, 1)
    if short_scale is None:
        return np.full(chars.shape, float(scale))
    return np.where(chars <= short_chars, float(short_scale), float(scale))
