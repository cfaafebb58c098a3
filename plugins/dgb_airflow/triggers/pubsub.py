"""A Pub/Sub event trigger in Airflow 3.3's shared-stream ack mode.

The stock ``PubsubPullTrigger`` acknowledges a message before Airflow has stored the asset
event derived from it, so a triggerer crash in between loses the message. This trigger acks
on the broker only once the asset event is persisted:

* the producer (one per subscription per triggerer) long-polls the subscription and yields one
  raw event per pulled batch (``{"messages": [...]}``, at most ``max_event_bytes`` of message
  data each: a bigger pull is split), so Airflow stores one asset event per batch, not per
  message (each stored asset event costs the triggerer several SQL statements: a 2,000-article
  backlog sends ~8,000 messages); each pulled batch is leased at once to a short deadline
  (``ack_deadline_s``, 60 s) that is extended in the background while its events await
  persistence, so after a crash Pub/Sub redelivers within that lease rather than after the
  subscription's own deadline (up to 600 s); a lease is extended for at most ``max_lease_s``
  (then Pub/Sub redelivers), and a pull never asks for more than ``max_outstanding`` minus what
  is already outstanding (the triggerer's subscriber queue must never overflow);
* a message bigger than ``max_message_bytes`` (data + attribute keys and values) is never
  yielded: it is dead-lettered at once with the reason ``message_too_large``, its body and
  attributes left out (only short identifying attributes are kept), so a hostile message is
  never copied into an asset event, the ``dead_letters`` table or the outbox;
* each trigger's filter turns a raw event into a ``TriggerEvent`` (-> an asset event) with the
  batch's valid messages, leaving out those that can never be processed
  (:func:`dgb.events.parse_message` refuses them for the subscription's topic: bad JSON, missing
  attributes or fields, unsupported ``event_version``); a batch with no valid message is rejected;
* ``advance`` receives events once every subscriber moved past them and their asset events are
  stored: the valid messages of clean ones are acked; the invalid ones, and every message of a
  rejected batch, are published to the subscription's dead-letter topic (with the reason) and
  then acked; the messages of failed ones are left to be redelivered after a
  backoff (their ack deadline is set to it: never a hot nack loop) and dead-lettered after
  ``max_failures``. Dead-letter publishes of one batch run concurrently, each bounded by
  ``dead_letter_timeout_s``; a failed one is not acked but released with a backoff, so Pub/Sub
  redelivers it and the dead-letter publish is tried again (never leased forever). Every message
  handed to ``advance`` stops being outstanding. ``advance`` never raises (a raise would stop the
  whole stream): broker errors are logged and Pub/Sub redelivers.

After a triggerer restart, messages pulled but not acked come back after their ack deadline;
the stages dedup by ``unique_id``, so redelivery is harmless.

The broker calls go through :class:`dgb_airflow.hooks.pubsub.DgbPubSubAsyncHook`; the trigger and
its producer share one serializable :class:`PubSubStreamConfig`. The trigger runs only as a
shared stream (``shared_stream_key`` is never None), so it has no stand-alone ``run()`` path.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Hashable, Sequence
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent
from airflow.triggers.shared_stream import AdvanceItem, SharedStreamProducer, reject_shared_stream_event

from dgb_airflow.heap import freeze_inherited_heap

if TYPE_CHECKING:
    from dgb_airflow.hooks.pubsub import DgbPubSubAsyncHook

log = logging.getLogger(__name__)

TRIGGER_PATH = "dgb_airflow.triggers.pubsub.PubSubAckTrigger"

# The triggerer's runner imports this module first of ours, right after it was forked: freeze
# what it inherited before the client libraries it imports next set off a full collection
# (dgb_airflow.heap: ~37 MiB of the idle triggerer).
freeze_inherited_heap()


@dataclasses.dataclass(frozen=True)
class PubSubStreamConfig:
    """What the trigger and its producer need, in the flat JSON form ``serialize`` stores.

    :param project_id: GCP project of the subscription and the dead-letter topic.
    :param subscription: subscription name (no ``projects/.../subscriptions/`` prefix), one of
        :mod:`dgb.topology`'s: its topic names the message contract the filter checks.
    :param gcp_conn_id: Airflow connection with the GCP credentials (unused against the emulator).
    :param max_messages: most messages per pull.
    :param dead_letter_topic: topic that rejected messages, and those failing ``max_failures``
        times, are published to before being acked; None: they are acked with an error logged.
    :param max_failures: failed deliveries of one message (counted in this triggerer) before it
        is dead-lettered.
    :param ack_deadline_s: lease of a pulled message, renewed every third of it while the
        message awaits persistence; after a crash Pub/Sub redelivers within it.
    :param poll_timeout_s: how long one long poll may wait for messages.
    :param max_outstanding: most messages awaiting persistence at once: a pull asks for at most
        the difference, and pauses at the limit. Keep it below the triggerer's
        ``[triggerer] shared_stream_subscriber_queue_size`` (1024): a subscriber whose queue
        overflows is failed.
    :param max_lease_s: longest a pulled message is kept leased (its deadline extended) while it
        awaits persistence; past it the lease lapses and Pub/Sub redelivers. Above the
        triggerer's ``shared_stream_ack_timeout`` (300 s), which fails the event first.
    :param max_message_bytes: largest message accepted (data plus attribute keys and values,
        UTF-8); a bigger one is dead-lettered as ``message_too_large`` without its content.
    :param dead_letter_timeout_s: seconds one dead-letter publish may take.
    :param max_event_bytes: most message bytes (as :func:`message_size` counts them) in one raw
        event, so one asset event: a pull over it is split into several events.
    :param gather_s: in a burst (the last pull brought messages), seconds to wait before the
        next pull, so that one event carries what arrived meanwhile (0: pull again at once). The
        first message after a quiet spell is pulled and yielded at once; within a burst a stage
        run already running takes new work from PostgreSQL itself (it goes on sweeping after
        its own work), so the events only start runs: fewer, fuller events cost the triggerer
        and the scheduler less (a 2,000-article backlog: ~80 events per subscription at 0).
    """

    project_id: str
    subscription: str
    gcp_conn_id: str = "google_cloud_default"
    max_messages: int = 100
    dead_letter_topic: str | None = None
    max_failures: int = 5
    ack_deadline_s: int = 60
    poll_timeout_s: float = 10.0
    max_outstanding: int = 1000
    max_lease_s: int = 900
    max_message_bytes: int = 65536
    dead_letter_timeout_s: float = 5.0
    max_event_bytes: int = 1_048_576
    gather_s: float = 1.5

    def __post_init__(self) -> None:
        if not self.project_id or not self.subscription:
            raise ValueError("PubSubStreamConfig needs a project_id and a subscription")
        if not 1 <= self.max_messages <= 1000:
            raise ValueError(f"max_messages must be 1..1000, got {self.max_messages}")
        if self.max_failures < 1 or self.max_outstanding < 1:
            raise ValueError("max_failures and max_outstanding must be at least 1")
        if not 10 <= self.ack_deadline_s <= 600:
            raise ValueError(f"ack_deadline_s must be 10..600 (Pub/Sub's range), got {self.ack_deadline_s}")
        if self.poll_timeout_s <= 0 or self.dead_letter_timeout_s <= 0:
            raise ValueError("poll_timeout_s and dead_letter_timeout_s must be positive")
        if not 0 <= self.gather_s <= 60:
            raise ValueError(f"gather_s must be 0..60 seconds, got {self.gather_s}")
        if self.max_lease_s < self.ack_deadline_s:
            raise ValueError(f"max_lease_s ({self.max_lease_s}) must be at least ack_deadline_s")
        if self.max_message_bytes < 1024:
            raise ValueError(f"max_message_bytes must be at least 1024, got {self.max_message_bytes}")
        if self.max_event_bytes < self.max_message_bytes:
            raise ValueError(
                f"max_event_bytes ({self.max_event_bytes}) must be at least max_message_bytes"
                f" ({self.max_message_bytes})"
            )

    @classmethod
    def field_names(cls) -> frozenset[str]:
        return frozenset(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> PubSubStreamConfig:
        """The config in ``kwargs`` (a ``serialize`` dict); other keys are ignored."""
        return cls(**{k: v for k, v in kwargs.items() if k in cls.field_names()})

    def to_kwargs(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def topic(self) -> str:
        """The topic the subscription reads (its message contract)."""
        from dgb import topology

        return topology.subscription(self.subscription).topic


def reject_reason(topic: str, data: bytes, attributes: dict[str, str]) -> str | None:
    """Why a message can never be processed (its dead-letter reason), or None if it is valid.

    The contract is :func:`dgb.events.parse_message`'s, the one the stages apply.
    """
    from dgb import events

    try:
        events.parse_message(topic, data, attributes)
    except events.InvalidEvent as exc:
        return exc.reason
    return None


def message_size(msg) -> int:
    """Bytes of a received message as the size cap counts them: data plus every attribute key
    and value (UTF-8)."""
    m = msg.message
    return len(m.data) + sum(len(k.encode()) + len(v.encode()) for k, v in m.attributes.items())


# attributes kept on the dead letter of a message too large to copy (each only if this short)
KEPT_ATTRIBUTES = ("unique_id", "trace_id", "event_version", "event_type")
KEPT_ATTRIBUTE_MAX = 256
MAX_TRACKED_FAILURES = 10_000  # message ids whose failed deliveries are remembered (oldest forgotten)


def raw_event(msg) -> dict:
    """A received Pub/Sub message as a JSON-serialisable dict: the contract of
    :class:`dgb.events.AssetPayload` (the stages read it back through that model)."""
    from dgb import events

    return events.AssetPayload.from_received(msg).model_dump()


def raw_batch(msgs) -> dict:
    """Received messages as one raw event: ``{"messages": [raw_event(m), ...]}``."""
    return {"messages": [raw_event(m) for m in msgs]}


def event_groups(accepted: list[tuple[Any, int]], max_bytes: int) -> list[list[Any]]:
    """``(msg, size)`` in pull order, grouped so that no group's sizes add up to more than
    ``max_bytes`` (a single message never does: it is below the message size cap)."""
    groups: list[list[Any]] = []
    group: list[Any] = []
    total = 0
    for msg, size in accepted:
        if group and total + size > max_bytes:
            groups.append(group)
            group, total = [], 0
        group.append(msg)
        total += size
    if group:
        groups.append(group)
    return groups


def redelivery_delay(count: int) -> int:
    """Seconds until a message released after its ``count``-th failure comes back (10 s doubling,
    at most 600 s: Pub/Sub's largest ack deadline)."""
    return min(600, 10 * 2 ** max(0, count - 1))


@dataclasses.dataclass
class Lease:
    """A pulled message awaiting its advance: what the deadline extender needs."""

    message_id: str
    pulled_at: float  # time.monotonic()


class PubSubStreamProducer(SharedStreamProducer):
    """Broker side: pull, keep deadlines extended, ack / dead-letter / back off in ``advance``.

    :param config: the stream's configuration (one trigger's, shared by its group).
    :param hook: the async Pub/Sub hook (default: one for ``config``'s project and connection).
    """

    def __init__(self, config: PubSubStreamConfig, hook: DgbPubSubAsyncHook | None = None):
        # imported here, not at module level: every stage task parses the DAG file that imports this
        # module, and the Google provider behind the hook costs it about a second on a loaded machine
        from dgb_airflow.hooks.pubsub import DgbPubSubAsyncHook

        self.config = config
        self.hook = hook or DgbPubSubAsyncHook(project_id=config.project_id, gcp_conn_id=config.gcp_conn_id)
        self.outstanding: dict[str, Lease] = {}  # ack_id -> lease, until the message is advanced
        # message_id -> failed deliveries (or failed dead-letter publishes) seen here; bounded
        self.failures: OrderedDict[str, int] = OrderedDict()
        self._extender: asyncio.Task | None = None
        self._dead_letter_slots = asyncio.Semaphore(32)

    # -- stream ----------------------------------------------------------------------------

    async def open_stream(self) -> AsyncIterator[tuple[Any, Any]]:
        from google.api_core import exceptions

        cfg = self.config
        await self.hook.get_clients()
        self._extender = asyncio.create_task(self._extend_deadlines())
        backoff = 1.0
        burst = False  # the last pull brought messages
        while True:
            if burst and cfg.gather_s:
                await asyncio.sleep(cfg.gather_s)  # let the burst fill the next pull
                burst = False
            room = cfg.max_outstanding - len(self.outstanding)
            if room <= 0:
                await asyncio.sleep(0.5)
                continue
            try:
                received = await self.hook.pull(
                    cfg.subscription, min(cfg.max_messages, room), timeout=cfg.poll_timeout_s
                )
                backoff = 1.0
            except exceptions.DeadlineExceeded:
                continue  # an empty long poll (the emulator answers only at the timeout)
            except (
                exceptions.ServiceUnavailable,
                exceptions.InternalServerError,
                exceptions.Unknown,
                exceptions.Aborted,
                exceptions.ResourceExhausted,
            ) as exc:
                log.warning(
                    "pubsub pull from %s failed (%s); retrying in %.0fs", cfg.subscription, exc, backoff
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
                continue
            if not received:
                continue
            burst = True
            # lease the batch to our own short deadline at once: after a crash Pub/Sub
            # redelivers within ack_deadline_s, not the subscription's (up to 600 s)
            await self.hook.modify_ack_deadline(
                cfg.subscription, [m.ack_id for m in received], cfg.ack_deadline_s
            )
            accepted, too_large = [], []
            for msg in received:
                size = message_size(msg)
                (too_large if size > cfg.max_message_bytes else accepted).append((msg, size))
            if too_large:
                await self._settle_dead_letters([(m, "message_too_large", size) for m, size in too_large])
            now = time.monotonic()
            for msg, _size in accepted:
                self.outstanding[msg.ack_id] = Lease(msg.message.message_id, now)
            for group in event_groups(accepted, cfg.max_event_bytes):
                yield raw_batch(group), [(msg.ack_id, msg) for msg in group]

    async def _extend_deadlines(self) -> None:
        cfg = self.config
        period = max(cfg.ack_deadline_s / 3, 1.0)
        while True:
            await asyncio.sleep(period)
            self.release_expired_leases()
            ack_ids = list(self.outstanding)
            if ack_ids:
                failed = await self.hook.modify_ack_deadline(cfg.subscription, ack_ids, cfg.ack_deadline_s)
                if failed:
                    log.warning(
                        "pubsub: %d of %d leases on %s could not be extended (Pub/Sub will redeliver them)",
                        len(failed),
                        len(ack_ids),
                        cfg.subscription,
                    )

    def release_expired_leases(self, now: float | None = None) -> list[str]:
        """Stop extending (and stop counting as outstanding) messages leased for longer than
        ``max_lease_s``: their lease lapses and Pub/Sub redelivers them. Returns their ack ids."""
        now = time.monotonic() if now is None else now
        cut = now - self.config.max_lease_s
        expired = [ack_id for ack_id, lease in self.outstanding.items() if lease.pulled_at < cut]
        for ack_id in expired:
            del self.outstanding[ack_id]
        if expired:
            log.warning(
                "pubsub: %d messages on %s leased for over %ss without an advance; letting Pub/Sub redeliver",
                len(expired),
                self.config.subscription,
                self.config.max_lease_s,
            )
        return expired

    def _count_failure(self, message_id: str) -> int:
        count = self.failures.pop(message_id, 0) + 1
        self.failures[message_id] = count
        while len(self.failures) > MAX_TRACKED_FAILURES:
            self.failures.popitem(last=False)
        return count

    async def _ack(self, ack_ids: list[str]) -> None:
        if not ack_ids:
            return
        failed = await self.hook.acknowledge(self.config.subscription, ack_ids)
        if failed:
            log.warning(
                "pubsub ack of %d of %d messages on %s failed (Pub/Sub will redeliver them)",
                len(failed),
                len(ack_ids),
                self.config.subscription,
            )

    def _dead_letter_message(self, msg, reason: str, size: int | None) -> tuple[bytes, dict[str, str]]:
        """Body and attributes of the dead letter of ``msg``: the message as it was, or, when it
        is too large to copy, no body and only its short identifying attributes."""
        cfg = self.config
        original = dict(msg.message.attributes)
        if reason == "message_too_large":
            data = b""
            attrs = {
                k: original[k]
                for k in KEPT_ATTRIBUTES
                if k in original and len(original[k].encode()) <= KEPT_ATTRIBUTE_MAX
            }
            attrs["dgb_original_bytes"] = str(size if size is not None else message_size(msg))
        else:
            data, attrs = msg.message.data, original
        attrs.update(
            {
                "dgb_dead_letter_reason": reason,
                "dgb_source_subscription": cfg.subscription,
                "dgb_source_message_id": msg.message.message_id,
            }
        )
        return data, attrs

    async def _dead_letter(self, msg, reason: str, size: int | None = None) -> bool:
        """Publish one dead letter (bounded by ``dead_letter_timeout_s``); True when it is safe to ack."""
        cfg = self.config
        if cfg.dead_letter_topic is None:
            log.error(
                "message %s rejected (%s) but %s has no dead-letter topic; acking it",
                msg.message.message_id,
                reason,
                cfg.subscription,
            )
            return True
        data, attrs = self._dead_letter_message(msg, reason, size)
        timeout = cfg.dead_letter_timeout_s
        try:
            async with self._dead_letter_slots:
                await asyncio.wait_for(
                    self.hook.publish(cfg.dead_letter_topic, data, attrs, timeout=timeout), timeout + 1.0
                )
        except Exception as exc:
            log.warning(
                "dead-letter publish for %s failed (%s: %s); releasing it for redelivery",
                msg.message.message_id,
                type(exc).__name__,
                exc,
            )
            return False
        log.info(
            "message %s dead-lettered to %s: %s (trace_id=%s)",
            msg.message.message_id,
            cfg.dead_letter_topic,
            reason,
            attrs.get("trace_id"),
        )
        return True

    async def _settle_dead_letters(self, letters: list[tuple[Any, str, int | None]]) -> None:
        """Dead-letter ``(msg, reason, size)`` concurrently; ack the published ones, release the
        others with a backoff so Pub/Sub redelivers them (and the publish is tried again)."""
        if not letters:
            return
        done = await asyncio.gather(*(self._dead_letter(m, r, size) for m, r, size in letters))
        to_ack = []
        for (msg, _reason, _size), ok in zip(letters, done):
            self.outstanding.pop(msg.ack_id, None)
            if ok:
                to_ack.append(msg.ack_id)
                self.failures.pop(msg.message.message_id, None)
            else:
                await self._release(msg.ack_id, redelivery_delay(self._count_failure(msg.message.message_id)))
        await self._ack(to_ack)

    async def _release(self, ack_id: str, delay: int) -> None:
        """Give a message back to Pub/Sub, redelivered after ``delay`` s (never 0: a hot loop)."""
        self.outstanding.pop(ack_id, None)
        await self.hook.modify_ack_deadline(self.config.subscription, [ack_id], delay)

    async def advance(self, batch: Sequence[AdvanceItem]) -> None:
        try:
            await self._advance(batch)
        except Exception:
            log.exception(
                "pubsub advance on %s failed; messages will be redelivered", self.config.subscription
            )
        finally:
            for item in batch:  # advanced: never extended again, whatever happened above
                for ack_id, _msg in item.broker_payload:
                    self.outstanding.pop(ack_id, None)

    async def _advance(self, batch: Sequence[AdvanceItem]) -> None:
        cfg = self.config
        to_ack: list[str] = []
        letters: list[tuple[Any, str, int | None]] = []
        for item in batch:
            outcome = item.outcome
            for ack_id, msg in item.broker_payload:
                message_id = msg.message.message_id
                if outcome.rejected or outcome.is_clean:
                    # a clean batch's event left its invalid messages out: they are dead-lettered
                    # like every message of a rejected batch (each with its own reason)
                    reason = reject_reason(cfg.topic, msg.message.data, dict(msg.message.attributes))
                    if reason or outcome.rejected:
                        letters.append((msg, reason or "rejected", None))
                    else:
                        to_ack.append(ack_id)
                        self.failures.pop(message_id, None)
                    continue
                await self._failed(ack_id, msg, outcome, letters)
        await self._ack(to_ack)
        await self._settle_dead_letters(letters)

    async def _failed(self, ack_id: str, msg, outcome, letters: list) -> None:
        """A message whose event was not persisted: released for redelivery after a backoff, or
        dead-lettered (added to ``letters``) once it failed ``max_failures`` times."""
        cfg = self.config
        message_id = msg.message.message_id
        # failed (ack timeout / persist never confirmed) or nobody was listening
        count = self._count_failure(message_id)
        if count >= cfg.max_failures:
            letters.append((msg, f"delivery_failed_{count}_times", None))
            return
        delay = redelivery_delay(count)
        log.warning(
            "message %s not persisted (outcome %s); redelivery in %ss (failure %d/%d)",
            message_id,
            outcome,
            delay,
            count,
            cfg.max_failures,
        )
        await self._release(ack_id, delay)

    async def aclose(self) -> None:
        if self._extender:
            self._extender.cancel()
        await self.hook.close()


class MessageBatchEvent(TriggerEvent):
    """The event of one pulled batch: a plain ``TriggerEvent`` on the wire (it serializes as one,
    and the triggerer's supervisor reads it back as one) with a short ``repr``.

    The triggerer's runner logs every event it yields as its ``repr``, and a batch of 100 messages
    (payloads and attributes) makes a ~70 KB line. That line travels over the runner's log socket,
    which the supervisor reads 4 KB at a time, and each read is one turn of the supervisor's loop,
    each turn ~18 metadata-database queries (loading and cleaning triggers): in a backlog that cost
    the triggerer more CPU than anything else. The log keeps what identifies the batch."""

    def __repr__(self) -> str:
        messages = (self.payload.get("messages") if isinstance(self.payload, dict) else None) or []
        if not messages:
            return "TriggerEvent<no messages>"
        first, last = messages[0].get("message_id"), messages[-1].get("message_id")
        return f"TriggerEvent<{len(messages)} message(s), ids {first}..{last}>"


class PubSubAckTrigger(BaseEventTrigger):
    """Fires one asset event per pulled batch of Pub/Sub messages (its valid ones), acking them
    only after the event is stored.

    Takes the fields of :class:`PubSubStreamConfig` as keywords (``project_id`` and
    ``subscription`` required; see there for each one) and stores them flat in ``serialize``.

    :param kwargs: the :class:`PubSubStreamConfig` fields, and ``BaseEventTrigger``'s own.
    """

    def __init__(self, **kwargs: Any):
        names = PubSubStreamConfig.field_names()
        self.config = PubSubStreamConfig(**{k: kwargs.pop(k) for k in list(kwargs) if k in names})
        super().__init__(**kwargs)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return TRIGGER_PATH, self.config.to_kwargs()

    def shared_stream_key(self) -> Hashable | None:
        return ("dgb-pubsub", self.config.project_id, self.config.subscription)

    @classmethod
    def create_shared_stream_producer(cls, kwargs: dict[str, Any]) -> PubSubStreamProducer:
        return PubSubStreamProducer(PubSubStreamConfig.from_kwargs(kwargs))

    async def filter_shared_stream(self, shared_stream: AsyncIterator[Any]) -> AsyncIterator[TriggerEvent]:
        topic = self.config.topic
        async for raw in shared_stream:
            valid = []
            for message in raw["messages"]:
                problem = reject_reason(topic, base64.b64decode(message["data"]), message["attributes"])
                if problem:
                    log.warning(
                        "rejecting message %s on %s: %s",
                        message["message_id"],
                        self.config.subscription,
                        problem,
                    )
                else:
                    valid.append(message)
            if not valid:
                reject_shared_stream_event()
                continue
            yield MessageBatchEvent({"messages": valid})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Not supported: the ack-mode trigger runs only as the triggerer's shared stream."""
        raise NotImplementedError("PubSubAckTrigger runs only as a shared stream (Airflow >= 3.3 triggerer)")
        yield  # pragma: no cover - an async generator, as BaseTrigger.run must be
