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


def _credentials(credentials: Any) -> Any:
    """Anonymous credentials against the emulator (it reads none), else ``credentials``."""
    if emulator_host():
        from google.auth.credentials import AnonymousCredentials

        return AnonymousCredentials()
    return credentials


def publisher_client(credentials: Any = None, **options: Any) -> Any:
    """A ``google.cloud.pubsub_v1.PublisherClient``.

    :param credentials: google-auth credentials for real Pub/Sub (``None``: application default
        credentials); ignored against the emulator.
    :param options: further keyword arguments of the client (``client_info``, ``client_options``,
        ``publisher_options``); the client itself points ``client_options`` at the emulator.
    """
    from google.cloud import pubsub_v1

    return pubsub_v1.PublisherClient(credentials=_credentials(credentials), **options)


def subscriber_client(credentials: Any = None, **options: Any) -> Any:
    """A ``google.cloud.pubsub_v1.SubscriberClient``; parameters as :func:`publisher_client`."""
    from google.cloud import pubsub_v1

    return pubsub_v1.SubscriberClient(credentials=_credentials(credentials), **options)


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
        import grpc
        from google.pubsub_v1.services.publisher.transports import PublisherGrpcAsyncIOTransport
        from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcAsyncIOTransport

        subscriber = SubscriberAsyncClient(
            transport=SubscriberGrpcAsyncIOTransport(channel=grpc.aio.insecure_channel(emulator))
        )
        publisher = PublisherAsyncClient(
            transport=PublisherGrpcAsyncIOTransport(channel=grpc.aio.insecure_channel(emulator))
        )
        return subscriber, publisher
    subscriber = SubscriberAsyncClient(credentials=credentials, client_options=client_options)
    publisher = PublisherAsyncClient(credentials=credentials, client_options=client_options)
    return subscriber, publisher
