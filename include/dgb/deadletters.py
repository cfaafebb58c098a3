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
    {subscription: recorded}. A message is acked only after its row is committed."""
    from google.api_core import exceptions

    counts: dict[str, int] = {}
    for sub in topology.SUBSCRIPTIONS:
        path = f"projects/{project}/subscriptions/{sub.dead_letter_subscription}"
        recorded = 0
        while recorded < max_messages:
            try:
                resp = subscriber.pull(request={"subscription": path, "max_messages": 100}, timeout=timeout)
            except exceptions.DeadlineExceeded:
                break
            msgs = list(resp.received_messages)
            if not msgs:
                break
            with transaction(conn) as cur:
                for m in msgs:
                    attrs = dict(m.message.attributes)
                    if attrs.get("dgb_recorded") == "1":
                        continue
                    recorded += 1
                    unique_id = attrs.get("unique_id") or None
                    message_id = attrs.get("dgb_source_message_id") or m.message.message_id
                    reason = attrs.get("dgb_dead_letter_reason") or "pubsub_max_delivery_attempts"
                    upsert(
                        cur,
                        subscription=sub.name,
                        message_key=unique_id or message_id,
                        message_id=message_id,
                        unique_id=unique_id,
                        trace_id=attrs.get("trace_id"),
                        reason=reason,
                        error="dead-lettered before reaching a stage",
                        payload=m.message.data.decode("utf-8", "replace"),
                        attributes=attrs,
                    )
            subscriber.acknowledge(request={"subscription": path, "ack_ids": [m.ack_id for m in msgs]})
        if recorded:
            log.warning("dead letters recorded from %s: %d", sub.dead_letter_subscription, recorded)
        counts[sub.name] = recorded
    return counts
