"""The offline classifier: level 1 by a small head trained on real labelled gov.br news plus
taxonomy-prototype similarity, levels 2-3 by prototype similarity; an EXTRACTIVE summary.

Its pieces, one module each: :mod:`dgb.enrich.text` (the markdown cleaned, sentences),
:mod:`dgb.enrich.features` (an article as units of the batch's one encode call, and the vectors
built from them), :mod:`dgb.enrich.prototypes` (the taxonomy's prototype texts, their cached
vectors), :mod:`dgb.enrich.lexical` and :mod:`dgb.enrich.head` (the trained head),
:mod:`dgb.enrich.summary` (the extractive summary). This module decides.

Level 1
-------
Features per article (:class:`~dgb.enrich.features.Features`): the title vector, the lead
vector, the body vector; the article vector scored against the taxonomy prototypes gives one
score per level-1 theme. The trained :class:`~dgb.enrich.head.Head` adds a logistic regression
over the three vectors, an agency prior, the prototype scores and its lexical part.
``confidence`` is the softmax probability of the chosen theme at a temperature fitted on
out-of-fold predictions of real news, one for short texts (content of at most
:data:`~dgb.enrich.calibration.SHORT_CHARS` characters) and one for the rest (calibrated: among
articles at confidence ~0.8, ~80% agree with production's label). Without a head trained for
this embedder, level 1 falls back to prototypes alone (softmax at :data:`CONFIDENCE_TEMPERATURE`).

Levels 2 and 3
--------------
Level 2 is chosen among the children of the chosen level 1 (prototype score plus the head's
level-2 part, a logistic regression trained on production's level-2 labels of real news), level 3
among the children of level 2 by prototypes alone (codes always nest). Nodes are reached only
through the :class:`~dgb.taxonomy.Taxonomy` API, so another tree drops in (retrain the head).

Sentiment
---------
Like production's combined LLM call, the classifier also answers the article's sentiment: the
head of :mod:`dgb.enrich.sentiment` reads the same three vectors (no model call of its own), the
lemmas of the title and lead and the polarity lexicon's figures. Without a sentiment head trained
for this embedder the classification carries no sentiment (the features then use the lexicon).

The summary is EXTRACTIVE (:mod:`dgb.enrich.summary`): sentences copied from the article, never
generated text; ``classifier_version`` says so: ``"local-emb-8 (head; extractive summary; <model>)"``.

Figures (``scripts/bench_classify.py``: real.jsonl cross-validated by title, every other file
training every fold, production's tree): level-1 agreement with production 0.70 on whole articles
(0.66 without the lexical part; prototypes alone 0.49), 0.66 on excerpts (title + first 500
characters), macro-averaged recall over the 23 themes present 0.63; level-2 label agreement ~0.41.
The head is trained on real.jsonl, labelled.jsonl, weak.jsonl's whole articles, our corpus and
archive.jsonl (production's own labels; its four agencies teach no agency prior), each whole
article also as an excerpt, themes weighted alike.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from dgb.enrich.contract import ArticleText, Classification, ClassificationFailure, now_utc
from dgb.enrich.features import Features, article_layout, article_views
from dgb.enrich.head import L2_UNSEEN_LOGPROB, Head, load_default_head
from dgb.enrich.lexical import lexical_text
from dgb.enrich.prototypes import ENCODE_BATCH, TOP_K, build_prototypes, prototype_vectors, topk_mean
from dgb.enrich.sentiment import SentimentHead
from dgb.enrich.sentiment import inputs as sentiment_inputs
from dgb.enrich.sentiment import load_default as load_default_sentiment
from dgb.enrich.softmax import softmax
from dgb.enrich.summary import extractive_summary
from dgb.enrich.text import normalize_ws
from dgb.taxonomy import Taxonomy

log = logging.getLogger(__name__)

NAME = "local"
# 8: short texts lose the training mix's class prior; 7: short texts calibrated apart;
# 6: C 3, no weak excerpts; 5: archive, excerpts
VERSION = "local-emb-8"
CONFIDENCE_TEMPERATURE = 0.03  # prototype-only mode (no head): softmax temperature
L2_PROTO_TEMPERATURE = 0.05  # level-2 prototype scores are divided by this (next to log-probabilities)


def _is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` says the model is unreachable (the service down, overloaded or timing
    out) rather than that this input is bad."""
    from dgb.embed.client import ModelServiceUnavailable

    return isinstance(exc, (ModelServiceUnavailable, MemoryError))


class LocalClassifier:
    """Offline classifier over any :class:`dgb.embed.Embedder` (in-process model or the service).

    ``head``: the trained :class:`~dgb.enrich.head.Head`; by default the shipped one
    (:data:`dgb.enrich.head.HEAD_FILE`) when it was trained with this embedder's model, else none
    (level 1 by prototypes alone). Pass
    ``head=False`` to force prototype-only mode (what the training script measures against).

    The summary is EXTRACTIVE: sentences copied from the article, never generated text.
    """

    name = NAME

    def __init__(
        self,
        embedder,
        taxonomy: Taxonomy | None = None,
        *,
        cache_dir: Path | None = None,
        head: Head | Literal[False] | None = None,
        sentiment_head: SentimentHead | Literal[False] | None = None,
    ):
        if taxonomy is None:
            from dgb.taxonomy import load_taxonomy

            taxonomy = load_taxonomy()
        self.embedder = embedder
        self.taxonomy = taxonomy
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self._protos = build_prototypes(taxonomy)
        self._vectors: np.ndarray | None = None
        self._lock = threading.Lock()
        # subtree prototype indices per node
        subtree: dict[str, list[int]] = {}
        for i, code in enumerate(self._protos.owner):
            for theme in taxonomy.path(code):
                subtree.setdefault(theme.code, []).append(i)
        self._subtree = {code: np.asarray(idx, dtype=np.int64) for code, idx in subtree.items()}
        self.level1_codes = [t.code for t in taxonomy.level(1) if t.code in self._subtree]
        if head is None:
            head = load_default_head()
            if head is not None and (head.embedder != embedder.name or head.dim != int(embedder.dim)):
                log.info(
                    "shipped classifier head was trained with %s/%d, not %s/%d: prototypes only",
                    head.embedder,
                    head.dim,
                    embedder.name,
                    embedder.dim,
                )
                head = None
        self.head: Head | None = head or None
        self._head_cols = None
        if self.head is not None:
            unknown = sorted(set(self.head.codes) - set(self.level1_codes))
            if unknown:
                raise ValueError(f"classifier head has level-1 codes {unknown} that the taxonomy lacks")
            self._head_cols = np.array([self.level1_codes.index(c) for c in self.head.codes])
            trained_with = (self.head.meta or {}).get("taxonomy_prototypes")
            if trained_with and trained_with != self._protos.digest[:16]:
                log.warning(
                    "the classifier head was trained with other taxonomy prototypes (%s, now %s): "
                    "it still works, but retrain it (scripts/train_classifier.py)",
                    trained_with,
                    self._protos.digest[:16],
                )
        if sentiment_head is None:
            sentiment_head = load_default_sentiment()
            trained = (sentiment_head.meta or {}) if sentiment_head is not None else {}
            if sentiment_head is not None and (
                trained.get("embedder") != embedder.name or int(trained.get("dim", 0)) != int(embedder.dim)
            ):
                log.info(
                    "shipped sentiment head was trained with %s/%s, not %s/%d: no classifier sentiment",
                    trained.get("embedder"),
                    trained.get("dim"),
                    embedder.name,
                    embedder.dim,
                )
                sentiment_head = None
        self.sentiment_head: SentimentHead | None = sentiment_head or None
        mode = "head" if self.head is not None else "prototypes"
        self.version = f"{VERSION} ({mode}; extractive summary; {embedder.name})"

    # -- prototypes -----------------------------------------------------------------
    def warm(self) -> LocalClassifier:
        """Compute (or load) the prototype vectors now."""
        self._prototype_matrix()
        return self

    def _prototype_matrix(self) -> np.ndarray:
        if self._vectors is None:
            with self._lock:
                if self._vectors is None:
                    self._vectors = prototype_vectors(self._protos, self.embedder, self.cache_dir)
        return self._vectors

    # -- scoring ----------------------------------------------------------------------
    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors = np.asarray(self.embedder.encode(texts, batch_size=ENCODE_BATCH), dtype=np.float32)
        if vectors.shape != (len(texts), self._prototype_matrix().shape[1]):
            raise RuntimeError(
                f"embedder {self.embedder.name} returned shape {vectors.shape} for {len(texts)} texts"
            )
        return vectors

    def _scores(self, sims: np.ndarray, codes: list[str], level: int) -> np.ndarray:
        """Top-k mean prototype similarity of each node in ``codes``; ``sims`` is (n, prototypes)."""
        return np.stack([topk_mean(sims[..., self._subtree[c]], TOP_K[level]) for c in codes], axis=-1)

    def features(self, items: Sequence[ArticleText]) -> Features:
        """Embed ``items`` (ONE encode call) and compute everything the decision needs."""
        texts: list[str] = []
        layouts = [article_layout(item, texts) for item in items]
        vectors = self._encode(texts)
        X, A = article_views(layouts, vectors)
        S = A @ self._prototype_matrix().T
        return Features(layouts, vectors, X, A, S, self._scores(S, self.level1_codes, 1))

    def level1_probabilities(
        self,
        feats: Features,
        agencies: Sequence[str | None] = (),
        texts: Sequence[str] = (),
        content_chars: Sequence[int] = (),
    ) -> np.ndarray:
        """(n, len(level1_codes)) probabilities: the head's calibrated softmax, or (no head) the
        softmax of the prototype scores at :data:`CONFIDENCE_TEMPERATURE`. ``texts``: each
        article's :func:`lexical_text` (the head's lexical part reads them); ``content_chars``:
        each article's content length (short texts have their own calibration; empty: whole)."""
        if self.head is None:
            return softmax(feats.proto / CONFIDENCE_TEMPERATURE)
        z = np.full((len(feats.X), len(self.level1_codes)), -np.inf, dtype=np.float64)
        proto = feats.proto[:, self._head_cols]
        scales = self.head.scales(content_chars) if len(content_chars) else self.head.scale
        z[:, self._head_cols] = scales * self.head.logits(feats.X, proto, agencies, texts, content_chars)
        return softmax(z)

    def classify_batch(self, items: list[ArticleText]) -> list[Classification | ClassificationFailure]:
        results: list[Classification | ClassificationFailure | None] = [None] * len(items)
        keep: list[int] = []
        for n, item in enumerate(items):
            if item.is_empty():
                results[n] = ClassificationFailure(
                    "empty_article", "the article has no title, subtitle, lead or content", retryable=False
                )
            else:
                keep.append(n)
        if not keep:
            return results  # type: ignore[return-value]

        for n, result in zip(keep, self._classify_isolating([items[n] for n in keep])):
            results[n] = result
        return results  # type: ignore[return-value]

    def _classify(self, items: list[ArticleText]) -> list[Classification]:
        feats = self.features(items)
        probs = self.level1_probabilities(
            feats,
            [item.agency for item in items],
            [lexical_text(item) for item in items],
            [len(item.content or "") for item in items],
        )
        out = self.decide(items, feats, probs)
        for classification, sentiment in zip(out, self.sentiments(items, feats)):
            classification.sentiment = sentiment
        return out

    def sentiments(self, items: Sequence[ArticleText], feats: Features | None = None) -> list[dict | None]:
        """Each article's ``{"label", "score", "method"}`` from the sentiment head (``feats``: the
        batch's features when already computed, else computed now: one encode call); ``None``
        each without a sentiment head."""
        if self.sentiment_head is None:
            return [None] * len(items)
        feats = feats if feats is not None else self.features(items)
        return self.sentiment_head.predict(sentiment_inputs(feats.X, list(items)))

    def _classify_isolating(self, items: list[ArticleText]) -> list[Classification | ClassificationFailure]:
        """:meth:`_classify`, with a failing batch bisected so that an article the model cannot
        take fails alone (``classifier_error``, not retryable) and the others are classified.
        An unavailable model service is no article's fault: that error propagates (the whole
        batch is retried later), never turned into per-article failures."""
        try:
            return list(self._classify(items))
        except Exception as exc:
            if _is_outage(exc):
                raise
            if len(items) == 1:
                log.warning(
                    "article %s cannot be classified: %s: %s", items[0].unique_id, type(exc).__name__, exc
                )
                detail = f"{type(exc).__name__}: {exc}"[:500]
                return [ClassificationFailure("classifier_error", detail, retryable=False)]
            mid = len(items) // 2
            return self._classify_isolating(items[:mid]) + self._classify_isolating(items[mid:])

    def decide(
        self,
        items: Sequence[ArticleText],
        feats: Features,
        probs: np.ndarray,
        level2: tuple[tuple[str, ...], np.ndarray] | None = None,
    ) -> list[Classification]:
        """The classifications of ``items`` given their features and level-1 probabilities: level 1
        is the most probable theme (``confidence`` its probability); level 2 is chosen among the
        children of level 1 by prototype similarity plus, when the head has one, its level-2 part
        (``level2`` = (codes, log-probabilities) overrides it: the benchmark's per-fold heads);
        level 3 among the children of level 2 by prototype similarity (codes always nest)."""
        if level2 is None and self.head is not None:
            lp = self.head.level2_logprobs(feats.X)
            level2 = (self.head.l2_codes, lp) if lp is not None else None
        l2_index = {c: i for i, c in enumerate(level2[0])} if level2 is not None else {}
        l2_weight = self.head.l2_weight if self.head is not None else 1.0
        enriched_at = now_utc()
        out: list[Classification] = []
        for row, item in enumerate(items):
            sims = feats.S[row]
            best = int(probs[row].argmax())
            l1 = self.level1_codes[best]
            l2 = l3 = None
            kids = [t.code for t in self.taxonomy.children(l1) if t.code in self._subtree]
            if kids:
                score = self._scores(sims, kids, 2) / L2_PROTO_TEMPERATURE
                if level2 is not None:
                    lp = level2[1][row]
                    score = score + l2_weight * np.array(
                        [lp[l2_index[c]] if c in l2_index else L2_UNSEEN_LOGPROB for c in kids]
                    )
                l2 = kids[int(score.argmax())]
                kids = [t.code for t in self.taxonomy.children(l2) if t.code in self._subtree]
                if kids:
                    l3 = kids[int(self._scores(sims, kids, 3).argmax())]
            out.append(
                Classification(
                    theme_l1=l1,
                    theme_l2=l2,
                    theme_l3=l3,
                    most_specific=l3 or l2 or l1,
                    summary=extractive_summary(
                        feats.layouts[row].candidates, feats.vectors, normalize_ws(item.title)
                    ),
                    confidence=round(float(probs[row, best]), 4),
                    classifier=NAME,
                    classifier_version=self.version,
                    enriched_at=enriched_at,
                    usage=None,
                )
            )
        return out

    def level1_scores(self, items: Sequence[ArticleText]) -> tuple[list[str], np.ndarray]:
        """(level-1 codes, prototype scores matrix) — for diagnostics."""
        return list(self.level1_codes), self.features(items).proto
