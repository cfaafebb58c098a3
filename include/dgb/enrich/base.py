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

No Airflow import here: the DAG, the CLI (``dgb classify``) and the tests share this code path.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol, Sequence, runtime_checkable

BACKENDS = ("local", "bedrock", "hybrid")


@dataclass
class ArticleText:
    """The parts of an article a classifier reads."""

    unique_id: str | None
    title: str
    subtitle: str | None = None
    editorial_lead: str | None = None
    content: str = ""
    agency: str | None = None  # the publishing agency's key (news.agency_key): a prior, never a rule

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> "ArticleText":
        return cls(
            unique_id=data.get("unique_id"),
            title=data.get("title") or "",
            subtitle=data.get("subtitle"),
            editorial_lead=data.get("editorial_lead"),
            content=data.get("content") or "",
            agency=data.get("agency") or data.get("agency_key"),
        )

    def is_empty(self) -> bool:
        return not any(
            (part or "").strip() for part in (self.title, self.subtitle, self.editorial_lead, self.content)
        )


@dataclass
class Classification:
    """One article's themes (codes; a deeper level is ``None`` when not decided) and summary."""

    theme_l1: str
    theme_l2: str | None
    theme_l3: str | None
    most_specific: str
    summary: str | None
    confidence: float | None
    classifier: str          # "local" | "bedrock"
    classifier_version: str  # e.g. "local-emb-1 (extractive summary; use-multilingual-v3)"
    enriched_at: datetime
    usage: dict | None = None  # bedrock: tokens, calls, throttles (see dgb.enrich.bedrock)

    ok = True

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["enriched_at"] = self.enriched_at.isoformat()
        return out


@dataclass
class ClassificationFailure:
    """One article could not be classified. ``retryable`` says whether trying again later may
    succeed (throttling, timeouts) or the article should be dead-lettered (invalid output)."""

    reason: str
    detail: str
    retryable: bool
    usage: dict | None = field(default=None)

    ok = False


ClassificationResult = Classification | ClassificationFailure


@runtime_checkable
class Classifier(Protocol):
    name: str
    version: str

    def classify_batch(self, items: list[ArticleText]) -> list[ClassificationResult]:
        """One result per item, in order; never raises for a problem with a single item."""
        ...


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def get_classifier(settings=None, embedder=None, *, backend: str | None = None,
                   taxonomy=None) -> Classifier:
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


def classify_all(classifier: Classifier, items: Sequence[ArticleText],
                 batch_size: int = 64) -> list[ClassificationResult]:
    """``classify_batch`` over ``items`` in chunks of ``batch_size``."""
    out: list[ClassificationResult] = []
    items = list(items)
    for start in range(0, len(items), batch_size):
        out.extend(classifier.classify_batch(items[start:start + batch_size]))
    return out
