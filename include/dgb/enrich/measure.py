"""How the offline classifier is measured: calibration error, hybrid routing simulated, recall
per theme, and ROUGE-L for the extractive summary. Used by ``scripts/train_classifier.py`` (the
hybrid threshold) and ``scripts/bench_classify.py``; numpy only."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

import numpy as np


def calibration_bins(
    confidence: np.ndarray, correct: np.ndarray, bins: int = 10
) -> list[tuple[float, float, int, float, float]]:
    """The equal-width confidence bins ``(lo, hi]`` the calibration error sums over, the empty
    ones left out: ``(lo, hi, articles, mean confidence, accuracy)`` each (a reliability diagram)."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    out = []
    for lo, hi in itertools.pairwise(edges):
        sel = (confidence > lo) & (confidence <= hi)
        if sel.any():
            out.append(
                (
                    float(lo),
                    float(hi),
                    int(sel.sum()),
                    float(confidence[sel].mean()),
                    float(correct[sel].mean()),
                )
            )
    return out


def expected_calibration_error(confidence: np.ndarray, correct: np.ndarray, bins: int = 10) -> float:
    """Mean |accuracy - confidence| over equal-width confidence bins, weighted by bin size."""
    total = 0.0
    for _, _, n, conf, acc in calibration_bins(confidence, correct, bins):
        total += n * abs(acc - conf)
    return float(total / max(1, len(confidence)))


def routing_table(
    confidence: np.ndarray, correct: np.ndarray, thresholds: Sequence[float]
) -> list[tuple[float, float, float]]:
    """Hybrid mode simulated: for each threshold, (threshold, share routed to Bedrock, overall
    agreement) when routed articles take the reference label (production's answer stands in
    for Bedrock's) and the others keep the local answer."""
    out = []
    for t in thresholds:
        routed = confidence < t
        agree = np.where(routed, True, correct)
        out.append((float(t), float(routed.mean()), float(agree.mean())))
    return out


def choose_threshold(confidence: np.ndarray, correct: np.ndarray, *, max_routed: float = 0.30) -> float:
    """The threshold with the best simulated overall agreement among those routing at most
    ``max_routed`` of the articles (on out-of-fold confidences)."""
    grid = np.round(np.arange(0.0, 1.0001, 0.01), 2)
    rows = [r for r in routing_table(confidence, correct, grid) if r[1] <= max_routed]
    return max(rows, key=lambda r: (r[2], -r[1]))[0]


def macro_recall(predicted: Sequence[str], gold: Sequence[str]) -> tuple[float, int]:
    """(mean over the themes present in ``gold`` of the share of their articles predicted as
    that theme, number of such themes); empty gold labels are left out."""
    predicted, gold = np.asarray(predicted), np.asarray(gold)
    themes = sorted({g for g in gold.tolist() if g})
    if not themes:
        return 0.0, 0
    return float(np.mean([(predicted[gold == t] == t).mean() for t in themes])), len(themes)


# ----------------------------------------------------------------------------- summary overlap

_TOKEN = re.compile(r"\w+", re.UNICODE)


def tokens(text: str | None) -> list[str]:
    return _TOKEN.findall((text or "").lower())


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token lists (O(len(a) x len(b)))."""
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(candidate: str | None, reference: str | None) -> tuple[float, float, float]:
    """ROUGE-L (precision, recall, F1) of ``candidate`` against ``reference`` over lower-cased
    word tokens; (0, 0, 0) when either is empty."""
    a, b = tokens(candidate), tokens(reference)
    lcs = lcs_length(a, b)
    if lcs == 0:
        return 0.0, 0.0, 0.0
    p, r = lcs / len(a), lcs / len(b)
    return p, r, 2 * p * r / (p + r)
