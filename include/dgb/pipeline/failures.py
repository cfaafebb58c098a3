"""What a stage's failures leave on the article, and what a success clears (see
:mod:`dgb.pipeline.runner`, step 6):

* a **transient** failure: the error and a try counted on the row (``last_error``,
  ``attempts``); the article stays pending (:func:`record_error`);
* a **permanent** one: the article is *held* out of the stage's sweep (``hold_stage``), *parked*
  after ``max_failures`` of them (:func:`hold`), and dead-lettered (:func:`dead_letter`: a
  ``dead_letters`` row through :func:`dgb.deadletters.upsert`, the article flagged
  ``problem='dead_letter'``, the letter on the subscription's dead-letter topic through the outbox);
* a later **success** clears all of it and resolves the stage's open dead letters of the article
  (:func:`clear`).

Every function writes in the caller's transaction (``cur``).
"""

from __future__ import annotations

import json
import logging

from dgb import deadletters, outbox, topology
from dgb.pipeline.messages import InMessage, Work
from dgb.pipeline.report import log_outcome
from dgb.pipeline.stage import Failure, Stage

log = logging.getLogger("dgb.pipeline")


def clear(cur, stage: Stage, uids: list[str]) -> None:
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


def hold(cur, stage: Stage, item: Work, failure: Failure, max_failures: int) -> bool:
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


def error_text(failure: Failure) -> str:
    """What ``news.last_error`` keeps of a transient failure."""
    return f"{failure.reason}: {failure.detail}"[:2000]


def record_error(cur, stage: Stage, item: Work, failure: Failure) -> None:
    """A transient failure: the error and one more try on the row; the article stays pending."""
    cur.execute(
        "UPDATE news SET last_error = %s, last_error_stage = %s, last_error_at = now(),"
        " attempts = attempts + 1 WHERE unique_id = %s",
        (error_text(failure), stage.name, item.unique_id),
    )
    log_outcome(stage.name, item, "retry", failure.detail or failure.reason)


def dead_letter(
    cur, stage: Stage, item: Work | None, msg: InMessage | None, reason: str, detail: str
) -> None:
    """Dead-letter an article (``item``) or a message that names none (``msg``): the
    ``dead_letters`` row, the article's flag and the letter on the dead-letter topic (marked
    ``dgb_recorded``: the topics' recorder, :func:`dgb.deadletters.record_from_topics`, skips it)."""
    subscription = msg.subscription if msg else (item.subscription if item else stage.subscriptions[0])
    message_id = msg.message_id if msg else (item.message_ids[0] if item and item.message_ids else None)
    unique_id = item.unique_id if item else None
    trace_id = (item.trace_id if item else None) or (msg.attributes.get("trace_id") if msg else None)
    attributes = dict(msg.attributes) if msg else {}
    payload_text = msg.data.decode("utf-8", errors="replace") if msg else None
    key = unique_id or message_id or "unknown"
    deadletters.upsert(
        cur,
        subscription=subscription,
        message_key=key,
        message_id=message_id,
        unique_id=unique_id,
        trace_id=trace_id,
        reason=reason,
        error=detail,
        payload=payload_text,
        attributes=attributes,
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
