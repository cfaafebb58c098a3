"""The stage contract: a :class:`Stage` is its definition (:mod:`dgb.pipeline.definitions`: ready,
done and pending rules, sweep order, topics) plus what to load, how to process and how to persist;
its :meth:`~Stage.process` answers a result or a :class:`Failure` per article.
:mod:`dgb.pipeline.runner` runs it; :mod:`dgb.pipeline.stages` holds the stages.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from dgb.pipeline import definitions
from dgb.pipeline.definitions import StageDefinition
from dgb.pipeline.resilience import PERMANENT, TRANSIENT

DONE, READY = "stage_done", "stage_ready"  # the definition's rules, evaluated per loaded row


@dataclass
class Failure:
    """A per-article processing failure.

    ``kind`` (:mod:`dgb.pipeline.resilience`): ``transient`` (a dependency failed: retried later,
    never dead-lettered), ``permanent`` (this article: held and dead-lettered) or ``unknown``
    (permanent only when isolated). Left empty it follows ``retryable``: retryable failures are
    transient, the others permanent. ``dependency`` names what failed (for its circuit breaker)."""

    reason: str
    detail: str = ""
    retryable: bool = True
    kind: str = ""
    dependency: str | None = None

    def __post_init__(self) -> None:
        if not self.kind:
            self.kind = TRANSIENT if self.retryable else PERMANENT


class Stage(ABC):
    """A pipeline stage: its :class:`~dgb.pipeline.definitions.StageDefinition` (ready, done and
    pending rules, sweep order, topics) plus what to load, how to process and how to persist."""

    definition: StageDefinition
    # copied from ``definition`` for each subclass (see __init_subclass__)
    name: str = ""
    subscriptions: tuple[str, ...] = ()
    next_topic: str | None = None
    sweep_order: str = "scraped_at"
    columns: tuple[str, ...] = ("unique_id", "version", "trace_id", "title")
    model: str | None = None  # the current embedding model (the current-model rule)
    # the dependencies process() calls, each with its circuit breaker (dgb.pipeline.resilience);
    # the first is the one a failure that names none is charged to
    dependencies: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        d = cls.__dict__.get("definition")
        if d is not None:
            cls.name, cls.subscriptions, cls.next_topic, cls.sweep_order = (
                d.name,
                d.subscriptions,
                d.next_topic,
                d.since,
            )

    def pending_condition(self) -> str:
        """SQL boolean over ``news`` selecting rows this stage still has to process (named
        parameter ``model``: pass :meth:`params`)."""
        return self.definition.pending

    def params(self) -> dict:
        return definitions.params(self.model)

    def is_done(self, row: dict) -> bool:
        """Idempotency: True when the row needs nothing from this stage (the definition's
        ``done`` rule, evaluated by PostgreSQL when the row was loaded)."""
        return bool(row[DONE])

    def ready(self, row: dict) -> bool:
        """False when the row is not ready for this stage yet (e.g. not enriched): skip quietly."""
        return bool(row[READY])

    @classmethod
    @abstractmethod
    def from_settings(cls, conn, s, deps) -> Stage:
        """Build the stage from settings ``s`` and ``deps`` (dgb.pipeline.stages.Dependencies)."""

    @abstractmethod
    def process(self, rows: list[dict]) -> dict[str, Any]:
        """Process rows -> {unique_id: result | Failure}. May raise on whole-batch failure."""

    def persist(self, cur, row: dict, result: Any) -> dict | None:
        """Write ``result`` for ``row`` (guarded by its version); return the next event's payload
        or None. Return None too when nothing was written (row changed meanwhile)."""
        return None

    def healthy(self, dependency: str) -> bool | None:
        """A cheap health check of ``dependency`` (an HTTP /health, never real work): True or
        False, or None when this stage has none for it. An open breaker whose dependencies all
        answer healthy sends its one probe at once instead of waiting out its cooldown, so a
        stage resumes within a run of the dependency coming back (see :mod:`dgb.pipeline.runner`)."""
        return None

    def persist_chunk(self, cur, rows: list[dict]) -> None:
        """Write, in the chunk's transaction, what goes with ``rows`` besides :meth:`persist`'s
        own write: the rows :meth:`persist` wrote in this transaction (a few statements for all
        of them instead of several per row). Called once after the chunk's rows; in the
        row-by-row redo of a refused chunk, after each row inside its savepoint with that row
        alone, so a refusal still names its row."""
        return None

    def record_chunk(self, cur) -> None:
        """Write what the chunk's :meth:`process` calls cost (the LLM token ledger), inside the
        chunk's transaction, so paid work and its bill commit together. Called again if the
        transaction is retried; :meth:`chunk_committed` follows the commit."""
        return None

    def chunk_committed(self) -> None:
        """The chunk's transaction committed: forget what :meth:`record_chunk` wrote."""
        return None

    def prefetch(self, rows: list[dict]) -> None:
        """The runner is about to process a chunk and ``rows`` are the next one: a stage whose
        :meth:`process` begins with a free, side-effect-free model call may start that call now,
        in the background (:class:`dgb.pipeline.prefetch.Ahead`: sent at once, it waits at the model
        service behind the current chunk's call), so the model works while the chunk's own work
        and commit run;
        :meth:`process` then takes the answer when it gets exactly these rows (else it calls the
        model itself). The default does nothing. Never for paid calls: the next chunk may not run
        (deadline, open breaker)."""
        return None

    def drop_prefetched(self) -> None:
        """A stage run starts: forget the calls :meth:`prefetch` started in an earlier run (one that
        stopped at its deadline or an open breaker leaves some). The default has none."""
        return None

    def start_run(self) -> None:
        """Once per stage run, before its first :func:`~dgb.pipeline.runner.run_stage` (the operator
        calls it; the further sweeps of :func:`~dgb.pipeline.runner.keep_sweeping` do not): a place
        for a check too costly for every sweep. Must not raise."""
        return None
