"""Transactional outbox: events are written in the same transaction as the rows they describe,
and a relay publishes them to Pub/Sub, marking each sent only after Pub/Sub confirmed it.

A row is in one of three states:

* **pending** (``published_at`` and ``failed_at`` NULL): waiting for the relay; a failed publish
  is retried with exponential backoff per row (``available_at``, ``attempts``, ``last_error``);
* **published** (``published_at``, ``message_id``): confirmed by Pub/Sub; deleted by
  :func:`purge_published` once older than the retention (``DGB_OUTBOX_RETENTION_DAYS``, 7 days);
* **failed** (``failed_at``, the error in ``last_error``): terminal. Pub/Sub refused the message
  for good (:func:`permanent_error`: too large, invalid attributes or argument, at once; topic not
  found or permission denied after :data:`NOT_FOUND_ATTEMPTS` attempts, time for a topic being
  created or a permission being granted). The relay never retries it; ``dgb status`` and the
  reconcile report count it, and reconciliation re-sends the article's event (bounded, then flags
  it). An operator re-queues rows after a fix with
  ``UPDATE outbox SET failed_at = NULL, available_at = now() WHERE failed_at IS NOT NULL AND ...``.

The relay never holds a row lock or an open transaction while it waits on Pub/Sub: it claims a
batch (one short transaction that moves the rows' ``available_at`` past the publish deadline, so
no other relay takes them), commits, publishes, then marks each row published, failed or due
again with backoff in a second short transaction. A relay that dies after its claim leaves the
rows to become due again when the claim lapses. Delivery is at-least-once (a crash between
publish and mark republishes); consumers dedup by the ``unique_id`` attribute.

Every row added also notifies the PostgreSQL channel :data:`CHANNEL` with its topic, in the same
statement: PostgreSQL delivers the notification when the writer's transaction commits (never for a
rolled-back one, once per topic per transaction), so a stage run waiting for work announced on that
topic sweeps at once instead of at its next poll (:mod:`dgb.pipeline.wakeup`).
"""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import dataclass, field

from dgb.config.messaging import outbox_retention_days
from dgb.db import transaction
from dgb.events import Event

log = logging.getLogger(__name__)

BACKOFF_BASE_S = 2.0
BACKOFF_MAX_S = 300.0
CLAIM_MARGIN_S = 60.0  # a claim outlives the publish deadline by this much
NOT_FOUND_ATTEMPTS = 5  # topic not found / permission denied: terminal at this attempt (~30 s of backoff)

# Pub/Sub's limits on one message (https://cloud.google.com/pubsub/quotas#resource_limits)
MAX_MESSAGE_BYTES = 10_000_000
MAX_ATTRIBUTES = 100
MAX_ATTRIBUTE_KEY_BYTES = 256
MAX_ATTRIBUTE_VALUE_BYTES = 1024

# outbox rows in each state, for every reader (status, reconciliation, integrity)
PENDING = "published_at IS NULL AND failed_at IS NULL"
FAILED = "failed_at IS NOT NULL"

CHANNEL = "dgb_outbox"  # LISTEN/NOTIFY channel: the topic of each committed outbox row


def enqueue(cur, event: Event) -> None:
    """Add ``event`` to the outbox using the caller's cursor (its transaction)."""
    enqueue_raw(cur, event.topic, event.unique_id, event.payload, event.attributes)


def enqueue_raw(cur, topic: str, aggregate_id: str, payload: dict, attributes: dict[str, str]) -> None:
    """Add any message (e.g. a dead letter for a subscription's dead-letter topic)."""
    cur.execute(
        "WITH added AS (INSERT INTO outbox (topic, aggregate_id, payload, attributes)"
        " VALUES (%s, %s, %s, %s) RETURNING topic)"
        f" SELECT pg_notify('{CHANNEL}', topic) FROM added",
        (
            topic,
            aggregate_id,
            json.dumps(payload, ensure_ascii=False, default=str),
            json.dumps({k: str(v) for k, v in attributes.items()}),
        ),
    )


@dataclass
class RelayResult:
    """What one relay did: ``failed`` publishes will be retried (backoff); ``terminal`` rows
    moved to the failed state and will not."""

    published: int = 0
    failed: int = 0
    terminal: int = 0
    errors: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        tail = f" (first error: {self.errors[0]})" if self.errors else ""
        return f"published={self.published} failed={self.failed} terminal={self.terminal}{tail}"


def pending_count(conn) -> int:
    with conn.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM outbox WHERE {PENDING}")
        return cur.fetchone()[0]


def failed_count(conn) -> int:
    with conn.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM outbox WHERE {FAILED}")
        return cur.fetchone()[0]


def message_problem(data: bytes, attributes: dict[str, str]) -> str | None:
    """Why Pub/Sub would refuse this message for good (checked before publishing), or None."""
    size = len(data) + sum(len(k.encode()) + len(v.encode()) for k, v in attributes.items())
    if size > MAX_MESSAGE_BYTES:
        return f"message_too_large: {size} bytes (Pub/Sub takes at most {MAX_MESSAGE_BYTES})"
    if len(attributes) > MAX_ATTRIBUTES:
        return f"invalid_attributes: {len(attributes)} attributes (at most {MAX_ATTRIBUTES})"
    for k, v in attributes.items():
        if not k or len(k.encode()) > MAX_ATTRIBUTE_KEY_BYTES or len(v.encode()) > MAX_ATTRIBUTE_VALUE_BYTES:
            return f"invalid_attributes: attribute {k[:40]!r} (key 1..256 bytes, value at most 1024)"
        if k.startswith("goog"):
            return f"invalid_attributes: attribute {k[:40]!r} (the goog prefix is reserved)"
    return None


def permanent_error(exc: BaseException, attempts: int) -> bool:
    """Whether a publish error will never go away by retrying: the message is too large or
    invalid (at once), or the topic is missing / not ours to publish to (once the row has had
    :data:`NOT_FOUND_ATTEMPTS` attempts, ``attempts`` counting this one)."""
    from google.api_core import exceptions
    from google.cloud.pubsub_v1.publisher.exceptions import MessageTooLargeError

    if isinstance(exc, MessageTooLargeError | exceptions.InvalidArgument | TypeError):
        return True
    if isinstance(exc, exceptions.NotFound | exceptions.PermissionDenied):
        return attempts >= NOT_FOUND_ATTEMPTS
    return False


def relay(
    conn, publisher, project: str, *, batch_size: int = 500, timeout: float = 30.0, max_batches: int = 20
) -> RelayResult:
    """Publish due outbox rows in creation order, ``batch_size`` at a time (claim, commit,
    publish, mark: see the module doc). ``timeout``: seconds one batch may wait on Pub/Sub in all.
    Stops after a batch with a retryable failure (Pub/Sub is struggling: the backoff takes over)."""
    result = RelayResult()
    for _ in range(max_batches):
        claimed, retry_later = _relay_batch(conn, publisher, project, batch_size, timeout, result)
        if claimed < batch_size or retry_later:
            break
    return result


def _claim(conn, batch_size: int, lease_s: float) -> list[tuple]:
    """Take up to ``batch_size`` due rows for one relay (their next attempt moved past the lease)
    and commit at once: no lock is held while publishing."""
    with transaction(conn) as cur:
        cur.execute(
            "WITH due AS (SELECT id FROM outbox"
            f" WHERE {PENDING} AND available_at <= clock_timestamp()"
            " ORDER BY created_at, id LIMIT %s FOR UPDATE SKIP LOCKED)"
            " UPDATE outbox o SET available_at = clock_timestamp() + make_interval(secs => %s)"
            " FROM due WHERE o.id = due.id"
            " RETURNING o.id, o.topic, o.payload, o.attributes, o.attempts, o.created_at",
            (batch_size, lease_s),
        )
        rows = cur.fetchall()
    rows.sort(key=lambda r: (r[5], str(r[0])))  # creation order (RETURNING keeps none)
    return [r[:5] for r in rows]


def _relay_batch(conn, publisher, project, batch_size, timeout, result: RelayResult) -> tuple[int, bool]:
    """One claimed batch; returns (rows claimed, whether a retryable failure happened)."""
    from google.api_core import retry as api_retry

    rows = _claim(conn, batch_size, timeout + CLAIM_MARGIN_S)
    if not rows:
        return 0, False
    publish_retry = api_retry.Retry(initial=0.2, maximum=2.0, multiplier=2.0, timeout=min(timeout, 20.0))
    deadline = time.monotonic() + timeout
    futures = []
    for row_id, topic, payload, attributes, attempts in rows:
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        attrs = {k: str(v) for k, v in (attributes or {}).items()}
        problem = message_problem(data, attrs)
        if problem:
            futures.append((row_id, attempts, problem))
            continue
        try:
            fut = publisher.publish(
                f"projects/{project}/topics/{topic}", data, retry=publish_retry, timeout=timeout, **attrs
            )
        except Exception as exc:
            fut = exc
        futures.append((row_id, attempts, fut))
    sent, retry, terminal = [], [], []
    for row_id, attempts, fut in futures:
        if isinstance(fut, str):
            terminal.append((row_id, fut))
            continue
        if not isinstance(fut, Exception):
            try:
                sent.append((row_id, fut.result(timeout=max(0.0, deadline - time.monotonic()))))
                continue
            except Exception as exc:
                fut = exc
        if permanent_error(fut, attempts + 1):
            terminal.append((row_id, f"{type(fut).__name__}: {fut}"))
        else:
            retry.append((row_id, attempts, fut))
    _mark(conn, sent, retry, terminal, result)
    result.published += len(sent)
    result.failed += len(retry)
    result.terminal += len(terminal)
    if retry:
        log.warning(
            "outbox relay: %d of %d events failed to publish, will retry with backoff: %s",
            len(retry),
            len(rows),
            result.errors[-1],
        )
    if terminal:
        log.error(
            "outbox relay: %d events refused for good, now in the failed state (first: %s)",
            len(terminal),
            terminal[0][1][:300],
        )
    return len(rows), bool(retry)


def _mark(conn, sent: list, retry: list, terminal: list, result: RelayResult) -> None:
    with transaction(conn) as cur:
        if sent:
            cur.execute(
                "UPDATE outbox o SET published_at = clock_timestamp(), message_id = v.mid,"
                " attempts = o.attempts + 1, last_error = NULL"
                " FROM unnest(%s::uuid[], %s::text[]) AS v(id, mid) WHERE o.id = v.id",
                ([str(r) for r, _ in sent], [m for _, m in sent]),
            )
        for row_id, attempts, exc in retry:
            delay = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2**attempts) * (0.5 + random.random() / 2)
            cur.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = %s,"
                " available_at = clock_timestamp() + make_interval(secs => %s) WHERE id = %s",
                (f"{type(exc).__name__}: {exc}"[:1000], delay, row_id),
            )
            result.errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
        for row_id, error in terminal:
            cur.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = %s, failed_at = clock_timestamp()"
                " WHERE id = %s",
                (error[:1000], row_id),
            )
            result.errors.append(error[:200])


def purge_published(
    conn, retention_days_: float | None = None, *, batch_size: int = 5000, max_batches: int = 20
) -> int:
    """Delete published rows older than the retention (default: ``DGB_OUTBOX_RETENTION_DAYS``), in
    batches of ``batch_size`` (short transactions); returns how many were deleted. Pending and
    failed rows are never purged."""
    days = outbox_retention_days() if retention_days_ is None else retention_days_
    if days <= 0:
        return 0
    deleted = 0
    for _ in range(max_batches):
        with transaction(conn) as cur:
            cur.execute(
                "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE published_at IS NOT NULL"
                " AND published_at < clock_timestamp() - make_interval(secs => %s) LIMIT %s)",
                (days * 86400.0, batch_size),
            )
            n = cur.rowcount
        deleted += n
        if n < batch_size:
            break
    if deleted:
        log.info("outbox: purged %d published rows older than %g days", deleted, days)
    return deleted
