"""What a stage run reports: its :class:`StageReport`, :class:`StageRetry` when transient failures
remain, and the JSON log lines that let one article be followed across DAGs: one line per chunk for
the common outcomes (:func:`log_outcomes`: processed, skipped), one per article for the rare ones
that carry a reason (:func:`log_outcome`: retry, parked, dead-lettered)."""

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
    """One JSON line for one article's outcome (unique_id, trace_id, stage, detail), so one article
    can be followed across DAGs."""
    entry = {"stage": stage, "unique_id": item.unique_id, "trace_id": item.trace_id, "outcome": outcome}
    if detail:
        entry["detail"] = detail[:300]
    log.info(json.dumps(entry, ensure_ascii=False))


def log_outcomes(stage: str, items: list[Work], outcome: str) -> None:
    """One JSON line for the same outcome of many articles (a chunk's): ``unique_ids`` and
    ``trace_ids`` in the same order, so a search of the task logs for an article's id or trace id
    finds it. A line per article would cost more than the work in a backlog: every log line goes
    through Airflow's task-log supervisor (structlog rendering, secrets masking)."""
    if not items:
        return
    entry = {
        "stage": stage,
        "outcome": outcome,
        "count": len(items),
        "unique_ids": [w.unique_id for w in items],
        "trace_ids": [w.trace_id for w in items],
    }
    log.info(json.dumps(entry, ensure_ascii=False))
