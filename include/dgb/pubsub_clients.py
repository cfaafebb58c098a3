"""The one place Pub/Sub clients are made: the CLI (topology, reconcile's relay and replay), the
Airflow hooks and the pull trigger all build theirs here.

Against the emulator (``PUBSUB_EMULATOR_HOST`` set: the local stack, the tests) a client takes
anonymous credentials and talks to that ``host:port`` in the clear; otherwise the credentials given
(``None``: application default credentials) and client options. The google library is imported
only when a client is made, so importing this module costs nothing.
"""

from __future__ import annotations

import os
from typing import Any

EMULATOR_ENV = "PUBSUB_EMULATOR_HOST"


def emulator_host() -> str | None:
    """``host:port`` of the Pub/Sub emulator when ``PUBSUB_EMULATOR_HOST`` is set, else None."""
    return os.environ.get(EMULATOR_ENV) or None


# gRPC waits longer after each failed reconnect (up to 120 s by default). Every client of a
# process shares one connection to the emulator, so after the emulator was down for a while the
# first calls once it is back waited out that grown delay (~50 s after a 140 s outage: the fault
# suite's emulator_down); capped, they reconnect within seconds.
EMULATOR_CHANNEL_OPTIONS = (("grpc.max_reconnect_backoff_ms", 5000),)


def _emulator_channel(emulator: str, *, aio: bool = False) -> Any:
    import grpc

    make = grpc.aio.insecure_channel if aio else grpc.insecure_channel
    return make(emulator, options=EMULATOR_CHANNEL_OPTIONS)


def publisher_client(credentials: Any = None, **options: Any) -> Any:
    """A ``google.cloud.pubsub_v1.PublisherClient``.

    :param credentials: google-auth credentials for real Pub/Sub (``None``: application default
        credentials); ignored against the emulator, which gets a plain channel of its own.
    :param options: further keyword arguments of the client (``client_info``, ``client_options``,
        ``publisher_options``).
    """
    from google.cloud import pubsub_v1

    emulator = emulator_host()
    if emulator:
        from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport

        return pubsub_v1.PublisherClient(
            transport=PublisherGrpcTransport(host=emulator, channel=_emulator_channel(emulator)), **options
        )
    return pubsub_v1.PublisherClient(credentials=credentials, **options)


def subscriber_client(credentials: Any = None, **options: Any) -> Any:
    """A ``google.cloud.pubsub_v1.SubscriberClient``; parameters as :func:`publisher_client`."""
    from google.cloud import pubsub_v1

    emulator = emulator_host()
    if emulator:
        from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

        return pubsub_v1.SubscriberClient(
            transport=SubscriberGrpcTransport(host=emulator, channel=_emulator_channel(emulator)), **options
        )
    return pubsub_v1.SubscriberClient(credentials=credentials, **options)


def async_clients(credentials: Any = None, client_options: Any = None) -> tuple[Any, Any]:
    """The (subscriber, publisher) grpc.aio clients of the async trigger. Call from the event loop
    that will use them: their channels bind to it. Against the emulator an insecure channel to it
    (the async clients do not read ``PUBSUB_EMULATOR_HOST`` themselves) and the arguments are
    ignored; otherwise ``credentials`` (``None``: application default credentials) and
    ``client_options``."""
    from google.pubsub_v1.services.publisher import PublisherAsyncClient
    from google.pubsub_v1.services.subscriber import SubscriberAsyncClient

    emulator = emulator_host()
    if emulator:
        from google.pubsub_v1.services.publisher.transports import PublisherGrpcAsyncIOTransport
        from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcAsyncIOTransport

        subscriber = SubscriberAsyncClient(
            transport=SubscriberGrpcAsyncIOTransport(
                host=emulator, channel=_emulator_channel(emulator, aio=True)
            )
        )
        publisher = PublisherAsyncClient(
            transport=PublisherGrpcAsyncIOTransport(
                host=emulator, channel=_emulator_channel(emulator, aio=True)
            )
        )
        return subscriber, publisher
    subscriber = SubscriberAsyncClient(credentials=credentials, client_options=client_options)
    publisher = PublisherAsyncClient(credentials=credentials, client_options=client_options)
    return subscriber, publisher
