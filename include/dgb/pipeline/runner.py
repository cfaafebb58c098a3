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
   (:meth:`~dgb.pipeline.stage.Stage.record_chunk`), the cleared failure flags of the articles that
   went through, and the failures below. ``on_chunk`` runs after each commit (the operator relays the outbox,
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
     one article). The run raises :class:`~dgb.pipeline.report.StageRetry` at the end so Airflow retries with
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

This module runs the steps (:func:`run_stage`, one :class:`StageRun`; :func:`keep_sweeping` for
the further sweeps of a run); the pieces live beside it: :mod:`.messages` (what a run works on),
:mod:`.stage` (the stage contract), :mod:`.chunks` (steps 4-6 for one chunk), :mod:`.failures`
(holds, parking, dead letters and their clearing), :mod:`.report` (the run's report).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from dgb import events
from dgb.config import pipeline as config
from dgb.db import transaction
from dgb.pipeline import chunks, failures
from dgb.pipeline.messages import InMessage, Work, topic_of
from dgb.pipeline.report import StageReport, StageRetry, log_outcome, log_outcomes
from dgb.pipeline.resilience import CONFLICT, HALF_OPEN, OPEN, POSTGRESQL, TRANSIENT, Breakers, classify
from dgb.pipeline.stage import DONE, READY, Failure, Stage
from dgb.pipeline.wakeup import CommitWaiter, input_topics

log = logging.getLogger("dgb.pipeline")


@dataclass(frozen=True)
class RunOptions:
    """How one stage run goes; the defaults are a plain run's."""

    sweep_limit: int = 200  # pending articles swept up besides the messages (0: none)
    final_attempt: bool = False  # Airflow's last try: transient failures end the run normally
    chunk_size: int | None = None  # articles per committed chunk (None: DGB_STAGE_CHUNK_SIZE, 25)
    deadline_s: float | None = None  # no new chunk starts past this many seconds from the start
    on_chunk: Callable[[], None] | None = None  # after each commit (the operator relays the outbox)
    max_failures: int | None = None  # permanent failures that park (None: DGB_STAGE_MAX_FAILURES, 3)
    quiet: bool = False  # no log line when there was nothing to do (keep_sweeping's sweeps)


def run_stage(
    stage: Stage,
    conn,
    messages: Iterable[InMessage],
    options: RunOptions | None = None,
    *,
    unique_ids: Iterable[str] = (),
) -> StageReport:
    """Run ``stage`` over ``messages``, the manual ``unique_ids`` and up to ``sweep_limit`` swept
    pending articles (see the module doc and :class:`RunOptions`), in chunks, each committed with
    its next events and its token ledger; ``on_chunk`` runs after each commit (the operator relays
    the outbox there, so the next stage starts on the first chunk).

    No new chunk starts once ``deadline_s`` (seconds from the start) would be passed: the rest
    stays pending for the next run. Transient failures leave the work pending and raise
    :class:`StageRetry` at the end (unless ``final_attempt``: then the run ends normally, the work
    still pending, and the 1-minute sweep takes it up); they never dead-letter. Permanent ones
    are dead-lettered per article and hold it out of the sweep; ``max_failures`` permanent
    failures park it."""
    return StageRun(stage, conn, options or RunOptions()).run(messages, unique_ids)


class StageRun:
    """One run of a stage, step by step (the numbers of the module doc)."""

    def __init__(self, stage: Stage, conn, options: RunOptions):
        self.t0 = time.monotonic()
        self.stage, self.conn, self.options = stage, conn, options
        self.chunk_size = options.chunk_size or config.stage_chunk_size()
        self.prefetch_chunks = config.stage_prefetch_chunks()
        self.max_failures = options.max_failures or config.stage_max_failures()
        self.report = StageReport(stage.name)
        self.work: dict[str, Work] = {}
        self.dead: list[tuple[Work | None, InMessage | None, str, str]] = []  # (work, msg, reason, detail)
        self._ahead_ok = True  # the last chunk met no transient failure: the next one may be prefetched

    def run(self, messages: Iterable[InMessage], unique_ids: Iterable[str]) -> StageReport:
        self.stage.drop_prefetched()  # answers started by an earlier run are not this run's
        self.take_messages(messages)
        self.take_manual(unique_ids)
        self.sweep()
        todo = self.load()
        self.dead_letter_at_once()
        retry = self.process(todo)
        return self.finish(retry)

    # -- 1-2: what to work on

    def take_messages(self, messages: Iterable[InMessage]) -> None:
        """Decode and validate each message (an invalid one is dead-lettered), one work item per
        article whatever the number of its messages."""
        for msg in messages:
            self.report.messages += 1
            try:
                event = events.parse_message(topic_of(msg.subscription), msg.data, msg.attributes)
            except events.InvalidEvent as exc:
                self.dead.append((None, msg, exc.reason, str(exc)))
                continue
            uid = event.unique_id
            item = self.work.setdefault(uid, Work(uid, event.trace_id, msg.subscription))
            item.message_ids.append(msg.message_id)

    def take_manual(self, unique_ids: Iterable[str]) -> None:
        """Manual runs: airflow dags trigger ... -c '{"unique_ids": [...]}' (parked ones too)."""
        for uid in unique_ids:
            self.work.setdefault(uid, Work(uid, None, self.stage.subscriptions[0])).manual = True

    def sweep(self) -> None:
        """Up to ``sweep_limit`` of the stage's pending, not held articles, oldest first."""
        if not self.options.sweep_limit:
            return
        stage = self.stage
        with self.conn.cursor() as cur:
            cur.execute(
                f"SELECT unique_id, trace_id FROM news WHERE {stage.definition.sweep}"
                f" ORDER BY {stage.sweep_order} LIMIT %(limit)s",
                {**stage.params(), "limit": self.options.sweep_limit},
            )
            for uid, trace_id in cur.fetchall():
                if uid not in self.work:
                    self.work[uid] = Work(uid, str(trace_id) if trace_id else None, stage.subscriptions[0])
                    self.report.swept += 1
        self.conn.commit()

    # -- 3: the rows

    def load(self) -> list[Work]:
        """Load the rows and keep what to do: an unknown id is dead-lettered; done, not ready and
        parked (unless named by a manual run) articles are skipped."""
        stage, report = self.stage, self.report
        rows = _load(self.conn, stage, list(self.work))
        todo: list[Work] = []
        skipped: dict[str, list[Work]] = {"skipped_done": [], "skipped_not_ready": []}
        for uid, item in self.work.items():
            item.row = row = rows.get(uid)
            if row is None:
                self.dead.append((item, None, "unknown_id", f"no article with unique_id {uid!r}"))
            elif stage.is_done(row) or not stage.ready(row):
                report.skipped.append(uid)
                skipped["skipped_done" if stage.is_done(row) else "skipped_not_ready"].append(item)
            elif row["hold_stage"] == stage.name and row["parked_at"] is not None and not item.manual:
                report.skipped.append(uid)  # parked for an operator: only a redrive or a manual run
                log_outcome(stage.name, item, "skipped_parked", row.get("hold_reason"))
            else:
                item.trace_id = item.trace_id or (str(row["trace_id"]) if row.get("trace_id") else None)
                todo.append(item)
        for outcome, items in skipped.items():
            log_outcomes(stage.name, items, outcome)
        return todo

    def dead_letter_at_once(self) -> None:
        """Invalid messages and unknown ids: dead-lettered at once, whatever happens next."""
        if not self.dead:
            return
        with transaction(self.conn) as cur:
            for item, msg, reason, detail in self.dead:
                failures.dead_letter(cur, self.stage, item, msg, reason, detail)
        for item, msg, reason, _detail in self.dead:
            key = item.unique_id if item else (msg.message_id if msg else "?")
            self.report.dead_lettered.append((key, reason))

    # -- 4-6: the chunks

    def process(self, todo: list[Work]) -> list[tuple[Work, Failure]]:
        """The work in chunks while the deadline and the breakers allow; the rest is deferred.
        Returns the transient failures (left pending)."""
        stage, report = self.stage, self.report
        # the stage's dependencies and PostgreSQL, which every stage uses: a failure charged to a
        # breaker this run does not hold would never be closed by its successes
        breakers = Breakers(self.conn, (*stage.dependencies, POSTGRESQL))
        retry: list[tuple[Work, Failure]] = []
        longest = 0.0
        pos = 0
        while pos < len(todo):
            deadline_s = self.options.deadline_s
            if deadline_s is not None and time.monotonic() - self.t0 + longest > deadline_s:
                report.deadline_hit = True
                self._defer(todo[pos:], "deadline")
                break
            state = breakers.overall()
            if state == OPEN and _all_healthy(stage, breakers.open_names()):
                state = HALF_OPEN  # back before the cooldown ends: probe with one article now
            if state == OPEN:
                report.breakers_open = breakers.open_names()
                self._defer(todo[pos:], f"breaker_open: {', '.join(report.breakers_open)}")
                break
            chunk = todo[pos : pos + (1 if state == HALF_OPEN else self.chunk_size)]  # half-open: one probe
            pos += len(chunk)
            size, ahead = self.chunk_size, (self.prefetch_chunks if state != HALF_OPEN else 0)
            upcoming = [todo[p : p + size] for p in range(pos, min(len(todo), pos + ahead * size), size)]
            c0 = time.monotonic()
            outcome = self.process_chunk(chunk, breakers, upcoming)
            retry += outcome.retry
            longest = max(longest, time.monotonic() - c0)
            self.after_chunk(outcome)
        return retry

    def process_chunk(
        self, chunk: list[Work], breakers: Breakers, upcoming: list[list[Work]] = ()
    ) -> chunks.ChunkOutcome:
        """Process, sort and commit one chunk; tell the breakers how it went. ``upcoming``: the
        next chunks (``DGB_STAGE_PREFETCH_CHUNKS``), each offered first to
        :meth:`~dgb.pipeline.stage.Stage.prefetch` (their model calls then queue behind this
        chunk's and run while this chunk's features and commit do), unless the chunk before met a
        transient failure (an outage: no calls ahead of a probe)."""
        stage, report = self.stage, self.report
        if self._ahead_ok:
            for rows in upcoming:
                stage.prefetch([w.row for w in rows])
        results = chunks.process(stage, chunk, report)
        self._ahead_ok = not any(isinstance(r, Failure) and r.retryable for r in results.values())
        report.chunks += 1
        triaged = chunks.triage(stage, chunk, results)
        outcome = chunks.commit(self.conn, stage, triaged, results, self.max_failures)
        report.processed += outcome.processed
        report.skipped += outcome.changed
        report.dead_lettered += outcome.dead_lettered
        report.parked += outcome.parked
        if outcome.processed or triaged.ok:
            breakers.success()
        elif counted := [f for _, f in triaged.transient if f.reason != CONFLICT]:  # a conflict is no outage
            failed = counted[0]
            dep = failed.dependency or (stage.dependencies[0] if stage.dependencies else None)
            breakers.failure(dep, f"{failed.reason}: {failed.detail}", count=len(triaged.transient))
        return outcome

    def after_chunk(self, outcome: chunks.ChunkOutcome) -> None:
        """``on_chunk`` after a commit that did something (a failing hook never fails the run)."""
        on_chunk = self.options.on_chunk
        if on_chunk is not None and (outcome.processed or outcome.dead_lettered):
            try:
                on_chunk()
            except Exception as exc:  # the chunk is committed; the relay DAG publishes it later
                log.warning("%s: after-chunk hook failed: %s", self.stage.name, exc)

    def _defer(self, items: list[Work], why: str) -> None:
        """Leave ``items`` pending for the next run (nothing written: they are still pending)."""
        self.report.deferred += [w.unique_id for w in items]
        log.info(json.dumps({"stage": self.stage.name, "event": "deferred", "count": len(items), "why": why}))

    # -- the end

    def finish(self, retry: list[tuple[Work, Failure]]) -> StageReport:
        """Log the run; raise :class:`StageRetry` when transient failures remain (but on the last try)."""
        stage, report = self.stage, self.report
        report.retry = [(w.unique_id, f.detail or f.reason) for w, f in retry]
        report.seconds = time.monotonic() - self.t0
        if not (self.options.quiet and not (self.work or self.dead)):  # a further sweep that found nothing
            log.info(json.dumps({"stage": stage.name, "event": "stage_run", **report.summary()}))
        if retry and not self.options.final_attempt:
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


# ----------------------------------------------------------------------------- after the run


def keep_sweeping(
    stage: Stage,
    conn,
    report: StageReport,
    options: RunOptions | None = None,
    *,
    idle_s: float,
    max_s: float,
    poll_s: float = 0.5,
    woken_s_ago: float | None = None,
    sleep: Callable[[float], None] | None = None,
) -> StageReport:
    """After a run's own work (``report``), go on sweeping what becomes pending, at the latest
    every ``poll_s`` seconds and at once when a commit announces work of the stage's input topics
    (``sleep``: how the run waits between sweeps; by default a
    :class:`~dgb.pipeline.wakeup.CommitWaiter` on ``conn``), and end once ``idle_s`` seconds pass
    with nothing to do, or after ``max_s`` seconds, or at the run's ``deadline_s`` (counted from
    the run's start). Each sweep is a :func:`run_stage` over the pending work, its outcome added
    to ``report``.

    A backlog arrives as a stream of events, one or a few chunks each: without this, every event
    costs a DAG run (scheduling, a task process, the stage built again) for seconds of work, and
    the next stage's runs queue behind each other. A run that stays a few seconds takes the next
    chunks itself as the previous stage commits them; the runs its events queued meanwhile find
    the work done and end at once. Nothing is lost if it stops early: the work is in PostgreSQL.

    It stays warm only after work: a run that found nothing (the 1-minute sweep of an idle
    pipeline) ends at once, so an idle stack runs no stage task. The exception is a run *woken* by
    an earlier stage's event (``woken_s_ago``: how long ago the newest such event was stored;
    :mod:`dgb.pipeline.dags`): the work that event announces is still on its way, so the run counts
    its idle time from the event instead of from its own work, and one that starts ``idle_s``
    after the event (it queued behind another run) ends at once. Kept warm for ``idle_s`` after
    its last work (``DGB_STAGE_LINGER_S``, 60 s), a run takes the next article at its commit (at
    the latest ``poll_s`` after it) when news arrives one at a time, instead of the ~1.5 s an
    event costs to become a DAG run and a task (the triggerer's one-second loop, the scheduler, a
    task process and the stage built).
    It does not start, or it stops, when a sweep meets an outage (transient failures left
    pending, an open breaker) or the deadline: the run's normal retry and the 1-minute sweep own
    that work. Sweeps never raise :class:`StageRetry` (the run's own work is committed). With
    ``sweep_limit`` 0 there is nothing to sweep: it returns at once. ``options``: the run's own
    (its ``sweep_limit``, ``chunk_size``, ``deadline_s``, ``on_chunk``)."""
    options = options or RunOptions()
    if idle_s <= 0 or max_s <= 0 or options.sweep_limit <= 0:
        return report
    if report.retry or report.breakers_open or report.deadline_hit:
        return report
    t0 = time.monotonic()
    idle_since = t0
    if not (report.processed or report.dead_lettered or report.parked):
        if woken_s_ago is None or woken_s_ago >= idle_s:
            return report  # nothing done (the idle 1-minute sweep; an event whose work another run did): ends
        idle_since = t0 - max(woken_s_ago, 0.0)  # woken: wait for the announced work, from the event on
    waiter = CommitWaiter(conn, input_topics(stage.subscriptions)) if sleep is None else None
    wait = sleep or waiter
    try:
        while True:
            now = time.monotonic()
            deadline_s = options.deadline_s
            remaining = None if deadline_s is None else deadline_s - report.seconds - (now - t0)
            if (
                now - idle_since >= idle_s
                or now - t0 >= max_s
                or (remaining is not None and remaining <= poll_s)
            ):
                break
            wait(min(poll_s, idle_s - (now - idle_since), max_s - (now - t0)))  # never past the end
            sweep = replace(
                options,
                final_attempt=True,
                quiet=True,
                deadline_s=None if remaining is None else remaining - poll_s,
            )
            more = run_stage(stage, conn, [], sweep)
            report.absorb(more)
            report.sweeps += 1
            if more.retry or more.breakers_open or more.deadline_hit:
                break
            if more.processed or more.dead_lettered or more.parked:
                idle_since = time.monotonic()
    finally:
        if waiter is not None:
            waiter.close()
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
