"""The lexical part of the offline classifier's head: a logistic regression over TF-IDF counts of
an article's words (:class:`Lexical`), and what it reads of an article (:func:`lexical_text`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from dgb.enrich.contract import ArticleText
from dgb.enrich.softmax import log_softmax
from dgb.textfold import strip_marks

LEX_BODY_CHARS = 3000  # how much of the body the word counts read
_LEX_TOKEN = re.compile(r"\b\w\w+\b")


def lexical_terms(text: str) -> list[str]:
    """The words the lexical part counts: accents removed (NFKD, combining marks dropped),
    lower case, runs of 2+ word characters."""
    return _LEX_TOKEN.findall(strip_marks(text).lower())


def lexical_text(item: ArticleText) -> str:
    """What the lexical part reads of an article: the title twice (it weighs most), the
    subtitle, the lead and the first :data:`LEX_BODY_CHARS` characters of the body."""
    parts = [
        item.title,
        item.title,
        item.subtitle,
        item.editorial_lead,
        (item.content or "")[:LEX_BODY_CHARS],
    ]
    return " ".join(p for p in parts if p)


@dataclass(frozen=True)
class Lexical:
    """A logistic regression over TF-IDF word counts (sublinear tf, l2-normalised), one row of
    ``W`` per code of its :class:`Head`; ``terms`` the vocabulary, ``idf`` each term's weight."""

    terms: tuple[str, ...]
    idf: np.ndarray
    W: np.ndarray
    b: np.ndarray

    @cached_property
    def _index(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.terms)}

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """(n, len(terms)) TF-IDF rows, as scikit-learn's TfidfVectorizer(sublinear_tf=True) with
        :func:`lexical_terms` as its analyzer computes them."""
        index = self._index
        out = np.zeros((len(texts), len(self.terms)), dtype=np.float32)
        for n, text in enumerate(texts):
            counts: dict[int, int] = {}
            for term in lexical_terms(text):
                i = index.get(term)
                if i is not None:
                    counts[i] = counts.get(i, 0) + 1
            if counts:
                cols = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
                tf = 1.0 + np.log(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))
                row = tf * self.idf[cols]
                out[n, cols] = row / np.linalg.norm(row)
        return out

    def logprobs(self, texts: Sequence[str]) -> np.ndarray:
        return log_softmax(self.vectors(texts) @ self.W.T + self.b)
