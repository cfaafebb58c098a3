"""Pub/Sub hooks of the pipeline: the google provider's connection handling (credentials and
project from the ``google_cloud_default`` connection), the emulator channel, and the calls the
ack-mode trigger makes (pull, modify-ack-deadline, acknowledge, publish).

Both hooks make their clients with :mod:`dgb.pubsub_clients` (the one client factory: anonymous
against the emulator when ``PUBSUB_EMULATOR_HOST`` is set, else the connection's credentials).

* :class:`DgbPubSubHook` (sync): the provider's ``PubSubHook`` plus ``modify_ack_deadline``.
  Operators and the outbox relay use it.
* :class:`DgbPubSubAsyncHook` (async, for the triggerer): the provider's async hook has no
  modify-ack-deadline or publish and wraps every broker error; this one has all four calls and
  raises google.api_core's own exceptions (the caller tells an empty long poll from an outage).
  Resolving credentials blocks (~1 s for real GCP auth), so it runs off the event loop; the
  grpc.aio clients themselves are created on the loop, which their channels bind to.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from airflow.providers.google.cloud.hooks.pubsub import PubSubHook
from airflow.providers.google.common.consts import CLIENT_INFO
from airflow.providers.google.common.hooks.base_google import PROVIDE_PROJECT_ID, GoogleBaseAsyncHook

from dgb.pubsub_clients import async_clients, emulator_host, publisher_client, subscriber_client

RPC_TIMEOUT_S = 10.0  # one acknowledge / modify-ack-deadline request
MAX_FALLBACK_CALLS = 32  # extra requests spent isolating bad ack ids in one call


def subscription_path(project_id: str, subscription: str) -> str:
    return f"projects/{project_id}/subscriptions/{subscription}"


def topic_path(project_id: str, topic: str) -> str:
    return f"projects/{project_id}/topics/{topic}"


class DgbPubSubHook(PubSubHook):
    """The provider's ``PubSubHook`` plus ``modify_ack_deadline``.

    :param gcp_conn_id: Airflow connection holding the GCP credentials and default project
        (against the emulator an ``is_anonymous`` connection is enough).
    :param kwargs: passed to the provider's ``PubSubHook`` (e.g. ``impersonation_chain``).
    """

    hook_name = "DGB Pub/Sub"

    def __init__(self, gcp_conn_id: str = "google_cloud_default", **kwargs: Any) -> None:
        super().__init__(gcp_conn_id=gcp_conn_id, **kwargs)

    def get_conn(self) -> Any:
        """The publisher client (made once), with the connection's credentials and options."""
        if not self._client:
            from google.cloud.pubsub_v1.types import PublisherOptions

            self._client = publisher_client(
                self.get_credentials(),
                client_info=CLIENT_INFO,
                publisher_options=PublisherOptions(
                    enable_message_ordering=self.enable_message_ordering,
                    enable_open_telemetry_tracing=self.enable_open_telemetry_tracing,
                ),
                client_options=self.get_client_options(),
            )
        return self._client

    @cached_property
    def subscriber_client(self) -> Any:
        """The subscriber client, with the connection's credentials and options."""
        return subscriber_client(
            self.get_credentials(), client_info=CLIENT_INFO, client_options=self.get_client_options()
        )

    @PubSubHook.fallback_to_default_project_id
    def modify_ack_deadline(
        self,
        *,
        subscription: str,
        ack_ids: Sequence[str],
        seconds: int,
        project_id: str = PROVIDE_PROJECT_ID,
        timeout: float | None = 30.0,
    ) -> None:
        """Set the ack deadline of pulled messages (``seconds`` from now; never use 0 as a nack).
        Keyword arguments only, like the provider's methods.

        :param subscription: subscription name, without the ``projects/.../subscriptions/`` prefix.
        :param ack_ids: ack ids from a pull of that subscription.
        :param seconds: the new deadline, 10..600 s on real Pub/Sub.
        :param project_id: the subscription's project (default: the connection's).
        :param timeout: seconds to wait for the broker.
        """
        if not ack_ids:
            return
        self.subscriber_client.modify_ack_deadline(
            request={
                "subscription": subscription_path(project_id, subscription),
                "ack_ids": list(ack_ids),
                "ack_deadline_seconds": seconds,
            },
            timeout=timeout,
        )


class DgbPubSubAsyncHook(GoogleBaseAsyncHook):
    """Async Pub/Sub for the triggerer: pull, modify-ack-deadline, acknowledge, publish.

    :meth:`pull` and :meth:`publish` raise ``google.api_core.exceptions`` as the broker sent them
    (``DeadlineExceeded`` is an empty long poll on the emulator); :meth:`modify_ack_deadline` and
    :meth:`acknowledge` are best effort and return the ack ids that failed.

    :param project_id: the project of the subscriptions and topics named in the calls.
    :param gcp_conn_id: Airflow connection holding the GCP credentials (not read when
        ``PUBSUB_EMULATOR_HOST`` is set: the emulator takes no credentials).
    :param kwargs: passed to the sync hook that resolves the credentials (``impersonation_chain``).
    """

    sync_hook_class = DgbPubSubHook

    def __init__(self, project_id: str, gcp_conn_id: str = "google_cloud_default", **kwargs: Any) -> None:
        super().__init__(gcp_conn_id=gcp_conn_id, **kwargs)
        self.project_id = project_id
        self._subscriber = None
        self._publisher = None

    async def _credentials_and_options(self) -> tuple[Any, Any]:
        """The connection's credentials and client options, resolved in a worker thread."""
        sync_hook = await self.get_sync_hook()
        return await asyncio.to_thread(lambda: (sync_hook.get_credentials(), sync_hook.get_client_options()))

    async def get_clients(self) -> tuple[Any, Any]:
        """The (subscriber, publisher) grpc.aio clients, created once; call from the event loop."""
        if self._subscriber is None:
            credentials = options = None
            if not emulator_host():  # the emulator takes no credentials
                credentials, options = await self._credentials_and_options()
            subscriber, publisher = async_clients(credentials, options)
            self._subscriber, self._publisher = subscriber, publisher
        return self._subscriber, self._publisher

    async def pull(self, subscription: str, max_messages: int, timeout: float) -> list:
        """Long-poll up to ``max_messages`` messages (``ReceivedMessage`` objects).

        :param subscription: subscription name, without the ``projects/.../subscriptions/`` prefix.
        :param max_messages: most messages returned by one pull.
        :param timeout: seconds the long poll may wait; the emulator answers an empty poll only at
            this timeout, with ``DeadlineExceeded``.
        """
        subscriber, _ = await self.get_clients()
        path = subscription_path(self.project_id, subscription)
        resp = await subscriber.pull(
            request={"subscription": path, "max_messages": max_messages}, timeout=timeout
        )
        return list(resp.received_messages)

    async def modify_ack_deadline(
        self, subscription: str, ack_ids: Sequence[str], seconds: int, *, timeout: float = RPC_TIMEOUT_S
    ) -> list[str]:
        """Set ack deadlines, best effort: returns the ack ids that could not be set, never raises.

        The emulator fails a whole request for one bad (expired) ack id, so a request refused as
        invalid is split in halves to isolate the bad ids (bounded: :data:`MAX_FALLBACK_CALLS`
        more calls); any other error (the broker unreachable, a timeout) is not retried per id.

        :param subscription: subscription name, without the ``projects/.../subscriptions/`` prefix.
        :param ack_ids: ack ids from a pull of that subscription.
        :param seconds: the new deadline from now (never 0: a nack loops hot on redelivery).
        :param timeout: seconds each request may take.
        """
        subscriber, _ = await self.get_clients()
        path = subscription_path(self.project_id, subscription)

        async def call(ids: list[str]) -> None:
            await subscriber.modify_ack_deadline(
                request={"subscription": path, "ack_ids": ids, "ack_deadline_seconds": seconds},
                timeout=timeout,
            )

        return await _bounded_by_ids(call, list(ack_ids))

    async def acknowledge(
        self, subscription: str, ack_ids: Sequence[str], *, timeout: float = RPC_TIMEOUT_S
    ) -> list[str]:
        """Acknowledge pulled messages, best effort like :meth:`modify_ack_deadline`: returns the
        ack ids that could not be acknowledged (Pub/Sub redelivers those), never raises.

        :param subscription: subscription name, without the ``projects/.../subscriptions/`` prefix.
        :param ack_ids: ack ids from a pull of that subscription.
        :param timeout: seconds each request may take.
        """
        subscriber, _ = await self.get_clients()
        path = subscription_path(self.project_id, subscription)

        async def call(ids: list[str]) -> None:
            await subscriber.acknowledge(request={"subscription": path, "ack_ids": ids}, timeout=timeout)

        return await _bounded_by_ids(call, list(ack_ids))

    async def publish(
        self, topic: str, data: bytes, attributes: dict[str, str], timeout: float = 30.0
    ) -> str:
        """Publish one message; returns its message id.

        :param topic: topic name, without the ``projects/.../topics/`` prefix.
        :param data: the message body.
        :param attributes: the message attributes (strings).
        :param timeout: seconds to wait for the broker.
        """
        _, publisher = await self.get_clients()
        resp = await publisher.publish(
            topic=topic_path(self.project_id, topic),
            messages=[{"data": data, "attributes": attributes}],
            timeout=timeout,
        )
        return resp.message_ids[0]

    async def close(self) -> None:
        """Close both clients' channels (best effort)."""
        for client in (self._subscriber, self._publisher):
            transport = getattr(client, "transport", None)
            if transport is not None:
                with contextlib.suppress(Exception):
                    await transport.close()
        self._subscriber = self._publisher = None


async def _bounded_by_ids(call, ack_ids: list[str]) -> list[str]:
    """Run ``call(ids)`` on all ``ack_ids``; when the broker refuses the request as invalid (one
    bad id fails all on the emulator), bisect to isolate the bad ids, spending at most
    :data:`MAX_FALLBACK_CALLS` extra requests (ids still unresolved then count as failed). Any other
    error fails the ids of that request without a retry. Returns the ids that failed."""
    from google.api_core import exceptions

    if not ack_ids:
        return []
    failed: list[str] = []
    budget = MAX_FALLBACK_CALLS
    pending = [ack_ids]
    while pending:
        ids = pending.pop()
        try:
            await call(ids)
        except exceptions.InvalidArgument:
            if len(ids) == 1 or budget < 2:
                failed.extend(ids)
            else:
                budget -= 2
                half = len(ids) // 2
                pending += [ids[half:], ids[:half]]
        except Exception:
            failed.extend(ids)
    return failed
