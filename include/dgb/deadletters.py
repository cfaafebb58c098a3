"""Bring messages that reached a dead-letter topic outside our stages (rejected by the ack-mode
trigger, or dead-lettered by Pub/Sub's own policy in production) into ``dead_letters``, so an
operator sees every dead letter in one table and can redrive it.

Messages our stages dead-lettered themselves carry ``dgb_recorded=1`` (already in the table):
they are only acknowledged here.
"""

from __future__ import annotations

import json
import logging

from dgb import topology
from dgb.db import transaction

log = logging.getLogger(__name__)


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
                    cur.execute(
                        "INSERT INTO dead_letters (subscription, message_key, message_id, unique_id,"
                        " trace_id, reason, error, payload, attributes)"
                        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
                        " ON CONFLICT (subscription, message_key, reason) DO UPDATE SET last_seen = now(),"
                        " attempts = dead_letters.attempts + 1, status = 'open'",
                        (
                            sub.name,
                            unique_id or message_id,
                            message_id,
                            unique_id,
                            attrs.get("trace_id"),
                            reason,
                            "dead-lettered before reaching a stage",
                            m.message.data.decode("utf-8", "replace"),
                            json.dumps(attrs),
                        ),
                    )
            subscriber.acknowledge(request={"subscription": path, "ack_ids": [m.ack_id for m in msgs]})
        if recorded:
            log.warning("dead letters recorded from %s: %d", sub.dead_letter_subscription, recorded)
        counts[sub.name] = recorded
    return counts
