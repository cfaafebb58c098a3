"""The ``dead_letters`` table, the operator's one view of every dead letter (``dgb reconcile
redrive`` re-publishes them).

* :func:`upsert`: the one way a dead letter is written, by the stage runs
  (:func:`dgb.pipeline.failures.dead_letter`) and by :func:`record_from_topics`;
* :func:`record_from_topics`: bring messages that reached a dead-letter topic outside our stages
  (rejected by the ack-mode trigger, or dead-lettered by Pub/Sub's own policy in production) into
  the table. Messages our stages dead-lettered themselves carry ``dgb_recorded=1`` (already in the
  table): they are only acknowledged here.
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor

from dgb import topology
from dgb.db import transaction

log = logging.getLogger(__name__)


def upsert(
    cur,
    *,
    subscription: str,
    message_key: str,
    message_id: str | None,
    unique_id: str | None,
    trace_id: str | None,
    reason: str,
    error: str,
    payload: str | None,
    attributes: dict[str, str],
) -> None:
    """Record one dead letter in the caller's transaction. One row per (subscription,
    message_key, reason): a repeat counts there (``attempts``, ``last_seen``), opens the letter
    again (after a redrive or a resolution) and keeps the latest ``error`` (its first 4,000
    characters), the one that goes with ``last_seen``; the first payload and attributes stay."""
    cur.execute(
        "INSERT INTO dead_letters (subscription, message_key, message_id, unique_id, trace_id, reason, error,"
        " payload, attributes) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (subscription, message_key, reason) DO UPDATE SET last_seen = now(),"
        " attempts = dead_letters.attempts + 1, error = EXCLUDED.error, status = 'open'",
        (
            subscription,
            message_key,
            message_id,
            unique_id,
            trace_id,
            reason,
            error[:4000],
            payload,
            json.dumps(attributes),
        ),
    )


def record_from_topics(
    conn, subscriber, project: str, *, max_messages: int = 500, timeout: float = 5.0
) -> dict[str, int]:
    """Drain each subscription's ``-dlq--inspect`` subscription into ``dead_letters``; returns
    {subscription: recorded}. A message is acked only after its row is committed.

    The subscriptions are pulled side by side (the client is thread-safe): an empty pull waits
    out its ``timeout`` (the emulator answers an empty long poll only then), so pulling them one
    after another cost ``timeout`` per subscription on every run with nothing to record. Rows are
    written and acks sent from this thread, one subscription at a time."""
    paths = {
        sub.name: f"projects/{project}/subscriptions/{sub.dead_letter_subscription}"
        for sub in topology.SUBSCRIPTIONS
    }
    counts = dict.fromkeys(paths, 0)
    pending = set(paths)
    with ThreadPoolExecutor(max_workers=len(paths), thread_name_prefix="dgb-dlq") as pool:
        while pending:
            pulls = {name: pool.submit(_pull, subscriber, paths[name], timeout) for name in sorted(pending)}
            for name, pull in pulls.items():
                msgs = pull.result()
                if not msgs:
                    pending.discard(name)
                    continue
                counts[name] += _record_pulled(conn, name, msgs)
                subscriber.acknowledge(
                    request={"subscription": paths[name], "ack_ids": [m.ack_id for m in msgs]}
                )
                if counts[name] >= max_messages:
                    pending.discard(name)
    for sub in topology.SUBSCRIPTIONS:
        if counts[sub.name]:
            log.warning("dead letters recorded from %s: %d", sub.dead_letter_subscription, counts[sub.name])
    return counts


def _pull(subscriber, path: str, timeout: float) -> list:
    """One pull of up to 100 messages; an empty long poll (DeadlineExceeded) is no message."""
    from google.api_core import exceptions

    try:
        resp = subscriber.pull(request={"subscription": path, "max_messages": 100}, timeout=timeout)
    except exceptions.DeadlineExceeded:
        return []
    return list(resp.received_messages)


def _record_pulled(conn, subscription: str, msgs: list) -> int:
    """Write the pulled messages of one subscription in one transaction; returns how many were new
    (those our stages dead-lettered themselves, ``dgb_recorded=1``, are already in the table)."""
    recorded = 0
    with transaction(conn) as cur:
        for m in msgs:
            attrs = dict(m.message.attributes)
            if attrs.get("dgb_recorded") == "1":
                continue
            recorded += 1
            unique_id = attrs.get("unique_id") or None
            message_id = attrs.get("dgb_source_message_id") or m.message.message_id
            upsert(
                cur,
                subscription=subscription,
                message_key=unique_id or message_id,
                message_id=message_id,
                unique_id=unique_id,
                trace_id=attrs.get("trace_id"),
                reason=attrs.get("dgb_dead_letter_reason") or "pubsub_max_delivery_attempts",
                error="dead-lettered before reaching a stage",
                payload=m.message.data.decode("utf-8", "replace"),
                attributes=attrs,
            )
    return recorded
