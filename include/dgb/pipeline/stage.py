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
4. process the batch (classify, embed, index);
5. write each result, bump the row's ``version`` and enqueue the next stage's event in the
   outbox, all in one transaction, guarded by the version read in step 3 (an article edited
   meanwhile is left to its own new event). **The one exception is the index stage**: its
   writes go to Typesense, which cannot take part in a PostgreSQL transaction, so
   :class:`~dgb.pipeline.stages.IndexStage` writes in step 4 (``dgb.search.sync.sync``
   upserts/deletes the documents, then commits ``indexed_version`` for the rows still at the
   version it read; its batched, pipelined imports of many documents per request do not fit a
   per-row persist either) and has nothing to persist in step 5. A crash between the Typesense write
   and that commit leaves the article pending, and the next run re-upserts the same whole
   document (idempotent); an edit meanwhile is never marked done (the version guard);
6. failures: permanent ones are dead-lettered per article; transient ones are recorded on the
   row and raised (:class:`StageRetry`) so Airflow retries the task with backoff; on the last
   attempt they are dead-lettered per article with the error, never silently dropped.

Dead letters land in ``dead_letters`` (operator view) and, through the outbox, on the
subscription's dead-letter topic. Every processed message is logged as one JSON line with
unique_id, trace_id, stage and outcome, so one article can be followed across DAGs.
"""

from __future__ import annotations

import json
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from dgb import events, outbox, topology
from dgb.db import transaction
from dgb.pipeline import definitions
from dgb.pipeline.definitions import StageDefinition

log = logging.getLogger("dgb.pipeline")

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
    """A per-article processing failure. ``retryable`` failures are retried by Airflow."""

    reason: str
    detail: str = ""
    retryable: bool = True


@dataclass
class Work:
    unique_id: str
    trace_id: str | None
    subscription: str
    message_ids: list[str] = field(default_factory=list)
    row: dict | None = None


@dataclass
class StageReport:
    stage: str
    messages: int = 0
    swept: int = 0
    processed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    dead_lettered: list[tuple[str, str]] = field(default_factory=list)
    retry: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> dict:
        return {
            "stage": self.stage,
            "messages": self.messages,
            "swept": self.swept,
            "processed": len(self.processed),
            "skipped": len(self.skipped),
            "dead_lettered": len(self.dead_lettered),
            "retry": len(self.retry),
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
) -> StageReport:
    t0 = time.monotonic()
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
        work.setdefault(uid, Work(uid, None, default_sub))

    if sweep_limit:
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT unique_id, trace_id FROM news WHERE {stage.pending_condition()}"
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
        else:
            item.trace_id = item.trace_id or (str(item.row["trace_id"]) if item.row.get("trace_id") else None)
            todo.append(item)

    results: dict[str, Any] = {}
    if todo:
        try:
            results = stage.process([w.row for w in todo])
        except Exception as exc:
            results = {
                w.unique_id: Failure("batch_failed", f"{type(exc).__name__}: {exc}", True) for w in todo
            }

    retry: list[tuple[Work, Failure]] = []
    with transaction(conn) as cur:
        for item in todo:
            result = results.get(item.unique_id, Failure("no_result", "stage returned no result", True))
            if isinstance(result, Failure):
                if result.retryable and not final_attempt:
                    retry.append((item, result))
                    _record_error(cur, stage, item, result)
                else:
                    reason = result.reason if not result.retryable else "retries_exhausted"
                    dead.append((item, None, reason, result.detail))
                continue
            payload = stage.persist(cur, item.row, result)
            if payload is None and stage.next_topic is not None:
                report.skipped.append(item.unique_id)
                _log(stage, item, "skipped_changed")
                continue
            if payload is not None and stage.next_topic:
                outbox.enqueue(cur, events.make_event(stage.next_topic, payload, trace_id=item.trace_id))
            report.processed.append(item.unique_id)
            _log(stage, item, "processed")
        for item, msg, reason, detail in dead:
            _dead_letter(cur, stage, item, msg, reason, detail)
            key = item.unique_id if item else (msg.message_id if msg else "?")
            report.dead_lettered.append((key, reason))
    report.retry = [(w.unique_id, f.detail or f.reason) for w, f in retry]
    report.seconds = time.monotonic() - t0
    log.info(json.dumps({"stage": stage.name, "event": "stage_run", **report.summary()}))
    if retry:
        raise StageRetry(
            f"{stage.name}: {len(retry)} article(s) failed transiently, e.g. "
            f"{retry[0][0].unique_id}: {retry[0][1].detail or retry[0][1].reason}"
        )
    return report


def _load(conn, stage: Stage, uids: list[str]) -> dict[str, dict]:
    if not uids:
        return {}
    cols = ", ".join(dict.fromkeys(("unique_id", "version", "trace_id") + stage.columns))
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


def _record_error(cur, stage: Stage, item: Work, failure: Failure) -> None:
    cur.execute(
        "UPDATE news SET last_error = %s, last_error_stage = %s, last_error_at = now(),"
        " attempts = attempts + 1 WHERE unique_id = %s",
        (f"{failure.reason}: {failure.detail}"[:2000], stage.name, item.unique_id),
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
