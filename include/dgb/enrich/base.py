"""The enrichment interface: classify articles into the 3-level theme taxonomy + a short summary.

Three backends implement :class:`Classifier` and are chosen by ``DGB_CLASSIFIER``
(:attr:`dgb.config.Settings.classifier_backend`):

* ``local`` (default, offline): :class:`dgb.enrich.local.LocalClassifier`, sentence embeddings
  scored by a small head trained on real labelled news plus similarity to the taxonomy; its
  ``confidence`` is calibrated on real news; its summary is EXTRACTIVE (sentences copied from
  the article, never generated text);
* ``bedrock`` (production): :class:`dgb.enrich.bedrock.BedrockClassifier`, Claude on Amazon
  Bedrock through the Converse API; its summary is written by the model;
* ``hybrid``: :class:`dgb.enrich.hybrid.HybridClassifier`, local first and Bedrock for the
  articles whose local confidence is below ``DGB_HYBRID_THRESHOLD``.

``classify_batch`` never raises for a problem with one article: it returns a
:class:`ClassificationFailure` in that article's slot, so the pipeline can dead-letter that
article and keep the rest of the batch. It does raise for problems that concern every article
(no model, bad credentials): failing the task is the right answer then.

The types every backend shares (:class:`ArticleText`, :class:`Classification`,
:class:`ClassificationFailure`, :class:`Classifier`) live in :mod:`dgb.enrich.contract` and are
re-exported here: this module picks a backend (:func:`get_classifier`), so it imports the backends,
and the backends import only the contract.

No Airflow import here: the DAG, the CLI (``dgb classify``) and the tests share this code path.
"""

from __future__ import annotations

from collections.abc import Sequence

from dgb.enrich.contract import (
    ArticleText,
    Classification,
    ClassificationFailure,
    ClassificationResult,
    Classifier,
    now_utc,
)

# The contract's names stay importable from here (dgb.enrich.base is where callers look for them).
__all__ = [
    "BACKENDS",
    "ArticleText",
    "Classification",
    "ClassificationFailure",
    "ClassificationResult",
    "Classifier",
    "classify_all",
    "get_classifier",
    "now_utc",
]

BACKENDS = ("local", "bedrock", "hybrid")


def get_classifier(settings=None, embedder=None, *, backend: str | None = None, taxonomy=None) -> Classifier:
    """The configured classifier (``settings.classifier_backend`` unless ``backend`` is given).

    ``embedder`` (any :class:`dgb.embed.Embedder`) is used by the local and hybrid backends; when omitted it
    comes from :func:`dgb.embed.get_embedder` (the model service if it answers, else in-process).
    """
    from dgb.config import settings as current_settings

    settings = settings or current_settings()
    backend = backend or settings.classifier_backend
    if backend not in BACKENDS:
        raise ValueError(f"classifier backend must be one of {BACKENDS}, got {backend!r}")
    if taxonomy is None:
        from dgb.taxonomy import load_taxonomy

        taxonomy = load_taxonomy()
    if backend in ("local", "hybrid"):
        from dgb.enrich.local import LocalClassifier

        if embedder is None:
            from dgb.embed import get_embedder

            embedder = get_embedder(settings)
        local = LocalClassifier(embedder, taxonomy, cache_dir=settings.state_dir / "cache")
        if backend == "local":
            return local
    from dgb.enrich.bedrock import BedrockClassifier

    if backend == "bedrock":
        return BedrockClassifier(taxonomy)
    from dgb.enrich.hybrid import HybridClassifier

    return HybridClassifier(local, BedrockClassifier(taxonomy), settings.hybrid_threshold)


def classify_all(
    classifier: Classifier, items: Sequence[ArticleText], batch_size: int = 64
) -> list[ClassificationResult]:
    """``classify_batch`` over ``items`` in chunks of ``batch_size``."""
    out: list[ClassificationResult] = []
    items = list(items)
    for start in range(0, len(items), batch_size):
        out.extend(classifier.classify_batch(items[start : start + batch_size]))
    return out
