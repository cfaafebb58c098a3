"""What a classifier reads and returns: :class:`ArticleText`, :class:`Classification` /
:class:`ClassificationFailure`, and the :class:`Classifier` protocol both backends implement.

Its own module so the backends (:mod:`dgb.enrich.local`, :mod:`dgb.enrich.bedrock`) and the
factory that picks one (:func:`dgb.enrich.base.get_classifier`) never import each other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from dgb.embed.contract import TEXT_CAP, TITLE_CAP, model_text


@dataclass
class ArticleText:
    """The parts of an article a classifier reads, bounded on construction by the text budget
    (:mod:`dgb.embed.contract`): the title at most ``TITLE_CAP`` characters, each other part at
    most ``TEXT_CAP``, NUL and lone surrogates removed. So whatever the page held (a 1 MB title,
    2 MB of unpunctuated text), no classifier (local model or Bedrock) reads more than that,
    and a text its tokenizer cannot encode never reaches it."""

    unique_id: str | None
    title: str
    subtitle: str | None = None
    editorial_lead: str | None = None
    content: str = ""
    agency: str | None = None  # the publishing agency's key (news.agency_key): a prior, never a rule

    def __post_init__(self) -> None:
        self.title = model_text(self.title, TITLE_CAP)
        self.content = model_text(self.content, TEXT_CAP)
        if self.subtitle is not None:
            self.subtitle = model_text(self.subtitle, TEXT_CAP)
        if self.editorial_lead is not None:
            self.editorial_lead = model_text(self.editorial_lead, TEXT_CAP)

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
    classifier_version: str  # e.g. "local-emb-8 (head; extractive summary; use-multilingual-v3)"
    enriched_at: datetime
    usage: dict | None = None  # bedrock (and hybrid): tokens, calls, throttles (see dgb.enrich.bedrock)
    # the article's sentiment when the classifier answers it (Bedrock's combined call):
    # {"label": "positive" | "neutral" | "negative", "score": -1..1}; None otherwise
    sentiment: dict | None = None

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
