"""A Pub/Sub event trigger in Airflow 3.3's shared-stream ack mode.

The stock ``PubsubPullTrigger`` acknowledges a message before Airflow has stored the asset
event derived from it, so a triggerer crash in between loses the message. This trigger acks
on the broker only once the asset event is persisted:

* the producer (one per subscription per triggerer) long-polls the subscription and yields one
  raw event per message; each pulled batch is leased at once to a short deadline
  (``ack_deadline_s``, 60 s) that is extended in the background while its events await
  persistence, so after a crash Pub/Sub redelivers within that lease rather than after the
  subscription's own deadline (up to 600 s); pulling pauses while too many are outstanding;
* each trigger's filter turns a raw event into a ``TriggerEvent`` (-> an asset event), or
  rejects it when the message can never be processed: :func:`dgb.events.parse_message` refuses it
  for the subscription's topic (bad JSON, missing attributes or fields, unsupported
  ``event_version``);
* ``advance`` receives events once every subscriber moved past them and their asset events are
  stored: clean ones are acked; rejected ones are published to the subscription's dead-letter
  topic (with the reason) and then acked; failed ones are left to be redelivered after a
  backoff (their ack deadline is set to it: never a hot nack loop) and dead-lettered after
  ``max_failures``. ``advance`` never raises (a raise would stop the whole stream): broker
  errors are logged and Pub/Sub redelivers.

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
from collections.abc import AsyncIterator, Hashable, Sequence
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent
from airflow.triggers.shared_stream import AdvanceItem, SharedStreamProducer, reject_shared_stream_event

from dgb_airflow.hooks.pubsub import DgbPubSubAsyncHook

log = logging.getLogger(__name__)

TRIGGER_PATH = "dgb_airflow.triggers.pubsub.PubSubAckTrigger"


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
    :param max_outstanding: pulling pauses while this many messages await persistence.
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

    def __post_init__(self) -> None:
        if not self.project_id or not self.subscription:
            raise ValueError("PubSubStreamConfig needs a project_id and a subscription")
        if not 1 <= self.max_messages <= 1000:
            raise ValueError(f"max_messages must be 1..1000, got {self.max_messages}")
        if self.max_failures < 1 or self.max_outstanding < 1:
            raise ValueError("max_failures and max_outstanding must be at least 1")
        if not 10 <= self.ack_deadline_s <= 600:
            raise ValueError(f"ack_deadline_s must be 10..600 (Pub/Sub's range), got {self.ack_deadline_s}")
        if self.poll_timeout_s <= 0:
            raise ValueError(f"poll_timeout_s must be positive, got {self.poll_timeout_s}")

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


def raw_event(msg) -> dict:
    """A received Pub/Sub message as a JSON-serialisable raw event: the asset event payload whose
    contract is :class:`dgb.events.AssetPayload` (the stages read it back through that model)."""
    from dgb import events

    return events.AssetPayload.from_received(msg).model_dump()


class PubSubStreamProducer(SharedStreamProducer):
    """Broker side: pull, keep deadlines extended, ack / dead-letter / back off in ``advance``.

    :param config: the stream's configuration (one trigger's, shared by its group).
    :param hook: the async Pub/Sub hook (default: one for ``config``'s project and connection).
    """

    def __init__(self, config: PubSubStreamConfig, hook: DgbPubSubAsyncHook | None = None):
        self.config = config
        self.hook = hook or DgbPubSubAsyncHook(project_id=config.project_id, gcp_conn_id=config.gcp_conn_id)
        self.outstanding: dict[str, str] = {}  # ack_id -> message_id
        self.failures: dict[str, int] = {}  # message_id -> failed deliveries seen here
        self._extender: asyncio.Task | None = None

    # -- stream ----------------------------------------------------------------------------

    async def open_stream(self) -> AsyncIterator[tuple[Any, Any]]:
        from google.api_core import exceptions

        cfg = self.config
        await self.hook.get_clients()
        self._extender = asyncio.create_task(self._extend_deadlines())
        backoff = 1.0
        while True:
            if len(self.outstanding) >= cfg.max_outstanding:
                await asyncio.sleep(0.5)
                continue
            try:
                received = await self.hook.pull(
                    cfg.subscription, cfg.max_messages, timeout=cfg.poll_timeout_s
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
            if received:
                # lease the batch to our own short deadline at once: after a crash Pub/Sub
                # redelivers within ack_deadline_s, not the subscription's (up to 600 s)
                await self.hook.modify_ack_deadline(
                    cfg.subscription, [m.ack_id for m in received], cfg.ack_deadline_s
                )
            for msg in received:
                self.outstanding[msg.ack_id] = msg.message.message_id
                yield raw_event(msg), (msg.ack_id, msg)

    async def _extend_deadlines(self) -> None:
        cfg = self.config
        period = max(cfg.ack_deadline_s / 3, 1.0)
        while True:
            await asyncio.sleep(period)
            ack_ids = list(self.outstanding)
            if ack_ids:
                await self.hook.modify_ack_deadline(cfg.subscription, ack_ids, cfg.ack_deadline_s)

    async def _ack(self, ack_ids: list[str]) -> None:
        if not ack_ids:
            return
        try:
            await self.hook.acknowledge(self.config.subscription, ack_ids)
        except Exception as exc:
            log.warning(
                "pubsub ack of %d messages on %s failed: %s", len(ack_ids), self.config.subscription, exc
            )
        for ack_id in ack_ids:
            self.outstanding.pop(ack_id, None)

    async def _dead_letter(self, msg, reason: str) -> bool:
        cfg = self.config
        if cfg.dead_letter_topic is None:
            log.error(
                "message %s rejected (%s) but %s has no dead-letter topic; acking it",
                msg.message.message_id,
                reason,
                cfg.subscription,
            )
            return True
        attrs = dict(msg.message.attributes)
        attrs.update(
            {
                "dgb_dead_letter_reason": reason,
                "dgb_source_subscription": cfg.subscription,
                "dgb_source_message_id": msg.message.message_id,
            }
        )
        try:
            await self.hook.publish(cfg.dead_letter_topic, msg.message.data, attrs, timeout=30)
        except Exception as exc:
            log.warning("dead-letter publish for %s failed: %s", msg.message.message_id, exc)
            return False
        log.info(
            "message %s dead-lettered to %s: %s (trace_id=%s)",
            msg.message.message_id,
            cfg.dead_letter_topic,
            reason,
            attrs.get("trace_id"),
        )
        return True

    async def advance(self, batch: Sequence[AdvanceItem]) -> None:
        try:
            await self._advance(batch)
        except Exception:
            log.exception(
                "pubsub advance on %s failed; messages will be redelivered", self.config.subscription
            )

    async def _advance(self, batch: Sequence[AdvanceItem]) -> None:
        cfg = self.config
        to_ack: list[str] = []
        for item in batch:
            ack_id, msg = item.broker_payload
            outcome = item.outcome
            message_id = msg.message.message_id
            if outcome.rejected:
                attributes = dict(msg.message.attributes)
                reason = reject_reason(cfg.topic, msg.message.data, attributes) or "rejected"
                if await self._dead_letter(msg, reason):
                    to_ack.append(ack_id)
                continue
            if outcome.is_clean:
                to_ack.append(ack_id)
                self.failures.pop(message_id, None)
                continue
            # failed (ack timeout / persist never confirmed) or nobody was listening
            count = self.failures.get(message_id, 0) + 1
            self.failures[message_id] = count
            if count >= cfg.max_failures:
                if await self._dead_letter(msg, f"delivery_failed_{count}_times"):
                    to_ack.append(ack_id)
                    self.failures.pop(message_id, None)
                continue
            delay = min(600, 10 * 2 ** (count - 1))
            log.warning(
                "message %s not persisted (outcome %s); redelivery in %ss (failure %d/%d)",
                message_id,
                outcome,
                delay,
                count,
                cfg.max_failures,
            )
            self.outstanding.pop(ack_id, None)
            await self.hook.modify_ack_deadline(cfg.subscription, [ack_id], delay)
        await self._ack(to_ack)

    async def aclose(self) -> None:
        if self._extender:
            self._extender.cancel()
        await self.hook.close()


class PubSubAckTrigger(BaseEventTrigger):
    """Fires one asset event per Pub/Sub message, acking only after the event is stored.

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
            problem = reject_reason(topic, base64.b64decode(raw["data"]), raw["attributes"])
            if problem:
                log.warning(
                    "rejecting message %s on %s: %s", raw["message_id"], self.config.subscription, problem
                )
                reject_shared_stream_event()
                continue
            yield TriggerEvent(raw)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Not supported: the ack-mode trigger runs only as the triggerer's shared stream."""
        raise NotImplementedError("PubSubAckTrigger runs only as a shared stream (Airflow >= 3.3 triggerer)")
        yield  # pragma: no cover - an async generator, as BaseTrigger.run must be
