"""Transactional outbox: events are written in the same transaction as the rows they describe,
and a relay publishes them to Pub/Sub, marking each sent only after Pub/Sub confirmed it.

Delivery is at-least-once (a crash between publish and commit republishes); consumers dedup
by the ``unique_id`` attribute. Failed publishes are retried with exponential backoff per row
(``available_at``); nothing is dropped.
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import dataclass, field

from dgb.db import transaction
from dgb.events import Event

log = logging.getLogger(__name__)

BACKOFF_BASE_S = 2.0
BACKOFF_MAX_S = 300.0


def enqueue(cur, event: Event) -> None:
    """Add ``event`` to the outbox using the caller's cursor (its transaction)."""
    enqueue_raw(cur, event.topic, event.unique_id, event.payload, event.attributes)


def enqueue_raw(cur, topic: str, aggregate_id: str, payload: dict, attributes: dict[str, str]) -> None:
    """Add any message (e.g. a dead letter for a subscription's dead-letter topic)."""
    cur.execute(
        "INSERT INTO outbox (topic, aggregate_id, payload, attributes) VALUES (%s, %s, %s, %s)",
        (
            topic,
            aggregate_id,
            json.dumps(payload, ensure_ascii=False, default=str),
            json.dumps({k: str(v) for k, v in attributes.items()}),
        ),
    )


@dataclass
class RelayResult:
    published: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        tail = f" (first error: {self.errors[0]})" if self.errors else ""
        return f"published={self.published} failed={self.failed}{tail}"


def pending_count(conn) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM outbox WHERE published_at IS NULL")
        return cur.fetchone()[0]


def relay(
    conn, publisher, project: str, *, batch_size: int = 500, timeout: float = 30.0, max_batches: int = 20
) -> RelayResult:
    """Publish due outbox rows in creation order, ``batch_size`` at a time.

    Rows are locked (FOR UPDATE SKIP LOCKED) for the duration of a batch, so several relays
    can run at once without publishing one row twice in the normal case.
    """
    result = RelayResult()
    for _ in range(max_batches):
        done = _relay_batch(conn, publisher, project, batch_size, timeout, result)
        if done < batch_size:
            break
    return result


def _relay_batch(conn, publisher, project, batch_size, timeout, result: RelayResult) -> int:
    from google.api_core import retry as api_retry

    with transaction(conn) as cur:
        cur.execute(
            "SELECT id, topic, payload, attributes, attempts FROM outbox"
            " WHERE published_at IS NULL AND available_at <= clock_timestamp()"
            " ORDER BY created_at, id LIMIT %s FOR UPDATE SKIP LOCKED",
            (batch_size,),
        )
        rows = cur.fetchall()
        if not rows:
            return 0
        publish_retry = api_retry.Retry(initial=0.2, maximum=2.0, multiplier=2.0, timeout=min(timeout, 20.0))
        futures = []
        for row_id, topic, payload, attributes, attempts in rows:
            data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
            attrs = {k: str(v) for k, v in (attributes or {}).items()}
            try:
                fut = publisher.publish(
                    f"projects/{project}/topics/{topic}", data, retry=publish_retry, timeout=timeout, **attrs
                )
            except Exception as exc:
                fut = exc
            futures.append((row_id, attempts, fut))
        sent, failed = [], []
        for row_id, attempts, fut in futures:
            if isinstance(fut, Exception):
                failed.append((row_id, attempts, fut))
                continue
            try:
                sent.append((row_id, fut.result(timeout=timeout)))
            except Exception as exc:
                failed.append((row_id, attempts, exc))
        if sent:
            cur.execute(
                "UPDATE outbox o SET published_at = clock_timestamp(), message_id = v.mid,"
                " attempts = o.attempts + 1, last_error = NULL"
                " FROM unnest(%s::uuid[], %s::text[]) AS v(id, mid) WHERE o.id = v.id",
                ([str(r) for r, _ in sent], [m for _, m in sent]),
            )
        for row_id, attempts, exc in failed:
            delay = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2**attempts) * (0.5 + random.random() / 2)
            cur.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = %s,"
                " available_at = clock_timestamp() + make_interval(secs => %s) WHERE id = %s",
                (f"{type(exc).__name__}: {exc}"[:1000], delay, row_id),
            )
            result.errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
        result.published += len(sent)
        result.failed += len(failed)
        if failed:
            log.warning(
                "outbox relay: %d of %d events failed to publish, will retry with backoff: %s",
                len(failed),
                len(rows),
                result.errors[-1],
            )
    return len(rows) if not failed else 0
