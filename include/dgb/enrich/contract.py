"""What a classifier reads and returns: :class:`ArticleText`, :class:`Classification` /
:class:`ClassificationFailure`, and the :class:`Classifier` protocol both backends implement.

Its own module so the backends (:mod:`dgb.enrich.local`, :mod:`dgb.enrich.bedrock`) and the
factory that picks one (:func:`dgb.enrich.base.get_classifier`) never import each other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable


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
    def from_mapping(cls, data: dict[str, Any]) -> ArticleText:
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
    classifier: str  # "local" | "bedrock" (hybrid mode: whichever answered)
    classifier_version: str  # e.g. "local-emb-2 (head; extractive summary; use-multilingual-v3)"
    enriched_at: datetime
    usage: dict | None = None  # bedrock (and hybrid): tokens, calls, throttles (see dgb.enrich.bedrock)

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
    return datetime.now(UTC)
