"""Portuguese polarity of news text: a lexicon of whole lemmas, read clause by clause.

Each word is matched by its lemma (simplemma's Portuguese dictionary, compiled to the words that
matter: :mod:`dgb.enrich.lemmas`; "morreram" -> morrer, "enchentes" -> enchente) or its own form,
whole, against ``data/features/sentiment_pt.tsv``: never
by prefix, so "seção" is not "seca", "premissa" not "prêmio", "lancha" not "lançar". Within a
clause (ended by punctuation or "mas", "porém", "contudo", "entretanto", "todavia"):

* a negator (não, nem, nunca, jamais, sem, nenhum) flips the polarity of what follows it;
* an intensifier multiplies the next polar word ("muito grave": x1.5; "pouco": x0.5);
* direction decides the things the lexicon calls ``harm`` and ``good``: "mortalidade infantil
  cai" and "inflação em queda" are favourable (harm + down), "desemprego sobe" unfavourable
  (harm + up), "emprego cresce" favourable, "safra cai" unfavourable; a harm mentioned with no
  direction counts half against.

:func:`tally` gives the favourable and unfavourable weight and the number of words;
:func:`lexicon_sentiment` turns a title and content into ``{"label", "score"}``: the title counts
twice, the score is ``tanh`` of the net weight per 30 words (so it is normalised by length: one
word in a long article moves it little), the label positive from :data:`THRESHOLD`, negative from
minus it. It is the offline fallback when the sentiment head (:mod:`dgb.enrich.sentiment`) cannot
run; the head reads its figures as features.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path

from dgb.enrich.lemmas import lemma
from dgb.enrich.lemmas import table as lemma_table
from dgb.textfold import strip_marks

LEXICON_PATH = Path(__file__).resolve().parent.parent / "data" / "features" / "sentiment_pt.tsv"
METHOD = "lexicon-pt-2"
THRESHOLD = 0.2  # |score| at which the fallback's label leaves neutral
PER_WORDS = 30  # the score is tanh(net weight per this many words x SCALE)
SCALE = 0.5
HARM_ALONE = 0.5  # a harm mentioned without a direction counts this much against
_TOKEN = re.compile(r"[^\W\d_]+(?:[-'][^\W\d_]+)*|[.,;:!?()\[\]—–]")
_CLAUSE_WORDS = frozenset({"mas", "porem", "contudo", "entretanto", "todavia"})
CLASSES = ("pol", "harm", "good", "down", "up", "neg", "int")


@dataclass(frozen=True)
class Tally:
    """Favourable and unfavourable weight of a text, and its number of words."""

    pos: float
    neg: float
    words: int

    @property
    def net(self) -> float:
        return self.pos - self.neg


def fold(word: str) -> str:
    return strip_marks(word).lower()


@lru_cache(maxsize=1)
def lexicon() -> tuple[dict[str, tuple[str, float]], dict[tuple[str, ...], tuple[str, float]]]:
    """(single terms, multiword terms): term -> (class, weight). A malformed line is a
    ``ValueError`` naming it."""
    single: dict[str, tuple[str, float]] = {}
    multi: dict[tuple[str, ...], tuple[str, float]] = {}
    for n, line in enumerate(LEXICON_PATH.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 3 or parts[1] not in CLASSES:
            raise ValueError(f"{LEXICON_PATH.name}:{n}: want <term>TAB<class>TAB<weight>, got {line!r}")
        term, cls, weight = fold(parts[0].strip()), parts[1], float(parts[2])
        if " " in term:
            multi[tuple(term.split())] = (cls, weight)
        else:
            single[term] = (cls, weight)
    return single, multi


class _Words:
    """(lemma, lexicon entry or None) of one word, each distinct word looked up once: the look-ups
    of the lexicon and lemma table in use (either reloaded: looked up again)."""

    def __init__(self) -> None:
        self.made_for: tuple = (None, None)
        self.look: Callable[[str], tuple[str, tuple[str, float] | None]] | None = None

    def __call__(self) -> Callable[[str], tuple[str, tuple[str, float] | None]]:
        single, table = lexicon()[0], lemma_table()
        if self.look is None or self.made_for[0] is not single or self.made_for[1] is not table:
            self.made_for = (single, table)  # held, so their identity means these objects
            self.look = lru_cache(maxsize=200_000)(partial(_look, single))
        return self.look


def _look(single: dict[str, tuple[str, float]], word: str) -> tuple[str, tuple[str, float] | None]:
    lem = lemma(word)
    return lem, single.get(lem) or single.get(fold(word))


_words = _Words()


def tally(text: str) -> Tally:
    """The polarity weight of ``text`` (see the module's docstring)."""
    tokens = _TOKEN.findall(text or "")
    multi = lexicon()[1]
    pos = neg = 0.0
    words = 0
    clause: list[tuple[str, float, float]] = []  # (class, weight, sign) of the clause's entries
    sign, boost = 1.0, 1.0

    def close() -> None:
        nonlocal pos, neg, sign, boost
        has_down = any(c == "down" for c, _, _ in clause)
        has_up = any(c == "up" for c, _, _ in clause)
        for cls, weight, s in clause:
            if cls == "pol":
                value = weight * s
            elif cls == "harm":
                value = weight * s * (1.0 if has_down else -1.0 if has_up else -HARM_ALONE)
            elif cls == "good":
                value = weight * s * (1.0 if has_up else -1.0 if has_down else 0.0)
            else:
                continue
            if value > 0:
                pos += value
            else:
                neg -= value
        clause.clear()
        sign, boost = 1.0, 1.0

    look = _words()
    looked = [look(t) if t[0].isalpha() else (t, None) for t in tokens]
    lemmas = [lem for lem, _ in looked]
    i = 0
    while i < len(tokens):
        tok, lem = tokens[i], lemmas[i]
        if not tok[0].isalpha() or lem in _CLAUSE_WORDS:
            if tok not in "()[]":
                close()
            i += 1
            continue
        words += 1
        pair = tuple(lemmas[i : i + 2])
        entry = multi.get(pair) if len(pair) == 2 else None
        step = 2 if entry else 1
        entry = entry or looked[i][1]
        i += step
        if entry is None:
            continue
        cls, weight = entry
        if cls == "neg":
            sign = -sign
        elif cls == "int":
            boost = weight
        elif cls in ("pol", "harm", "good"):
            clause.append((cls, weight * boost, sign))
            boost = 1.0
        else:
            clause.append((cls, weight, sign))
    close()
    return Tally(pos, neg, words)


def score(title: str, content: str) -> float:
    """tanh of the net weight (title twice) per :data:`PER_WORDS` words, in (-1, 1)."""
    return combined(tally(title), tally(content))


def combined(t: Tally, c: Tally) -> float:
    """:func:`score` from the title's and the content's tallies (already made)."""
    net = 2 * t.net + c.net
    words = max(PER_WORDS, 2 * t.words + c.words)
    return math.tanh(SCALE * net * PER_WORDS / words)


def label_for(value: float) -> str:
    if value >= THRESHOLD:
        return "positive"
    if value <= -THRESHOLD:
        return "negative"
    return "neutral"


def lexicon_sentiment(title: str, content: str) -> dict:
    """``{"label", "score"}`` of the lexicon alone (score rounded to 3 decimals)."""
    value = round(score(title or "", content or ""), 3)
    return {"label": label_for(value), "score": value}
