"""One chunk of a stage run (see :mod:`dgb.pipeline.runner`, steps 4-6): :func:`process` it
(bisecting a chunk that raises until the bad article is alone), :func:`triage` the failures
(transient or permanent), :func:`commit` the outcome in ONE transaction."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from typing import Any

from dgb import events, outbox
from dgb.db import lock_articles, transaction
from dgb.pipeline import failures
from dgb.pipeline.messages import Work
from dgb.pipeline.report import StageReport, log_outcomes
from dgb.pipeline.resilience import CONFLICT, PERMANENT, TRANSIENT, UNKNOWN, UNKNOWN_LIMIT, classify
from dgb.pipeline.stage import Failure, Stage

log = logging.getLogger("dgb.pipeline")

CONFLICT_ATTEMPTS = 3  # a chunk's commit is tried again at once after a deadlock, this many times in all


def process(stage: Stage, chunk: list[Work], report: StageReport) -> dict[str, Any]:
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
        return {**process(stage, chunk[:mid], report), **process(stage, chunk[mid:], report)}
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
class Triage:
    """A processed chunk sorted: the articles that went through, the failures by kind."""

    ok: list[Work] = field(default_factory=list)
    permanent: list[tuple[Work, Failure]] = field(default_factory=list)
    transient: list[tuple[Work, Failure]] = field(default_factory=list)


def triage(stage: Stage, chunk: list[Work], results: dict[str, Any]) -> Triage:
    """Sort the chunk's results; an ``unknown`` failure is permanent only when isolated (see
    :mod:`dgb.pipeline.resilience`): others of the chunk went through, the article already failed
    alone in this stage, or the very same error came back again and again."""
    out = Triage(ok=[w for w in chunk if not isinstance(results[w.unique_id], Failure)])
    for w in chunk:
        f = results[w.unique_id]
        if not isinstance(f, Failure):
            continue
        if f.kind == UNKNOWN:
            isolated = (
                bool(out.ok)  # others of the same chunk went through: this article is the problem
                or w.row.get("hold_stage") == stage.name  # it already failed alone before
                or (  # the very same error, again and again
                    int(w.row.get("attempts") or 0) + 1 >= UNKNOWN_LIMIT
                    and w.row.get("last_error") == failures.error_text(f)
                )
            )
            f = replace(f, kind=PERMANENT if isolated else TRANSIENT, retryable=not isolated)
        (out.permanent if f.kind == PERMANENT else out.transient).append((w, f))
    return out


@dataclass
class ChunkOutcome:
    processed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    dead_lettered: list[tuple[str, str]] = field(default_factory=list)
    parked: list[tuple[str, str]] = field(default_factory=list)
    retry: list[tuple[Work, Failure]] = field(default_factory=list)


def commit(conn, stage: Stage, triaged: Triage, results: dict[str, Any], max_failures: int) -> ChunkOutcome:
    """One transaction for the chunk: results, next events, the token ledger, the cleared flags of
    the articles that went through, holds and dead letters, transient errors. A row the database
    refuses (a data error: e.g. a NUL byte) makes it redo the chunk with one savepoint per row, so
    only that row is dead-lettered; a lost database connection raises (nothing is half-written)."""
    import psycopg

    ok, permanent, transient = triaged.ok, triaged.permanent, triaged.transient

    def body(cur, isolate: bool) -> ChunkOutcome:
        out = ChunkOutcome()
        refused: list[tuple[Work, Failure]] = []
        # every row this transaction writes, locked first in the stages' one order (no deadlock
        # with another stage's transaction over the same articles)
        lock_articles(cur, [w.unique_id for w in ok] + [w.unique_id for w, _ in permanent + transient])
        for item in ok:
            if isolate:
                cur.execute("SAVEPOINT dgb_stage_row")
            try:
                payload = stage.persist(cur, item.row, results[item.unique_id])
                written = payload is not None or stage.next_topic is None
                if isolate and written:
                    stage.persist_chunk(cur, [item.row])
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
            if written:
                out.processed.append(item.unique_id)
            else:
                out.changed.append(item.unique_id)
        if not isolate:
            row_of = {w.unique_id: w.row for w in ok}
            stage.persist_chunk(cur, [row_of[uid] for uid in out.processed])
        stage.record_chunk(cur)
        if out.processed:
            failures.clear(cur, stage, out.processed)
        for item, failure in permanent + refused:
            parked = failures.hold(cur, stage, item, failure, max_failures)
            failures.dead_letter(cur, stage, item, None, failure.reason, failure.detail)
            out.dead_lettered.append((item.unique_id, failure.reason))
            if parked:
                out.parked.append((item.unique_id, failure.reason))
        for item, failure in transient:
            failures.record_error(cur, stage, item, failure)
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
    log_outcomes(stage.name, [by_id[uid] for uid in out.processed], "processed")
    log_outcomes(stage.name, [by_id[uid] for uid in out.changed], "skipped_changed")
    return out
