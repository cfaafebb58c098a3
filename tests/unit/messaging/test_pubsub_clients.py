"""The Pub/Sub client factory (dgb.pubsub_clients): anonymous clients against the emulator, the
given credentials against real Pub/Sub. Making a client opens no connection."""

from __future__ import annotations

import asyncio

from google.oauth2.credentials import Credentials

from dgb.pubsub_clients import async_clients, emulator_host, publisher_client, subscriber_client


def test_emulator_host_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:1")
    assert emulator_host() == "127.0.0.1:1"
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "")
    assert emulator_host() is None
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST")
    assert emulator_host() is None


def test_against_the_emulator_clients_are_anonymous_and_point_at_it(monkeypatch):
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:1")
    given = Credentials(token="not-for-the-emulator")
    for client in (publisher_client(given), subscriber_client(given), publisher_client()):
        # anonymous credentials: an insecure channel, the given credentials never sent
        assert client.transport._ignore_credentials and client.transport._credentials is None
        assert client.transport._host.startswith("127.0.0.1:1")


def test_against_real_pubsub_clients_take_the_given_credentials(monkeypatch):
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)
    given = Credentials(token="t")
    options = {"api_endpoint": "127.0.0.1:2"}  # loopback: nothing is reached, only configured
    for make in (publisher_client, subscriber_client):
        client = make(given, client_options=options)
        assert client.transport._credentials is given
        assert client.transport._host.startswith("127.0.0.1:2")


def test_async_clients_use_an_insecure_channel_to_the_emulator(monkeypatch):
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:1")

    async def scenario():
        subscriber, publisher = async_clients(Credentials(token="ignored"))
        for client in (subscriber, publisher):
            assert client.transport._credentials is None  # the channel carries none
            await client.transport.close()

    asyncio.run(scenario())


def test_async_clients_take_the_given_credentials_without_the_emulator(monkeypatch):
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)
    given = Credentials(token="t")

    async def scenario():
        subscriber, publisher = async_clients(given, {"api_endpoint": "127.0.0.1:2"})
        for client in (subscriber, publisher):
            assert client.transport._credentials is given
            assert client.transport._host.startswith("127.0.0.1:2")
            await client.transport.close()

    asyncio.run(scenario())


def test_emulator_channels_cap_the_reconnect_wait(monkeypatch):
    """Every client of a process shares one connection to the emulator: without a cap, gRPC's
    wait between reconnects grows to minutes while the emulator is down, and the first calls after
    it is back wait that out."""
    import grpc

    from dgb import pubsub_clients

    made = []
    real_sync, real_aio = grpc.insecure_channel, grpc.aio.insecure_channel

    def recording(real):
        def make(target, options=None, **kwargs):
            made.append((target, dict(options or ())))
            return real(target, options=options, **kwargs)

        return make

    monkeypatch.setattr(grpc, "insecure_channel", recording(real_sync))
    monkeypatch.setattr(grpc.aio, "insecure_channel", recording(real_aio))
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", "127.0.0.1:1")
    publisher_client()
    subscriber_client()

    async def scenario():
        for client in async_clients():
            await client.transport.close()

    asyncio.run(scenario())
    assert len(made) == 4
    cap = dict(pubsub_clients.EMULATOR_CHANNEL_OPTIONS)["grpc.max_reconnect_backoff_ms"]
    assert all(
        target == "127.0.0.1:1" and opts["grpc.max_reconnect_backoff_ms"] == cap for target, opts in made
    )
    assert cap <= 10_000
