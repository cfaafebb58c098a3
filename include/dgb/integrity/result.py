"""What one integrity check found: its outcome and everything recorded (:class:`CheckResult`).

Built by :func:`dgb.integrity.recording.record`, returned by
:func:`dgb.integrity.article_check.check_article`, counted by the runs (:mod:`dgb.integrity.runs`)
and the report (:mod:`dgb.integrity.report`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dgb.integrity.checks import ContentResult, ImageResult
from dgb.integrity.evidence import BreakerChange, Evidence

OUTCOMES = ("unchanged", "modified", "moved", "suspect_removed", "removed", "image_broken", "error")


@dataclass
class CheckResult:
    unique_id: str
    news_id: int
    agency_key: str
    tier: str
    outcome: str
    content: ContentResult
    image: ImageResult | None
    # flag changes made: suspect_removed, removed, restored, moved, image_broken, image_ok
    flags: list[str] = field(default_factory=list)
    history_rows: int = 0
    event_enqueued: bool = False
    next_due_at: datetime | None = None
    consecutive_failures: int = 0
    bytes_fetched: int = 0
    duration_ms: int = 0
    error: str | None = None
    evidence: Evidence | None = None  # the gone streak, after a 404/410
    paused_by: tuple[str, ...] = ()  # tripped breakers ("agency:mec", "host:...")
    breaker_changes: list[BreakerChange] = field(default_factory=list)
    moved_from: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "unique_id": self.unique_id,
            "agency_key": self.agency_key,
            "tier": self.tier,
            "outcome": self.outcome,
            "content": self.content.as_dict(),
            "image": self.image.as_dict() if self.image else None,
            "flags": list(self.flags),
            "history_rows": self.history_rows,
            "event_enqueued": self.event_enqueued,
            "next_due_at": self.next_due_at.isoformat() if self.next_due_at else None,
            "consecutive_failures": self.consecutive_failures,
            "bytes_fetched": self.bytes_fetched,
            "duration_ms": self.duration_ms,
            "error": self.error,
            "evidence": None
            if self.evidence is None
            else {
                "since": self.evidence.since.isoformat(),
                "checks": self.evidence.checks,
                "confirmed": self.evidence.confirmed,
                "confirm_after": self.evidence.confirm_after.isoformat(),
            },
            "paused_by": list(self.paused_by),
            "breaker_changes": [c.as_dict() for c in self.breaker_changes],
            "moved_from": self.moved_from,
        }
