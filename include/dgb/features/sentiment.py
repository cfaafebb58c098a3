"""Offline sentiment of an article: a deterministic Portuguese lexicon count, not a model.

What it is: the title (counted twice) and the content are folded (NFKD, accents dropped,
lowercase) and split into words; each word that starts with a stem of the polarity lexicon
(``data/features/sentiment_pt.tsv``, ~200 stems and a few phrases written for gov.br news: growth,
delivery, recognition versus disasters, crime, deaths, losses) adds the stem's weight, with the
sign flipped when one of the three words before it negates (não, nem, nunca, sem, jamais). The
score is ``(favourable - unfavourable) / (favourable + unfavourable + 4)``, in (-1, 1): a few
matches pull it only part of the way, many matches in one direction approach ±1. The label is
``positive`` from +0.15, ``negative`` from -0.15, ``neutral`` between.

What it is not: it reads no context beyond the negation window (irony, quotes, "queda da
mortalidade" read as negative words), and it was not fitted to labelled data: no human-labelled
sentiment set of DestaquesGovBr exists to fit or measure it against (see docs/compatibility.md for
what was compared). With Bedrock, the sentiment comes from the combined classification call
instead (production's method) and this module is only the fallback when that answer lacks it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from dgb.textfold import strip_marks

LEXICON_PATH = Path(__file__).resolve().parent.parent / "data" / "features" / "sentiment_pt.tsv"
NEGATIONS = frozenset({"nao", "nem", "nunca", "sem", "jamais"})
NEGATION_WINDOW = 3
SMOOTHING = 4.0
THRESHOLD = 0.15
METHOD = "lexicon-pt-1"

_WORD = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def fold(text: str) -> str:
    """NFKD, combining marks dropped, lowercase."""
    return strip_marks(text).lower()


@lru_cache(maxsize=1)
def _lexicon() -> tuple[dict[str, float], list[tuple[re.Pattern, float]]]:
    stems: dict[str, float] = {}
    phrases: list[tuple[re.Pattern, float]] = []
    for line in LEXICON_PATH.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        stem, weight = line.split("\t")
        stem = fold(stem.strip())
        if " " in stem:
            phrases.append((re.compile(r"\b" + re.escape(stem)), float(weight)))
        else:
            stems[stem] = float(weight)
    return stems, phrases


@lru_cache(maxsize=100_000)
def _weight(word: str) -> float:
    stems = _lexicon()[0]
    for end in range(len(word), 3, -1):  # the longest stem the word starts with
        w = stems.get(word[:end])
        if w is not None:
            return w
    return 0.0


def _tally(text: str) -> tuple[float, float]:
    folded = fold(text)
    words = _WORD.findall(folded)
    pos = neg = 0.0
    for i, word in enumerate(words):
        w = _weight(word)
        if not w:
            continue
        if any(p in NEGATIONS for p in words[max(0, i - NEGATION_WINDOW) : i]):
            w = -w
        if w > 0:
            pos += w
        else:
            neg -= w
    for pattern, w in _lexicon()[1]:
        hits = len(pattern.findall(folded))
        if w > 0:
            pos += w * hits
        else:
            neg -= w * hits
    return pos, neg


def score_text(title: str, content: str) -> float:
    tp, tn = _tally(title or "")
    cp, cn = _tally(content or "")
    pos, neg = 2 * tp + cp, 2 * tn + cn
    return (pos - neg) / (pos + neg + SMOOTHING)


def label_for(score: float) -> str:
    if score >= THRESHOLD:
        return "positive"
    if score <= -THRESHOLD:
        return "negative"
    return "neutral"


def sentiment(title: str, content: str) -> dict:
    """``{"label": ..., "score": ...}`` (score rounded to 3 decimals, in [-1, 1])."""
    score = round(max(-1.0, min(1.0, score_text(title, content))), 3)
    return {"label": label_for(score), "score": score}
