"""The trained head of the offline classifier: its level-1 decision (and level-2 part) learned from
real labelled gov.br news, saved as ``data/classifier/head.npz``.

The :class:`Head` (written by ``scripts/train_classifier.py`` from
``../shared/data/classifier-dev`` + our corpus, ``--archive``: plus an operator's own
production-labelled articles) is a logistic regression over the three vectors of
:class:`~dgb.enrich.features.Features`, an agency prior (when the article's agency is known), the
prototype scores, and the log-probabilities of its lexical part (:class:`~dgb.enrich.lexical.Lexical`);
the prototype term carries the themes with little training data. Its probabilities are
calibrated: temperatures fitted on out-of-fold predictions of real news, one for whole articles
and one for short texts (among articles at confidence ~0.8, ~80% agree with production's label).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dgb.enrich.calibration import factors
from dgb.enrich.lexical import Lexical
from dgb.enrich.softmax import log_softmax

L2_UNSEEN_LOGPROB = float(np.log(1e-3))
HEAD_FILE = Path(__file__).resolve().parents[1] / "data" / "classifier" / "head.npz"


@dataclass(frozen=True)
class Head:
    """The level-1 decision trained on real labelled news (``scripts/train_classifier.py``).

    logits = ``X @ W.T + b + Wa[:, agency] + alpha * proto / proto_temperature``, plus
    ``short_bias`` for an input of at most ``short_chars`` characters of content (the training
    mix's class prior taken out, :func:`dgb.enrich.calibration.prior_bias`); probabilities
    = softmax of ``scale * logits``, ``short_scale`` instead for such a short input (both
    fitted on out-of-fold predictions: the calibration, :mod:`dgb.enrich.calibration`).
    ``codes`` are the level-1 codes of the rows of ``W``; ``agencies`` the agency keys of the
    columns of ``Wa`` (the agency prior; an unknown or missing agency adds nothing).
    ``embedder`` / ``dim``: the model the head was trained with; with any other embedder the
    vectors mean something else and the head is not used.

    The optional level-2 part (``l2_codes``, ``W2``, ``b2``; trained on production's level-2
    labels of real news) adds ``l2_weight`` x its log-probability to each level-2 candidate's
    prototype score (divided by :data:`dgb.enrich.local.L2_PROTO_TEMPERATURE`); a level-2 code it
    never saw gets the log-probability :data:`L2_UNSEEN_LOGPROB`.
    """

    codes: tuple[str, ...]
    W: np.ndarray
    b: np.ndarray
    alpha: float
    proto_temperature: float
    scale: float
    embedder: str
    dim: int
    meta: dict
    agencies: tuple[str, ...] = ()
    Wa: np.ndarray | None = None
    l2_codes: tuple[str, ...] = ()
    W2: np.ndarray | None = None
    b2: np.ndarray | None = None
    l2_weight: float = 1.0
    lexical: Lexical | None = None
    lex_weight: float = 1.0
    short_scale: float | None = None  # None: ``scale`` for every input (a head before local-emb-7)
    short_chars: int = 0
    short_bias: np.ndarray | None = None  # added to a short input's logits (None: before local-emb-8)

    def scales(self, content_chars: Sequence[int]) -> np.ndarray:
        """(n, 1) calibration factors: ``short_scale`` for an input whose content has at most
        ``short_chars`` characters, ``scale`` for the others (:mod:`dgb.enrich.calibration`)."""
        return factors(content_chars, self.scale, self.short_scale, self.short_chars)

    def level2_logprobs(self, X: np.ndarray) -> np.ndarray | None:
        """(n, len(l2_codes)) log-probabilities of the level-2 part (None when it has none)."""
        if not self.l2_codes or self.W2 is None:
            return None
        return log_softmax(X @ self.W2.T + self.b2)

    def logits(
        self,
        X: np.ndarray,
        proto: np.ndarray,
        agencies: Sequence[str | None] = (),
        texts: Sequence[str] = (),
        content_chars: Sequence[int] = (),
    ) -> np.ndarray:
        """(n, codes) logits; ``agencies``: each row's agency key (or None), or empty for none;
        ``texts``: each row's :func:`lexical_text`, for the lexical part (empty: none);
        ``content_chars``: each row's content length, for ``short_bias`` (empty: every row whole)."""
        z = X @ self.W.T + self.b + self.alpha * proto / self.proto_temperature
        if self.short_bias is not None and len(content_chars):
            short = np.asarray(content_chars, dtype=np.int64) <= self.short_chars
            z = z + short[:, None] * self.short_bias
        if self.lexical is not None and len(texts):
            z = z + self.lex_weight * self.lexical.logprobs(texts)
        if self.agencies and self.Wa is not None and len(agencies):
            index = {a: i for i, a in enumerate(self.agencies)}
            for n, agency in enumerate(agencies):
                i = index.get(agency_key(agency))
                if i is not None:
                    z[n] += self.Wa[:, i]
        return z

    def save(self, path: Path) -> None:
        """Write the head as one compressed ``.npz`` (the weight matrices as float16: half the
        size, and the decisions do not change at that precision)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            np.savez_compressed(
                fh,
                codes=np.array(self.codes),
                W=self.W.astype(np.float16),
                b=self.b.astype(np.float32),
                params=np.array([self.alpha, self.proto_temperature, self.scale], dtype=np.float64),
                agencies=np.array(self.agencies, dtype=str),
                Wa=(self.Wa if self.Wa is not None else np.zeros((len(self.codes), 0))).astype(np.float32),
                l2_codes=np.array(self.l2_codes, dtype=str),
                W2=(self.W2 if self.W2 is not None else np.zeros((0, self.W.shape[1]))).astype(np.float16),
                b2=(self.b2 if self.b2 is not None else np.zeros(0)).astype(np.float32),
                l2_weight=np.array(self.l2_weight),
                lex_terms=np.array(self.lexical.terms if self.lexical else (), dtype=str),
                lex_idf=(self.lexical.idf if self.lexical else np.zeros(0)).astype(np.float32),
                lex_W=(self.lexical.W if self.lexical else np.zeros((len(self.codes), 0))).astype(np.float16),
                lex_b=(self.lexical.b if self.lexical else np.zeros(len(self.codes))).astype(np.float32),
                lex_weight=np.array(self.lex_weight),
                short=np.array(
                    [self.short_scale if self.short_scale is not None else np.nan, self.short_chars],
                    dtype=np.float64,
                ),
                short_bias=(self.short_bias if self.short_bias is not None else np.zeros(0)).astype(
                    np.float32
                ),
                embedder=np.array(self.embedder),
                dim=np.array(self.dim),
                meta=np.array(json.dumps(self.meta, ensure_ascii=False, sort_keys=True)),
            )
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> Head:
        """The head written by :meth:`save`; ValueError when its arrays do not fit together."""
        with np.load(Path(path), allow_pickle=False) as z:
            alpha, proto_temperature, scale = (float(v) for v in z["params"])
            short_scale, short_chars = None, 0
            if "short" in z.files and not np.isnan(z["short"][0]):
                short_scale, short_chars = float(z["short"][0]), int(z["short"][1])
            lexical = None
            if "lex_terms" in z.files and len(z["lex_terms"]):
                lexical = Lexical(
                    tuple(str(t) for t in z["lex_terms"]),
                    z["lex_idf"].astype(np.float32),
                    z["lex_W"].astype(np.float32),
                    z["lex_b"].astype(np.float32),
                )
            head = cls(
                codes=tuple(str(c) for c in z["codes"]),
                W=z["W"].astype(np.float32),
                b=z["b"].astype(np.float32),
                alpha=alpha,
                proto_temperature=proto_temperature,
                scale=scale,
                embedder=str(z["embedder"]),
                dim=int(z["dim"]),
                meta=json.loads(str(z["meta"])),
                agencies=tuple(str(a) for a in z["agencies"]),
                Wa=z["Wa"].astype(np.float32),
                l2_codes=tuple(str(c) for c in z["l2_codes"]),
                W2=z["W2"].astype(np.float32),
                b2=z["b2"].astype(np.float32),
                l2_weight=float(z["l2_weight"]),
                lexical=lexical,
                lex_weight=float(z["lex_weight"]) if "lex_weight" in z.files else 1.0,
                short_scale=short_scale,
                short_chars=short_chars,
                short_bias=(
                    z["short_bias"].astype(np.float32)
                    if "short_bias" in z.files and len(z["short_bias"])
                    else None
                ),
            )
        if head.short_bias is not None and head.short_bias.shape != (len(head.codes),):
            raise ValueError(
                f"{path}: short_bias shape {head.short_bias.shape} does not match {len(head.codes)} codes"
            )
        if head.W2.shape != (len(head.l2_codes), head.W.shape[1]) or head.b2.shape != (len(head.l2_codes),):
            raise ValueError(
                f"{path}: level-2 shapes W2{head.W2.shape} b2{head.b2.shape} do not match "
                f"{len(head.l2_codes)} codes"
            )
        if head.Wa.shape != (len(head.codes), len(head.agencies)):
            raise ValueError(
                f"{path}: agency prior shape {head.Wa.shape} does not match "
                f"{len(head.codes)} codes x {len(head.agencies)} agencies"
            )
        lex = head.lexical
        if lex is not None and (
            lex.idf.shape != (len(lex.terms),)
            or lex.W.shape != (len(head.codes), len(lex.terms))
            or lex.b.shape != (len(head.codes),)
        ):
            raise ValueError(
                f"{path}: lexical shapes W{lex.W.shape} b{lex.b.shape} idf{lex.idf.shape} do not match "
                f"{len(head.codes)} codes x {len(lex.terms)} terms"
            )
        if head.W.shape != (len(head.codes), 3 * head.dim) or head.b.shape != (len(head.codes),):
            raise ValueError(
                f"{path}: head shapes W{head.W.shape} b{head.b.shape} do not match "
                f"{len(head.codes)} codes x 3 x {head.dim}"
            )
        return head


def agency_key(agency: str | None) -> str:
    """An agency key compared loosely (``" Saude "`` -> ``"saude"``)."""
    return (agency or "").strip().lower()


def load_default_head() -> Head | None:
    """The shipped head (:data:`HEAD_FILE`), or None when it is absent (prototype-only mode)."""
    if not HEAD_FILE.is_file():
        return None
    return Head.load(HEAD_FILE)
