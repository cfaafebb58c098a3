"""The one consume -> process -> publish mechanism shared by the event-driven stages.

What each stage considers ready, done and pending, and its sweep order, is defined once in
:mod:`dgb.pipeline.definitions` (the same rules drive ``dgb status`` and reconciliation).

A stage run gets the messages of every asset event that triggered it (Pub/Sub is the
doorbell) and also takes up, bounded, the work PostgreSQL says is pending for the stage (the
durable queue: an asset event stored without a DAG run, a run that died, a lost message):

1. decode and validate each message (:func:`dgb.events.parse_message`: the typed payload model
   of its topic, ``event_version``, required attributes); invalid ones are dead-lettered, the
   rest of the batch goes on;
2. dedup by ``unique_id`` (within the batch, and against done work: the definition's ``done``
   rule, evaluated by PostgreSQL as the rows are loaded);
3. load the rows; an id that does not exist is dead-lettered (``unknown_id``);
4. process the work in **chunks** (``DGB_STAGE_CHUNK_SIZE``, default 25 articles) while the run's
   deadline allows (``deadline_s``: no new chunk starts when the longest chunk so far would
   overrun it; the rest stays pending for the next run, so no paid work is lost to a timeout);
5. commit each chunk in ONE transaction: each result, the row's ``version`` bump, the next
   stage's event in the outbox (guarded by the version read in step 3: an article edited
   meanwhile is left to its own new event), the chunk's LLM token ledger
   (:meth:`Stage.record_chunk`), the cleared failure flags of the articles that went through,
   and the failures below. ``on_chunk`` runs after each commit (the operator relays the outbox,
   so the next stage starts on the first chunk). **The one exception is the index stage**: its
   writes go to Typesense, which cannot take part in a PostgreSQL transaction, so
   :class:`~dgb.pipeline.stages.IndexStage` writes in step 4 (``dgb.search.sync.sync``
   upserts/deletes the documents, then commits ``indexed_version`` for the rows still at the
   version it read) and has nothing to persist in step 5. A crash between the Typesense write
   and that commit leaves the article pending, and the next run re-upserts the same whole
   document (idempotent); an edit meanwhile is never marked done (the version guard);
6. failures, decided once by :func:`dgb.pipeline.resilience.classify`:

   * a chunk whose ``process`` raises a non-transient error is **bisected** until the bad
     article is alone; only it fails, the rest commit;
   * **transient** (an outage: unavailable, refused, throttled/429, 5xx, timeouts, of the model
     service, Bedrock, Typesense or PostgreSQL): recorded on the row (``attempts``,
     ``last_error``), the work stays pending; the dependency's circuit breaker counts it, and
     while it is open no chunk calls the dependency (the rest is deferred; half-open: a probe of
     one article). The run raises :class:`StageRetry` at the end so Airflow retries with
     backoff, except on the last try, which ends normally (the 1-minute sweep takes the work up):
     **an outage never dead-letters**, on any try;
   * **permanent** (bad input, a 4xx validation error, a refused row): dead-lettered per article
     with its reason, and the article is *held* out of this stage's sweep (``hold_stage``); a
     message or a redrive still brings it back, and after ``DGB_STAGE_MAX_FAILURES`` (default
     3) permanent failures it is *parked* (``parked_at``): only an operator's redrive or a manual
     run takes it up. Held and parked articles are shown by ``dgb status``;
   * a later success clears the flags (hold, parking, ``problem='dead_letter'``, attempts, last
     error) and resolves the article's open dead letters of the stage.

Dead letters land in ``dead_letters`` (operator view) and, through the outbox, on the
subscription's dead-letter topic. Every processed message is logged as one JSON line with
unique_id, trace_id, stage and outcome, so one article can be followed across DAGs.
"""

from __future__ import annotations

import json
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from dgb import events, outbox, topology
from dgb.config import env_number
from dgb.db import lock_articles, transaction
from dgb.pipeline import definitions
from dgb.pipeline.definitions import StageDefinition
from dgb.pipeline.resilience import (
    CONFLICT,
    HALF_OPEN,
    OPEN,
    PERMANENT,
    POSTGRESQL,
    TRANSIENT,
    UNKNOWN,
    UNKNOWN_LIMIT,
    Breakers,
    classify,
)

log = logging.getLogger("dgb.pipeline")

CONFLICT_ATTEMPTS = 3  # a chunk's commit is tried again at once after a deadlock, this many times in all
DONE, READY = "stage_done", "stage_ready"  # the definition's rules, evaluated per loaded row


@dataclass(frozen=True)
class InMessage:
    """One Pub/Sub message as it reached the stage (from an asset event's payload)."""

    subscription: str
    message_id: str
    data: bytes
    attributes: dict[str, str]

    @classmethod
    def from_payload(cls, subscription: str, payload: dict) -> InMessage:
        """From an asset event's payload (the :class:`dgb.events.AssetPayload` contract). A payload
        that breaks the contract still becomes a message, which the run then dead-letters."""
        try:
            asset = events.AssetPayload.model_validate(payload)
        except ValidationError:
            attrs = payload.get("attributes")
            asset = events.AssetPayload(
                message_id=str(payload.get("message_id") or ""),
                data=str(payload.get("data") or ""),
                attributes={str(k): str(v) for k, v in attrs.items()} if isinstance(attrs, dict) else {},
            )
        return cls(subscription, asset.message_id, asset.raw_data(), dict(asset.attributes))


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


@dataclass
class Work:
    unique_id: str
    trace_id: str | None
    subscription: str
    message_ids: list[str] = field(default_factory=list)
    row: dict | None = None
    manual: bool = False  # named by a manual run (takes up a parked article too)


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
        stage resumes within a run of the dependency coming back (see :func:`run_stage`)."""
        return None

    def record_chunk(self, cur) -> None:
        """Write what the chunk's :meth:`process` calls cost (the LLM token ledger), inside the
        chunk's transaction, so paid work and its bill commit together. Called again if the
        transaction is retried; :meth:`chunk_committed` follows the commit."""
        return None

    def chunk_committed(self) -> None:
        """The chunk's transaction committed: forget what :meth:`record_chunk` wrote."""
        return None

    def start_run(self) -> None:
        """Once per stage run, before its first :func:`run_stage` (the operator calls it; the
        further sweeps of :func:`keep_sweeping` do not): a place for a check too costly for every
        sweep. Must not raise."""
        return None


def _all_healthy(stage: Stage, names: list[str]) -> bool:
    """Every dependency in ``names`` answers its health check (a check that raises, or none at
    all, counts as not healthy: the breaker then waits out its cooldown)."""
    for name in names:
        try:
            ok = stage.healthy(name)
        except Exception as exc:
            log.info("%s: health check of %s failed: %s", stage.name, name, exc)
            return False
        if ok is not True:
            return False
        log.info("%s: %s answers healthy while its breaker is open: one probe now", stage.name, name)
    return bool(names)


def topic_of(subscription: str) -> str:
    return topology.subscription(subscription).topic


# ----------------------------------------------------------------------------- running


def run_stage(
    stage: Stage,
    conn,
    messages: Iterable[InMessage],
    *,
    sweep_limit: int = 200,
    final_attempt: bool = False,
    unique_ids: Iterable[str] = (),
    chunk_size: int | None = None,
    deadline_s: float | None = None,
    on_chunk: Callable[[], None] | None = None,
    max_failures: int | None = None,
    quiet: bool = False,
) -> StageReport:
    """Run ``stage`` over ``messages``, the manual ``unique_ids`` and up to ``sweep_limit`` swept
    pending articles, in chunks of ``chunk_size`` (``DGB_STAGE_CHUNK_SIZE``, default 25), each
    committed with its next events and its token ledger; ``on_chunk`` runs after each commit
    (the operator relays the outbox there, so the next stage starts on the first chunk).

    No new chunk starts once ``deadline_s`` (seconds from the start) would be passed: the rest
    stays pending for the next run. Transient failures leave the work pending and raise
    :class:`StageRetry` at the end (unless ``final_attempt``: then the run ends normally, the work
    still pending, and the 1-minute sweep takes it up); they never dead-letter. Permanent ones
    are dead-lettered per article and hold it out of the sweep; ``max_failures``
    (``DGB_STAGE_MAX_FAILURES``, default 3) permanent failures park it. ``quiet``: no log line
    when there was nothing to do (the further sweeps of :func:`keep_sweeping`)."""
    t0 = time.monotonic()
    chunk_size = chunk_size or env_number("DGB_STAGE_CHUNK_SIZE", 25, integer=True, minimum=1)
    max_failures = max_failures or env_number("DGB_STAGE_MAX_FAILURES", 3, integer=True, minimum=1)
    report = StageReport(stage.name)
    work: dict[str, Work] = {}
    dead: list[tuple[Work | None, InMessage | None, str, str]] = []  # (work, msg, reason, detail)
    default_sub = stage.subscriptions[0]

    for msg in messages:
        report.messages += 1
        try:
            event = events.parse_message(topic_of(msg.subscription), msg.data, msg.attributes)
        except events.InvalidEvent as exc:
            dead.append((None, msg, exc.reason, str(exc)))
            continue
        item = work.setdefault(event.unique_id, Work(event.unique_id, event.trace_id, msg.subscription))
        item.message_ids.append(msg.message_id)
    for uid in unique_ids:  # manual runs: airflow dags trigger ... -c '{"unique_ids": [...]}'
        work.setdefault(uid, Work(uid, None, default_sub)).manual = True

    if sweep_limit:
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT unique_id, trace_id FROM news WHERE {stage.definition.sweep}"
                f" ORDER BY {stage.sweep_order} LIMIT %(limit)s",
                {**stage.params(), "limit": sweep_limit},
            )
            for uid, trace_id in cur.fetchall():
                if uid not in work:
                    work[uid] = Work(uid, str(trace_id) if trace_id else None, default_sub)
                    report.swept += 1
        conn.commit()

    rows = _load(conn, stage, list(work))
    todo: list[Work] = []
    for uid, item in work.items():
        item.row = rows.get(uid)
        if item.row is None:
            dead.append((item, None, "unknown_id", f"no article with unique_id {uid!r}"))
        elif stage.is_done(item.row) or not stage.ready(item.row):
            report.skipped.append(uid)
            _log(stage, item, "skipped_done" if stage.is_done(item.row) else "skipped_not_ready")
        elif item.row["hold_stage"] == stage.name and item.row["parked_at"] is not None and not item.manual:
            report.skipped.append(uid)  # parked for an operator: only a redrive or a manual run
            _log(stage, item, "skipped_parked", item.row.get("hold_reason"))
        else:
            item.trace_id = item.trace_id or (str(item.row["trace_id"]) if item.row.get("trace_id") else None)
            todo.append(item)

    if dead:  # invalid messages and unknown ids: dead-lettered at once, whatever happens next
        with transaction(conn) as cur:
            for item, msg, reason, detail in dead:
                _dead_letter(cur, stage, item, msg, reason, detail)
        for item, msg, reason, _detail in dead:
            key = item.unique_id if item else (msg.message_id if msg else "?")
            report.dead_lettered.append((key, reason))

    # the stage's dependencies and PostgreSQL, which every stage uses: a failure charged to a
    # breaker this run does not hold would never be closed by its successes
    breakers = Breakers(conn, (*stage.dependencies, POSTGRESQL))
    retry: list[tuple[Work, Failure]] = []
    longest = 0.0
    pos = 0
    while pos < len(todo):
        if deadline_s is not None and time.monotonic() - t0 + longest > deadline_s:
            report.deadline_hit = True
            _defer(stage, report, todo[pos:], "deadline")
            break
        state = breakers.overall()
        if state == OPEN and _all_healthy(stage, breakers.open_names()):
            state = HALF_OPEN  # back before the cooldown ends: probe with one article now
        if state == OPEN:
            report.breakers_open = breakers.open_names()
            _defer(stage, report, todo[pos:], f"breaker_open: {', '.join(report.breakers_open)}")
            break
        chunk = todo[pos : pos + (1 if state == HALF_OPEN else chunk_size)]  # half-open: one probe
        pos += len(chunk)
        c0 = time.monotonic()
        results = _process(stage, chunk, report)
        report.chunks += 1
        ok = [w for w in chunk if not isinstance(results[w.unique_id], Failure)]
        permanent: list[tuple[Work, Failure]] = []
        transient: list[tuple[Work, Failure]] = []
        for w in chunk:
            f = results[w.unique_id]
            if not isinstance(f, Failure):
                continue
            if f.kind == UNKNOWN:  # permanent only when isolated (see dgb.pipeline.resilience)
                isolated = (
                    bool(ok)  # others of the same chunk went through: this article is the problem
                    or w.row.get("hold_stage") == stage.name  # it already failed alone before
                    or (  # the very same error, again and again
                        int(w.row.get("attempts") or 0) + 1 >= UNKNOWN_LIMIT
                        and w.row.get("last_error") == _error_text(f)
                    )
                )
                f = replace(f, kind=PERMANENT if isolated else TRANSIENT, retryable=not isolated)
            (permanent if f.kind == PERMANENT else transient).append((w, f))
        outcome = _commit_chunk(conn, stage, ok, results, permanent, transient, max_failures)
        report.processed += outcome.processed
        report.skipped += outcome.changed
        report.dead_lettered += outcome.dead_lettered
        report.parked += outcome.parked
        retry += outcome.retry
        if outcome.processed or ok:
            breakers.success()
        elif counted := [f for _, f in transient if f.reason != CONFLICT]:  # a conflict is no outage
            failed = counted[0]
            dep = failed.dependency or (stage.dependencies[0] if stage.dependencies else None)
            breakers.failure(dep, f"{failed.reason}: {failed.detail}", count=len(transient))
        longest = max(longest, time.monotonic() - c0)
        if on_chunk is not None and (outcome.processed or outcome.dead_lettered):
            try:
                on_chunk()
            except Exception as exc:  # the chunk is committed; the relay DAG publishes it later
                log.warning("%s: after-chunk hook failed: %s", stage.name, exc)

    report.retry = [(w.unique_id, f.detail or f.reason) for w, f in retry]
    report.seconds = time.monotonic() - t0
    if not (quiet and not (work or dead)):  # a further sweep that found nothing: not logged
        log.info(json.dumps({"stage": stage.name, "event": "stage_run", **report.summary()}))
    if retry and not final_attempt:
        raise StageRetry(
            f"{stage.name}: {len(retry)} article(s) failed transiently, e.g. "
            f"{retry[0][0].unique_id}: {retry[0][1].detail or retry[0][1].reason}"
        )
    if retry or report.breakers_open:
        log.warning(
            "%s: %d article(s) left pending after transient failures, %d deferred (breakers open: %s);"
            " never dead-lettered, the next run takes them up",
            stage.name,
            len(retry),
            len(report.deferred),
            report.breakers_open or "none",
        )
    return report


def keep_sweeping(
    stage: Stage,
    conn,
    report: StageReport,
    *,
    idle_s: float,
    max_s: float,
    poll_s: float = 0.5,
    sweep_limit: int = 200,
    chunk_size: int | None = None,
    deadline_s: float | None = None,
    on_chunk: Callable[[], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> StageReport:
    """After a run's own work (``report``), go on sweeping what becomes pending every ``poll_s``
    seconds, and end once ``idle_s`` seconds pass with nothing to do, or after ``max_s`` seconds,
    or at the run's ``deadline_s`` (counted from the run's start). Each sweep is a
    :func:`run_stage` over the pending work, its outcome added to ``report``.

    A backlog arrives as a stream of events, one or a few chunks each: without this, every event
    costs a DAG run (scheduling, a task process, the stage built again) for seconds of work, and
    the next stage's runs queue behind each other. A run that stays a few seconds takes the next
    chunks itself as the previous stage commits them; the runs its events queued meanwhile find
    the work done and end at once. Nothing is lost if it stops early: the work is in PostgreSQL.

    It does not start, or it stops, when a sweep meets an outage (transient failures left
    pending, an open breaker) or the deadline: the run's normal retry and the 1-minute sweep own
    that work. Sweeps never raise :class:`StageRetry` (the run's own work is committed). With
    ``sweep_limit`` 0 there is nothing to sweep: it returns at once."""
    if idle_s <= 0 or max_s <= 0 or sweep_limit <= 0:
        return report
    if report.retry or report.breakers_open or report.deadline_hit:
        return report
    t0 = time.monotonic()
    idle_since = t0
    while True:
        now = time.monotonic()
        remaining = None if deadline_s is None else deadline_s - report.seconds - (now - t0)
        if now - idle_since >= idle_s or now - t0 >= max_s or (remaining is not None and remaining <= poll_s):
            break
        sleep(poll_s)
        more = run_stage(
            stage,
            conn,
            [],
            sweep_limit=sweep_limit,
            final_attempt=True,
            chunk_size=chunk_size,
            deadline_s=None if remaining is None else remaining - poll_s,
            on_chunk=on_chunk,
            quiet=True,
        )
        report.absorb(more)
        report.sweeps += 1
        if more.retry or more.breakers_open or more.deadline_hit:
            break
        if more.processed or more.dead_lettered or more.parked:
            idle_since = time.monotonic()
    report.seconds += time.monotonic() - t0
    return report


def unavailable_at_start(conn, name: str, exc: Exception, *, final_attempt: bool) -> StageReport:
    """Building stage ``name`` failed with ``exc`` (the local classifier asks the model service
    for its model when it is built): a transient error is an outage like any other, counted by
    the dependency's breaker, retryable while Airflow tries remain and a normal end with the work
    still pending on the last one. Any other error is re-raised."""
    v = classify(exc)
    if v.kind != TRANSIENT:
        raise exc
    breakers = Breakers(conn, [v.dependency] if v.dependency else [])
    if v.dependency:
        breakers.failure(v.dependency, v.detail)
    report = StageReport(name, breakers_open=breakers.open_names())
    log.warning("%s: cannot start, %s (the work stays pending): %s", name, v.reason, v.detail)
    if not final_attempt:
        raise StageRetry(f"{name}: cannot start: {v.detail}") from exc
    return report


def _process(stage: Stage, chunk: list[Work], report: StageReport) -> dict[str, Any]:
    """``stage.process`` over the chunk -> {unique_id: result | Failure}. A chunk that raises a
    non-transient error is bisected until the article(s) causing it are alone; a transient error
    fails the whole chunk as transient (the dependency, not an article, is at fault)."""
    default_dep = stage.dependencies[0] if stage.dependencies else None
    try:
        out = stage.process([w.row for w in chunk])
    except Exception as exc:
        v = classify(exc, default_dep)
        if v.kind == TRANSIENT or len(chunk) == 1:
            failure = Failure(v.reason, v.detail, v.kind == TRANSIENT, kind=v.kind, dependency=v.dependency)
            return {w.unique_id: failure for w in chunk}
        report.bisections += 1
        mid = len(chunk) // 2
        log.info(
            json.dumps({"stage": stage.name, "event": "bisect", "size": len(chunk), "error": v.detail[:300]})
        )
        return {**_process(stage, chunk[:mid], report), **_process(stage, chunk[mid:], report)}
    results: dict[str, Any] = {}
    for w in chunk:
        r = out.get(w.unique_id)
        if r is None:
            r = Failure("no_result", "stage returned no result", True, kind=UNKNOWN)
        elif isinstance(r, Failure) and r.kind == TRANSIENT and r.dependency is None:
            r = replace(r, dependency=default_dep)
        results[w.unique_id] = r
    return results


@dataclass
class _ChunkOutcome:
    processed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    dead_lettered: list[tuple[str, str]] = field(default_factory=list)
    parked: list[tuple[str, str]] = field(default_factory=list)
    retry: list[tuple[Work, Failure]] = field(default_factory=list)


def _commit_chunk(
    conn,
    stage: Stage,
    ok: list[Work],
    results: dict[str, Any],
    permanent: list[tuple[Work, Failure]],
    transient: list[tuple[Work, Failure]],
    max_failures: int,
) -> _ChunkOutcome:
    """One transaction for the chunk: results, next events, the token ledger, the cleared flags of
    the articles that went through, holds and dead letters, transient errors. A row the database
    refuses (a data error: e.g. a NUL byte) makes it redo the chunk with one savepoint per row, so
    only that row is dead-lettered; a lost database connection raises (nothing is half-written)."""
    import psycopg

    def body(cur, isolate: bool) -> _ChunkOutcome:
        out = _ChunkOutcome()
        refused: list[tuple[Work, Failure]] = []
        # every row this transaction writes, locked first in the stages' one order (no deadlock
        # with another stage's transaction over the same articles)
        lock_articles(cur, [w.unique_id for w in ok] + [w.unique_id for w, _ in permanent + transient])
        for item in ok:
            if isolate:
                cur.execute("SAVEPOINT dgb_stage_row")
            try:
                payload = stage.persist(cur, item.row, results[item.unique_id])
                if payload is not None and stage.next_topic:
                    outbox.enqueue(cur, events.make_event(stage.next_topic, payload, trace_id=item.trace_id))
            except psycopg.Error as exc:
                v = classify(exc)
                if not isolate or v.kind == TRANSIENT:
                    raise
                cur.execute("ROLLBACK TO SAVEPOINT dgb_stage_row")
                refused.append((item, Failure("persist_refused", v.detail, False, kind=PERMANENT)))
                continue
            if isolate:
                cur.execute("RELEASE SAVEPOINT dgb_stage_row")
            if payload is None and stage.next_topic is not None:
                out.changed.append(item.unique_id)
            else:
                out.processed.append(item.unique_id)
        stage.record_chunk(cur)
        if out.processed:
            _clear_flags(cur, stage, out.processed)
        for item, failure in permanent + refused:
            parked = _hold(cur, stage, item, failure, max_failures)
            _dead_letter(cur, stage, item, None, failure.reason, failure.detail)
            out.dead_lettered.append((item.unique_id, failure.reason))
            if parked:
                out.parked.append((item.unique_id, failure.reason))
        for item, failure in transient:
            _record_error(cur, stage, item, failure)
            out.retry.append((item, failure))
        return out

    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            with transaction(conn) as cur:
                out = body(cur, False)
            break
        except psycopg.Error as exc:
            verdict = classify(exc)
            if verdict.reason == CONFLICT and attempt < CONFLICT_ATTEMPTS:
                log.warning("%s: chunk commit hit a lock conflict (%s); again", stage.name, exc)
                continue
            if verdict.kind == TRANSIENT:
                raise
            log.warning("%s: chunk refused by PostgreSQL (%s); redoing it row by row", stage.name, exc)
            with transaction(conn) as cur:
                out = body(cur, True)
            break
    stage.chunk_committed()
    by_id = {w.unique_id: w for w in ok}
    for uid in out.processed:
        _log(stage, by_id[uid], "processed")
    for uid in out.changed:
        _log(stage, by_id[uid], "skipped_changed")
    return out


def _defer(stage: Stage, report: StageReport, items: list[Work], why: str) -> None:
    """Leave ``items`` pending for the next run (nothing written: they are still pending)."""
    report.deferred += [w.unique_id for w in items]
    log.info(json.dumps({"stage": stage.name, "event": "deferred", "count": len(items), "why": why}))


def _load(conn, stage: Stage, uids: list[str]) -> dict[str, dict]:
    if not uids:
        return {}
    base = ("unique_id", "version", "trace_id", "attempts", "last_error")
    base += ("hold_stage", "hold_reason", "parked_at")
    cols = ", ".join(dict.fromkeys(base + stage.columns))
    with conn.cursor() as cur:
        d = stage.definition
        cur.execute(
            f"SELECT {cols}, ({d.done}) AS {DONE}, ({d.ready}) AS {READY}"
            " FROM news WHERE unique_id = ANY(%(ids)s)",
            {**stage.params(), "ids": uids},
        )
        names = [d.name for d in cur.description]
        rows = {r[0]: dict(zip(names, r)) for r in cur.fetchall()}
    conn.commit()
    return rows


def _clear_flags(cur, stage: Stage, uids: list[str]) -> None:
    """A success clears what failures left: this stage's hold and parking, the dead-letter flag,
    the transient-attempts counter and this stage's last error; its open dead letters resolve."""
    cur.execute(
        "SELECT unique_id FROM news WHERE unique_id = ANY(%(ids)s)"
        " AND (problem = 'dead_letter' OR hold_stage = %(stage)s)",
        {"stage": stage.name, "ids": uids},
    )
    lettered = [r[0] for r in cur.fetchall()]
    cur.execute(
        "UPDATE news SET"
        " hold_stage = CASE WHEN hold_stage = %(stage)s THEN NULL ELSE hold_stage END,"
        " hold_reason = CASE WHEN hold_stage = %(stage)s THEN NULL ELSE hold_reason END,"
        " hold_failures = CASE WHEN hold_stage = %(stage)s THEN 0 ELSE hold_failures END,"
        " parked_at = CASE WHEN hold_stage = %(stage)s THEN NULL ELSE parked_at END,"
        " problem = CASE WHEN problem = 'dead_letter' AND (hold_stage IS NULL OR hold_stage = %(stage)s)"
        "   THEN NULL ELSE problem END,"
        " attempts = 0,"
        " last_error = CASE WHEN last_error_stage = %(stage)s THEN NULL ELSE last_error END,"
        " last_error_stage = CASE WHEN last_error_stage = %(stage)s THEN NULL ELSE last_error_stage END"
        " WHERE unique_id = ANY(%(ids)s) AND (hold_stage = %(stage)s OR problem = 'dead_letter'"
        " OR attempts > 0 OR last_error_stage = %(stage)s)",
        {"stage": stage.name, "ids": uids},
    )
    if lettered:
        cur.execute(
            "UPDATE dead_letters SET status = 'resolved', resolved_at = now(),"
            " resolution = 'processed by a later run' WHERE status = 'open' AND unique_id = ANY(%(ids)s)"
            " AND subscription = ANY(%(subs)s)",
            {"ids": lettered, "subs": list(stage.subscriptions)},
        )


def _hold(cur, stage: Stage, item: Work, failure: Failure, max_failures: int) -> bool:
    """Hold the article out of this stage's sweep after a permanent failure; park it after
    ``max_failures`` of them. Returns whether it is parked now."""
    same = "hold_stage IS NOT DISTINCT FROM %(stage)s"
    cur.execute(
        f"UPDATE news SET hold_stage = %(stage)s, hold_reason = %(reason)s,"
        f" hold_failures = CASE WHEN {same} THEN hold_failures + 1 ELSE 1 END,"
        f" parked_at = CASE WHEN (CASE WHEN {same} THEN hold_failures + 1 ELSE 1 END) >= %(max)s"
        f"   THEN coalesce(parked_at, now()) ELSE NULL END"
        f" WHERE unique_id = %(uid)s RETURNING parked_at IS NOT NULL",
        {"stage": stage.name, "reason": failure.reason[:200], "max": max_failures, "uid": item.unique_id},
    )
    row = cur.fetchone()
    return bool(row and row[0])


def _error_text(failure: Failure) -> str:
    """What ``news.last_error`` keeps of a transient failure."""
    return f"{failure.reason}: {failure.detail}"[:2000]


def _record_error(cur, stage: Stage, item: Work, failure: Failure) -> None:
    cur.execute(
        "UPDATE news SET last_error = %s, last_error_stage = %s, last_error_at = now(),"
        " attempts = attempts + 1 WHERE unique_id = %s",
        (_error_text(failure), stage.name, item.unique_id),
    )
    _log(stage, item, "retry", failure.detail or failure.reason)


def _dead_letter(
    cur, stage: Stage, item: Work | None, msg: InMessage | None, reason: str, detail: str
) -> None:
    subscription = msg.subscription if msg else (item.subscription if item else stage.subscriptions[0])
    message_id = msg.message_id if msg else (item.message_ids[0] if item and item.message_ids else None)
    unique_id = item.unique_id if item else None
    trace_id = (item.trace_id if item else None) or (msg.attributes.get("trace_id") if msg else None)
    attributes = dict(msg.attributes) if msg else {}
    payload_text = msg.data.decode("utf-8", errors="replace") if msg else None
    key = unique_id or message_id or "unknown"
    cur.execute(
        "INSERT INTO dead_letters (subscription, message_key, message_id, unique_id, trace_id, reason, error,"
        " payload, attributes) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (subscription, message_key, reason) DO UPDATE SET last_seen = now(),"
        " attempts = dead_letters.attempts + 1, error = EXCLUDED.error, status = 'open'",
        (
            subscription,
            key,
            message_id,
            unique_id,
            trace_id,
            reason,
            detail[:4000],
            payload_text,
            json.dumps(attributes),
        ),
    )
    if unique_id:
        cur.execute(
            "UPDATE news SET last_error = %s, last_error_stage = %s, last_error_at = now(),"
            " problem = COALESCE(problem, 'dead_letter') WHERE unique_id = %s",
            (f"dead-lettered: {reason}: {detail}"[:2000], stage.name, unique_id),
        )
    dlq_attrs = {
        **attributes,
        "dgb_dead_letter_reason": reason,
        "dgb_source_subscription": subscription,
        "dgb_recorded": "1",
    }
    if trace_id:
        dlq_attrs["trace_id"] = trace_id
    outbox.enqueue_raw(
        cur,
        topology.subscription(subscription).dead_letter_topic,
        key,
        {
            "reason": reason,
            "error": detail[:4000],
            "unique_id": unique_id,
            "message_id": message_id,
            "original": payload_text,
        },
        dlq_attrs,
    )
    log.warning(
        json.dumps(
            {
                "stage": stage.name,
                "unique_id": unique_id,
                "trace_id": trace_id,
                "message_id": message_id,
                "outcome": "dead_lettered",
                "reason": reason,
                "detail": detail[:300],
            },
            ensure_ascii=False,
        )
    )


def _log(stage: Stage, item: Work, outcome: str, detail: str | None = None) -> None:
    entry = {"stage": stage.name, "unique_id": item.unique_id, "trace_id": item.trace_id, "outcome": outcome}
    if detail:
        entry["detail"] = detail[:300]
    log.info(json.dumps(entry, ensure_ascii=False))
