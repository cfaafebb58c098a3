"""The local classifier's sentiment: a small head over what it already computed for the theme.

Production asks its LLM for the theme, the summary and the sentiment in one call; the offline
classifier answers all three too. The sentiment head reads, per article:

* the classifier's three views (title, lead and body vectors: :class:`dgb.enrich.features.Features`
  ``X``), already computed for the theme, so the head costs no model call;
* the lemmas of the title and of the first :data:`BODY_CHARS` characters of the text a reader
  reads (:mod:`dgb.enrich.lemmas`: simplemma's), as TF-IDF vectors over the head's vocabulary
  (sublinear term frequency, L2-normalised);
* the polarity lexicon's figures (:mod:`dgb.enrich.polarity`): favourable and unfavourable weight
  of the title, per 30 words of the body, and the lexicon's own score.

Two linear models read them: a multinomial logistic regression gives the label's probabilities,
and a ridge regression gives the score on the LLM's own scale (trained on the score the labelling
passes gave: production's LLM rates news from -1, very negative, to 1, very positive), so the
offline score and Bedrock's share one scale; the score is then kept inside its label's band.
Both are trained by :mod:`dgb.enrich.sentiment_training` on ``evaluation/sentiment`` and shipped in
``data/classifier/sentiment.npz``; numpy only at run time.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from pathlib import Path

import numpy as np

from dgb.enrich import polarity
from dgb.enrich.contract import ArticleText
from dgb.enrich.lemmas import lemma
from dgb.enrich.text import joined_paragraphs

HEAD_FILE = Path(__file__).resolve().parent.parent / "data" / "classifier" / "sentiment.npz"
METHOD = "local-head-1"
LABELS = ("negative", "neutral", "positive")
BODY_CHARS = 1500  # reader text after the title that the lemma and lexicon features read
NEUTRAL_BAND = 0.2  # a neutral article's score stays within +-this; the others outside 0.05
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")


def reader_text(item: ArticleText, limit: int = BODY_CHARS) -> str:
    """Subtitle, lead and content as a reader reads them, up to ``limit`` characters."""
    parts = joined_paragraphs(item.subtitle, item.editorial_lead, item.content)
    return " ".join(p for _, p in parts)[:limit]


def lemmas(text: str) -> list[str]:
    return [lemma(w) for w in _WORD.findall(text)]


def bigrams(tokens: list[str]) -> list[str]:
    return [f"{a} {b}" for a, b in pairwise(tokens)]


def lexicon_features(title: str, body: str) -> np.ndarray:
    """Title favourable / unfavourable weight, body's per 30 words, and the lexicon's score."""
    t, b = polarity.tally(title), polarity.tally(body)
    per = polarity.PER_WORDS / max(polarity.PER_WORDS, b.words)
    return np.array([t.pos, t.neg, b.pos * per, b.neg * per, polarity.combined(t, b)], dtype=np.float64)


@dataclass
class Tfidf:
    """A fixed vocabulary with its inverse document frequencies."""

    vocab: dict[str, int]
    idf: np.ndarray

    def transform(self, docs: list[list[str]]) -> np.ndarray:
        """Each doc's sublinear TF-IDF row, L2-normalised (a row's terms weighted together: the
        same values as one term at a time)."""
        vocab = self.vocab
        out = np.zeros((len(docs), len(vocab)), dtype=np.float64)
        for i, terms in enumerate(docs):
            counts = Counter(j for j in map(vocab.get, terms) if j is not None)
            if not counts:
                continue
            cols = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
            n = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
            out[i, cols] = (1.0 + np.log(n)) * self.idf[cols]
            norm = np.linalg.norm(out[i])
            if norm:
                out[i, cols] /= norm
        return out

    @classmethod
    def fit(cls, docs: list[list[str]], min_df: int = 2) -> Tfidf:
        df: dict[str, int] = {}
        for terms in docs:
            for term in set(terms):
                df[term] = df.get(term, 0) + 1
        kept = sorted(t for t, n in df.items() if n >= min_df)
        n = len(docs)
        idf = np.array([np.log((1 + n) / (1 + df[t])) + 1.0 for t in kept], dtype=np.float64)
        return cls({t: i for i, t in enumerate(kept)}, idf)


@dataclass
class Inputs:
    """What the head reads for a batch, before its vocabularies: the views and the lemmas."""

    views: np.ndarray
    title_terms: list[list[str]]
    body_terms: list[list[str]]
    lexicon: np.ndarray


def inputs(views: np.ndarray, items: list[ArticleText]) -> Inputs:
    title_terms, body_terms, lex = [], [], []
    for item in items:
        body = reader_text(item)
        t = lemmas(item.title or "")
        title_terms.append(t + bigrams(t))
        body_terms.append(lemmas(body))
        lex.append(lexicon_features(item.title or "", body))
    return Inputs(np.asarray(views, dtype=np.float64), title_terms, body_terms, np.array(lex).reshape(-1, 5))


@dataclass
class SentimentHead:
    title: Tfidf
    body: Tfidf
    view_weight: float
    label_coef: np.ndarray  # (3, d)
    label_intercept: np.ndarray  # (3,)
    score_coef: np.ndarray  # (d,)
    score_intercept: float
    meta: dict = field(default_factory=dict)

    def design(self, x: Inputs) -> np.ndarray:
        return np.hstack(
            [
                x.views * self.view_weight,
                self.title.transform(x.title_terms),
                self.body.transform(x.body_terms),
                x.lexicon,
            ]
        )

    def probabilities(self, x: Inputs) -> np.ndarray:
        return self._probabilities(self.design(x))

    def _probabilities(self, d: np.ndarray) -> np.ndarray:
        z = d @ self.label_coef.T + self.label_intercept
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, x: Inputs) -> list[dict]:
        """``{"label", "score", "method"}`` per article (score on the LLM's scale, in its label's
        band, 3 decimals); the design matrix built once for both models."""
        d = self.design(x)
        probs = self._probabilities(d)
        raw = d @ self.score_coef + self.score_intercept
        out = []
        for p, s in zip(probs, raw):
            label = LABELS[int(np.argmax(p))]
            out.append({"label": label, "score": round(band(label, float(s)), 3), "method": METHOD})
        return out

    def save(self, path: Path) -> None:
        np.savez_compressed(
            path,
            title_vocab=np.array(json.dumps(list(self.title.vocab))),
            title_idf=self.title.idf,
            body_vocab=np.array(json.dumps(list(self.body.vocab))),
            body_idf=self.body.idf,
            view_weight=np.array(self.view_weight),
            label_coef=self.label_coef,
            label_intercept=self.label_intercept,
            score_coef=self.score_coef,
            score_intercept=np.array(self.score_intercept),
            meta=np.array(json.dumps(self.meta)),
        )

    @classmethod
    def load(cls, path: Path) -> SentimentHead:
        with np.load(path) as z:

            def tfidf(prefix: str) -> Tfidf:
                terms = json.loads(str(z[f"{prefix}_vocab"]))
                return Tfidf({t: i for i, t in enumerate(terms)}, z[f"{prefix}_idf"])

            return cls(
                tfidf("title"),
                tfidf("body"),
                float(z["view_weight"]),
                z["label_coef"],
                z["label_intercept"],
                z["score_coef"],
                float(z["score_intercept"]),
                json.loads(str(z["meta"])),
            )


def band(label: str, value: float) -> float:
    """``value`` kept inside ``label``'s band: neutral within +-NEUTRAL_BAND, positive at least
    0.05 (at most 1), negative at most -0.05 (at least -1)."""
    if label == "neutral":
        return max(-NEUTRAL_BAND, min(NEUTRAL_BAND, value))
    if label == "positive":
        return max(0.05, min(1.0, value))
    return min(-0.05, max(-1.0, value))


@lru_cache(maxsize=1)
def load_default() -> SentimentHead | None:
    """The shipped head, or None when the file is absent (the lexicon then answers)."""
    return SentimentHead.load(HEAD_FILE) if HEAD_FILE.exists() else None
