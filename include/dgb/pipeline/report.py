"""What a stage run reports: its :class:`StageReport`, :class:`StageRetry` when transient failures
remain, and the one JSON log line per article (:func:`log_outcome`)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from dgb.pipeline.messages import Work

log = logging.getLogger("dgb.pipeline")


@dataclass
class StageReport:
    stage: str
    messages: int = 0
    swept: int = 0
    processed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    dead_lettered: list[tuple[str, str]] = field(default_factory=list)
    retry: list[tuple[str, str]] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)  # left pending: deadline or open breaker
    parked: list[tuple[str, str]] = field(default_factory=list)  # parked by this run
    chunks: int = 0
    bisections: int = 0
    breakers_open: list[str] = field(default_factory=list)
    deadline_hit: bool = False
    seconds: float = 0.0
    sweeps: int = 0  # further sweeps after the run's own work (see keep_sweeping)

    def absorb(self, other: StageReport) -> None:
        """Add ``other``'s outcome (a later sweep of the same run) to this report."""
        self.messages += other.messages
        self.swept += other.swept
        for name in ("processed", "skipped", "dead_lettered", "retry", "deferred", "parked"):
            getattr(self, name).extend(getattr(other, name))
        self.chunks += other.chunks
        self.bisections += other.bisections
        self.breakers_open = list(other.breakers_open) or self.breakers_open
        self.deadline_hit = self.deadline_hit or other.deadline_hit

    def summary(self) -> dict:
        return {
            "stage": self.stage,
            "messages": self.messages,
            "swept": self.swept,
            "processed": len(self.processed),
            "skipped": len(self.skipped),
            "dead_lettered": len(self.dead_lettered),
            "retry": len(self.retry),
            "deferred": len(self.deferred),
            "parked": len(self.parked),
            "chunks": self.chunks,
            "bisections": self.bisections,
            "breakers_open": list(self.breakers_open),
            "deadline_hit": self.deadline_hit,
            "sweeps": self.sweeps,
            "seconds": round(self.seconds, 3),
        }


class StageRetry(RuntimeError):
    """Transient failures remain after this attempt; Airflow should retry the task."""


def log_outcome(stage: str, item: Work, outcome: str, detail: str | None = None) -> None:
    """One JSON line per article and outcome (unique_id, trace_id, stage), so one article can be
    followed across DAGs."""
    entry = {"stage": stage, "unique_id": item.unique_id, "trace_id": item.trace_id, "outcome": outcome}
    if detail:
        entry["detail"] = detail[:300]
    log.info(json.dumps(entry, ensure_ascii=False))
