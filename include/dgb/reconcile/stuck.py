"""Finding what is stuck: articles pending in a stage beyond a threshold, unsent outbox rows.

An article is stuck in a stage when the stage's definition (:mod:`dgb.pipeline.definitions`)
says it is pending there - the same rule as the stage's own sweep and ``dgb status``, so a vector
from an older embedding model counts as pending embed - and its ``since`` column is older than
the stage's threshold (:class:`Thresholds`). An article counts once, in its earliest gap. Unsent
outbox rows count when old, or after many failed publishes. An article whose next event still
waits in the outbox is not re-sent (the outbox row is reported instead); a row in the terminal
failed state does not wait (it is counted as ``outbox_failed``), so its article is re-sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from dgb import topology
from dgb.config import reconcile as config
from dgb.pipeline.definitions import DEFINITIONS, params

GAPS = tuple(DEFINITIONS)  # enrich, embed, index
GAP_TOPIC = {name: d.start_topic for name, d in DEFINITIONS.items()}  # the event that starts a gap's stage
# the sweep's window ("changed recently"): an unenriched article by when it was scraped, others by
# their last change
WINDOW_COLUMN = {"enrich": "scraped_at", "embed": "updated_at", "index": "updated_at"}


# --------------------------------------------------------------------------- thresholds


@dataclass(frozen=True)
class Thresholds:
    """When an article counts as stuck, and how hard reconciliation tries.

    Environment (defaults): ``DGB_RECONCILE_STUCK_MINUTES`` (10) for every stage gap,
    ``DGB_RECONCILE_OUTBOX_MINUTES`` (5) and ``DGB_RECONCILE_OUTBOX_ATTEMPTS`` (5) for unsent
    outbox rows, ``DGB_RECONCILE_MAX_ATTEMPTS`` (5) re-sends per article before it is flagged,
    ``DGB_RECONCILE_SWEEP_WINDOW_HOURS`` (48) the sweep's window.
    """

    enrich_s: float = 600.0
    embed_s: float = 600.0
    index_s: float = 600.0
    outbox_s: float = 300.0
    outbox_attempts: int = 5
    max_attempts: int = 5
    retry_after_s: float | None = None  # between two re-sends of one article; None = its gap's threshold
    window_s: float | None = None  # only articles changed within this window (the sweep); None = all
    limit: int = 5000  # rows per kind and run

    @classmethod
    def from_env(cls, *, window: bool = False, **overrides: Any) -> Thresholds:
        stuck = config.stuck_minutes() * 60
        values: dict[str, Any] = {
            "enrich_s": stuck,
            "embed_s": stuck,
            "index_s": stuck,
            "outbox_s": config.outbox_minutes() * 60,
            "outbox_attempts": config.outbox_attempts(),
            "max_attempts": config.max_attempts(),
            "window_s": config.sweep_window_hours() * 3600 if window else None,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def with_age(self, seconds: float) -> Thresholds:
        """The same, with one age threshold for every stage gap and the outbox."""
        return replace(self, enrich_s=seconds, embed_s=seconds, index_s=seconds, outbox_s=seconds)

    def age(self, gap: str) -> float:
        return {"enrich": self.enrich_s, "embed": self.embed_s, "index": self.index_s}[gap]

    def retry_after(self, gap: str) -> float:
        return self.age(gap) if self.retry_after_s is None else self.retry_after_s


# --------------------------------------------------------------------------- finding


@dataclass
class Stuck:
    unique_id: str
    gap: str  # enrich | embed | index
    since: datetime  # the stage timestamp older than the threshold
    attempts: int = 0  # reconcile re-sends so far
    reconciled_at: datetime | None = None
    problem: str | None = None


@dataclass
class Found:
    enrich: list[Stuck] = field(default_factory=list)
    embed: list[Stuck] = field(default_factory=list)
    index: list[Stuck] = field(default_factory=list)
    outbox: list[dict] = field(default_factory=list)  # unsent rows (id, topic, aggregate_id, ...)
    outbox_failed: int = 0  # rows in the terminal failed state (Pub/Sub refused them for good)
    flagged: list[str] = field(default_factory=list)  # stuck, but already past max_attempts

    def articles(self) -> list[Stuck]:
        return self.enrich + self.embed + self.index

    def counts(self) -> dict[str, int]:
        return {
            "enrich": len(self.enrich),
            "embed": len(self.embed),
            "index": len(self.index),
            "outbox": len(self.outbox),
            "outbox_failed": self.outbox_failed,
            "flagged": len(self.flagged),
        }


_OUTBOX_PENDING = (
    "NOT EXISTS (SELECT 1 FROM outbox o WHERE o.aggregate_id = n.unique_id"
    " AND o.published_at IS NULL AND o.failed_at IS NULL AND o.topic = ANY(%(topics)s))"
)


def find_stuck(
    conn, now: datetime | None = None, thresholds: Thresholds | None = None, *, model: str | None = None
) -> Found:
    """Every article pending in a stage (its definition's rule) for longer than the stage's
    threshold, and every unsent outbox row past its threshold. ``model``: the current embedding
    model (``None`` = any model counts as embedded). An article whose next event still waits in
    the outbox is not re-sent (the outbox row is reported instead)."""
    now = now or datetime.now(UTC)
    t = thresholds or Thresholds.from_env()
    args: dict[str, Any] = {
        **params(model),
        "outbox_cut": now - timedelta(seconds=t.outbox_s),
        "window_start": now - timedelta(seconds=t.window_s or 0),
        "limit": t.limit,
        "max": t.max_attempts,
        "topics": list(topology.TOPICS),
        "attempts": t.outbox_attempts,
    }
    found = Found()
    seen: set[str] = set()
    flagged: set[str] = set()
    with conn.cursor() as cur:
        for gap in GAPS:  # pipeline order: an article counts in its earliest gap
            d = DEFINITIONS[gap]
            window = f" AND {WINDOW_COLUMN[gap]} >= %(window_start)s" if t.window_s else ""
            cur.execute(
                f"SELECT unique_id, {d.since}, reconcile_attempts, reconciled_at, problem FROM news n"
                f" WHERE {d.pending} AND {d.since} < %(cut)s{window} AND {_OUTBOX_PENDING}"
                f" ORDER BY {d.since} LIMIT %(limit)s",
                {**args, "cut": now - timedelta(seconds=t.age(gap))},
            )
            for uid, since, attempts, reconciled_at, problem in cur.fetchall():
                if uid in seen:  # counted in an earlier gap already
                    continue
                seen.add(uid)
                if attempts > t.max_attempts:  # flagged by an earlier run: the operator's now
                    flagged.add(uid)
                    continue
                getattr(found, gap).append(Stuck(uid, gap, since, attempts, reconciled_at, problem))
        cur.execute(
            "SELECT id, topic, aggregate_id, created_at, available_at, attempts, last_error FROM outbox"
            " WHERE published_at IS NULL AND failed_at IS NULL"
            " AND (created_at < %(outbox_cut)s OR attempts >= %(attempts)s)"
            " ORDER BY created_at LIMIT %(limit)s",
            args,
        )
        names = [d.name for d in cur.description]
        found.outbox = [dict(zip(names, r)) for r in cur.fetchall()]
        cur.execute("SELECT count(*) FROM outbox WHERE failed_at IS NOT NULL")
        found.outbox_failed = cur.fetchone()[0]
    conn.commit()
    found.flagged = sorted(flagged)
    return found
