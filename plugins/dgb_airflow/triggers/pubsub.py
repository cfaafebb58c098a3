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
  rejects it when the message can never be processed (bad JSON, missing attributes,
  unsupported ``event_version``);
* ``advance`` receives events once every subscriber moved past them and their asset events are
  stored: clean ones are acked; rejected ones are published to the subscription's dead-letter
  topic (with the reason) and then acked; failed ones are left to be redelivered after a
  backoff (their ack deadline is set to it: never a hot nack loop) and dead-lettered after
  ``max_failures``. ``advance`` never raises (a raise would stop the whole stream): broker
  errors are logged and Pub/Sub redelivers.

After a triggerer restart, messages pulled but not acked come back after their ack deadline;
the stages dedup by ``unique_id``, so redelivery is harmless.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Hashable, Sequence
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

try:  # Airflow >= 3.3
    from airflow.triggers.shared_stream import AdvanceItem, SharedStreamProducer, reject_shared_stream_event
except ImportError:  # pragma: no cover - older Airflow: the trigger still runs (at-most-once) via run()
    SharedStreamProducer = object  # type: ignore[assignment,misc]
    AdvanceItem = Any  # type: ignore[assignment,misc]

    def reject_shared_stream_event() -> None:  # type: ignore[misc]
        return None

log = logging.getLogger(__name__)

TRIGGER_PATH = "dgb_airflow.triggers.pubsub.PubSubAckTrigger"


def message_problem(data: bytes, attributes: dict[str, str]) -> str | None:
    """Why a message can never be processed (a dead-letter reason), or None if it looks valid.

    Only structural checks, shared with the stages: a JSON object payload with a ``unique_id``,
    the required attributes and a supported ``event_version``.
    """
    from dgb import events

    missing = [a for a in events.REQUIRED_ATTRIBUTES if not attributes.get(a)]
    if missing:
        return "missing_attributes"
    if attributes["event_version"] not in events.SUPPORTED_VERSIONS:
        return "unsupported_version"
    try:
        import json

        payload = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return "malformed_json"
    if not isinstance(payload, dict) or not isinstance(payload.get("unique_id"), str) or not payload["unique_id"]:
        return "malformed_payload"
    return None


def raw_event(msg) -> dict:
    """A received Pub/Sub message as a JSON-serialisable raw event (also the asset event payload)."""
    m = msg.message
    return {
        "message_id": m.message_id,
        "data": base64.b64encode(m.data).decode("ascii"),
        "attributes": dict(m.attributes),
        "publish_time": m.publish_time.isoformat() if m.publish_time else None,
        "delivery_attempt": msg.delivery_attempt or 0,
    }


class PubSubStreamProducer(SharedStreamProducer):
    """Broker side: pull, keep deadlines extended, ack / dead-letter / back off in ``advance``."""

    def __init__(self, *, project_id: str, subscription: str, gcp_conn_id: str = "google_cloud_default",
                 max_messages: int = 100, dead_letter_topic: str | None = None, max_failures: int = 5,
                 ack_deadline_s: int = 60, poll_timeout_s: float = 10.0, max_outstanding: int = 1000,
                 **_ignored: Any):
        self.project_id = project_id
        self.subscription = subscription
        self.sub_path = f"projects/{project_id}/subscriptions/{subscription}"
        self.dlq_path = f"projects/{project_id}/topics/{dead_letter_topic}" if dead_letter_topic else None
        self.gcp_conn_id = gcp_conn_id
        self.max_messages = max_messages
        self.max_failures = max_failures
        self.ack_deadline_s = ack_deadline_s
        self.poll_timeout_s = poll_timeout_s
        self.max_outstanding = max_outstanding
        self.outstanding: dict[str, str] = {}     # ack_id -> message_id
        self.failures: dict[str, int] = {}        # message_id -> failed deliveries seen here
        self._subscriber = None
        self._publisher = None
        self._extender: asyncio.Task | None = None

    # -- clients ---------------------------------------------------------------------------

    def _credentials(self):
        """Blocking (~1 s for real GCP auth): called off the event loop. None for the emulator."""
        if os.environ.get("PUBSUB_EMULATOR_HOST"):
            return None
        from airflow.providers.google.cloud.hooks.pubsub import PubSubHook

        return PubSubHook(gcp_conn_id=self.gcp_conn_id).get_credentials()

    def _make_clients(self, credentials):
        """Create the async clients ON the event loop (grpc.aio channels bind to it)."""
        from google.pubsub_v1.services.publisher import PublisherAsyncClient
        from google.pubsub_v1.services.subscriber import SubscriberAsyncClient

        emulator = os.environ.get("PUBSUB_EMULATOR_HOST")
        if emulator:
            import grpc
            from google.pubsub_v1.services.publisher.transports import PublisherGrpcAsyncIOTransport
            from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcAsyncIOTransport

            return (SubscriberAsyncClient(transport=SubscriberGrpcAsyncIOTransport(
                        channel=grpc.aio.insecure_channel(emulator))),
                    PublisherAsyncClient(transport=PublisherGrpcAsyncIOTransport(
                        channel=grpc.aio.insecure_channel(emulator))))
        return SubscriberAsyncClient(credentials=credentials), PublisherAsyncClient(credentials=credentials)

    # -- stream ----------------------------------------------------------------------------

    async def open_stream(self) -> AsyncIterator[tuple[Any, Any]]:
        from google.api_core import exceptions

        credentials = await asyncio.to_thread(self._credentials)
        self._subscriber, self._publisher = self._make_clients(credentials)
        self._extender = asyncio.create_task(self._extend_deadlines())
        backoff = 1.0
        while True:
            if len(self.outstanding) >= self.max_outstanding:
                await asyncio.sleep(0.5)
                continue
            try:
                resp = await self._subscriber.pull(
                    request={"subscription": self.sub_path, "max_messages": self.max_messages},
                    timeout=self.poll_timeout_s,
                )
                backoff = 1.0
            except exceptions.DeadlineExceeded:
                continue  # an empty long poll (the emulator answers only at the timeout)
            except (exceptions.ServiceUnavailable, exceptions.InternalServerError, exceptions.Unknown,
                    exceptions.Aborted, exceptions.ResourceExhausted) as exc:
                log.warning("pubsub pull from %s failed (%s); retrying in %.0fs", self.subscription, exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
                continue
            if resp.received_messages:
                # lease the batch to our own short deadline at once: after a crash Pub/Sub
                # redelivers within ack_deadline_s, not the subscription's (up to 600 s)
                await self._modify([m.ack_id for m in resp.received_messages], self.ack_deadline_s)
            for msg in resp.received_messages:
                self.outstanding[msg.ack_id] = msg.message.message_id
                yield raw_event(msg), (msg.ack_id, msg)

    async def _extend_deadlines(self) -> None:
        period = max(self.ack_deadline_s / 3, 1.0)
        while True:
            await asyncio.sleep(period)
            ack_ids = list(self.outstanding)
            if ack_ids:
                await self._modify(ack_ids, self.ack_deadline_s)

    async def _modify(self, ack_ids: list[str], seconds: int) -> None:
        """Set ack deadlines; one bad id fails a whole request on the emulator, so fall back per id."""
        try:
            await self._subscriber.modify_ack_deadline(request={
                "subscription": self.sub_path, "ack_ids": ack_ids, "ack_deadline_seconds": seconds})
        except Exception:  # noqa: BLE001
            for ack_id in ack_ids:
                with contextlib.suppress(Exception):
                    await self._subscriber.modify_ack_deadline(request={
                        "subscription": self.sub_path, "ack_ids": [ack_id], "ack_deadline_seconds": seconds})

    async def _ack(self, ack_ids: list[str]) -> None:
        if not ack_ids:
            return
        try:
            await self._subscriber.acknowledge(request={"subscription": self.sub_path, "ack_ids": ack_ids})
        except Exception as exc:  # noqa: BLE001 - the broker redelivers; stages are idempotent
            log.warning("pubsub ack of %d messages on %s failed: %s", len(ack_ids), self.subscription, exc)
        for ack_id in ack_ids:
            self.outstanding.pop(ack_id, None)

    async def _dead_letter(self, msg, reason: str) -> bool:
        if self.dlq_path is None:
            log.error("message %s rejected (%s) but %s has no dead-letter topic; acking it",
                      msg.message.message_id, reason, self.subscription)
            return True
        attrs = dict(msg.message.attributes)
        attrs.update({"dgb_dead_letter_reason": reason, "dgb_source_subscription": self.subscription,
                      "dgb_source_message_id": msg.message.message_id})
        try:
            await self._publisher.publish(topic=self.dlq_path, messages=[{"data": msg.message.data,
                                                                           "attributes": attrs}], timeout=30)
        except Exception as exc:  # noqa: BLE001 - not acked: it comes back and is dead-lettered again
            log.warning("dead-letter publish for %s failed: %s", msg.message.message_id, exc)
            return False
        log.info("message %s dead-lettered to %s: %s (trace_id=%s)", msg.message.message_id, self.dlq_path,
                 reason, attrs.get("trace_id"))
        return True

    async def advance(self, batch: Sequence[AdvanceItem]) -> None:
        try:
            await self._advance(batch)
        except Exception:  # noqa: BLE001 - never stop the shared stream; Pub/Sub redelivers
            log.exception("pubsub advance on %s failed; messages will be redelivered", self.subscription)

    async def _advance(self, batch: Sequence[AdvanceItem]) -> None:
        to_ack: list[str] = []
        for item in batch:
            ack_id, msg = item.broker_payload
            outcome = item.outcome
            message_id = msg.message.message_id
            if outcome.rejected:
                reason = message_problem(msg.message.data, dict(msg.message.attributes)) or "rejected"
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
            if count >= self.max_failures:
                if await self._dead_letter(msg, f"delivery_failed_{count}_times"):
                    to_ack.append(ack_id)
                    self.failures.pop(message_id, None)
                continue
            delay = min(600, 10 * 2 ** (count - 1))
            log.warning("message %s not persisted (outcome %s); redelivery in %ss (failure %d/%d)",
                        message_id, outcome, delay, count, self.max_failures)
            self.outstanding.pop(ack_id, None)
            await self._modify([ack_id], delay)
        await self._ack(to_ack)

    async def aclose(self) -> None:
        if self._extender:
            self._extender.cancel()
        for client in (self._subscriber, self._publisher):
            transport = getattr(client, "transport", None)
            with contextlib.suppress(Exception):
                await transport.close()


class PubSubAckTrigger(BaseEventTrigger):
    """Fires one asset event per Pub/Sub message, acking only after the event is stored."""

    def __init__(self, *, project_id: str, subscription: str, gcp_conn_id: str = "google_cloud_default",
                 max_messages: int = 100, dead_letter_topic: str | None = None, max_failures: int = 5,
                 ack_deadline_s: int = 60, poll_timeout_s: float = 10.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.project_id = project_id
        self.subscription = subscription
        self.gcp_conn_id = gcp_conn_id
        self.max_messages = max_messages
        self.dead_letter_topic = dead_letter_topic
        self.max_failures = max_failures
        self.ack_deadline_s = ack_deadline_s
        self.poll_timeout_s = poll_timeout_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return TRIGGER_PATH, {
            "project_id": self.project_id, "subscription": self.subscription, "gcp_conn_id": self.gcp_conn_id,
            "max_messages": self.max_messages, "dead_letter_topic": self.dead_letter_topic,
            "max_failures": self.max_failures, "ack_deadline_s": self.ack_deadline_s,
            "poll_timeout_s": self.poll_timeout_s,
        }

    def shared_stream_key(self) -> Hashable | None:
        return ("dgb-pubsub", self.project_id, self.subscription)

    @classmethod
    def create_shared_stream_producer(cls, kwargs: dict[str, Any]) -> PubSubStreamProducer:
        return PubSubStreamProducer(**kwargs)

    async def filter_shared_stream(self, shared_stream: AsyncIterator[Any]) -> AsyncIterator[TriggerEvent]:
        async for raw in shared_stream:
            problem = message_problem(base64.b64decode(raw["data"]), raw["attributes"])
            if problem:
                log.warning("rejecting message %s on %s: %s", raw["message_id"], self.subscription, problem)
                reject_shared_stream_event()
                continue
            yield TriggerEvent(raw)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Stand-alone path (no shared streams): pull, fire, then ack (at-most-once, like the stock trigger)."""
        producer = PubSubStreamProducer(**self.serialize()[1])
        async for raw, (ack_id, _msg) in producer.open_stream():
            if message_problem(base64.b64decode(raw["data"]), raw["attributes"]) is None:
                yield TriggerEvent(raw)
            await producer._ack([ack_id])
