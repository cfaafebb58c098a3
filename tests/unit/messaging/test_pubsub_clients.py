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
