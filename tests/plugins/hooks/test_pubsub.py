"""The Pub/Sub hooks (dgb_airflow.hooks.pubsub) on the real emulator: the sync hook's clients and
modify_ack_deadline, the async hook's pull / modify-ack-deadline / acknowledge / publish over the
emulator channel, and its broker errors passed through unchanged."""

from __future__ import annotations

import asyncio

import pytest
from google.api_core import exceptions

from dgb import topology
from dgb_airflow.hooks.pubsub import DgbPubSubAsyncHook, DgbPubSubHook, subscription_path
from tests.support.pubsub import pull_all

SUB = topology.subscription(topology.SUB_ENRICHMENT)


def test_subscription_path():
    assert subscription_path("p", "s") == "projects/p/subscriptions/s"


def test_sync_hook_publishes_pulls_extends_and_acks(project):
    hook = DgbPubSubHook()
    assert hook.project_id == project  # from the google_cloud_default connection
    hook.publish(topic=SUB.topic, messages=[{"data": b"one", "attributes": {"k": "v"}}])
    received = hook.pull(subscription=SUB.name, max_messages=10)
    assert [m.message.data for m in received] == [b"one"] and received[0].message.attributes["k"] == "v"
    hook.modify_ack_deadline(subscription=SUB.name, ack_ids=[m.ack_id for m in received], seconds=10)
    hook.acknowledge(subscription=SUB.name, ack_ids=[m.ack_id for m in received])
    assert pull_all(project, SUB.name, 1, timeout=2) == []


def test_sync_modify_ack_deadline_reaches_the_broker(project):
    hook = DgbPubSubHook()
    with pytest.raises(exceptions.GoogleAPICallError):
        hook.modify_ack_deadline(subscription="no-such-subscription", ack_ids=["bogus"], seconds=10)


def test_async_hook_round_trip_on_the_emulator(project):
    async def scenario():
        hook = DgbPubSubAsyncHook(project_id=project, gcp_conn_id="no-such-connection")  # not read: emulator
        message_id = await hook.publish(SUB.topic, b"payload", {"trace_id": "t"})
        received = []
        for _ in range(5):
            try:
                received = await hook.pull(SUB.name, 10, timeout=3)
            except exceptions.DeadlineExceeded:
                continue
            if received:
                break
        assert [m.message.message_id for m in received] == [message_id]
        assert received[0].message.data == b"payload"
        ack_ids = [m.ack_id for m in received]
        # one unknown id fails a whole request on the emulator: the hook retries id by id
        assert await hook.modify_ack_deadline(SUB.name, ack_ids + ["bogus"], 30) == ["bogus"]
        assert await hook.modify_ack_deadline(SUB.name, [], 30) == []
        await hook.acknowledge(SUB.name, ack_ids)
        try:  # nothing left: an empty answer, or the long poll's timeout
            assert await hook.pull(SUB.name, 10, timeout=2) == []
        except exceptions.DeadlineExceeded:
            pass
        with pytest.raises(exceptions.NotFound):
            await hook.publish("no-such-topic", b"x", {})
        await hook.close()

    asyncio.run(scenario())
    assert pull_all(project, SUB.name, 1, timeout=2) == []


def test_async_hook_resolves_credentials_off_the_loop_without_the_emulator(monkeypatch, project):
    """Against real Pub/Sub the credentials come from the connection (here the anonymous one)."""
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST")

    async def scenario():
        hook = DgbPubSubAsyncHook(project_id=project)
        subscriber, publisher = await hook.get_clients()
        assert (subscriber, publisher) == await hook.get_clients()  # created once
        creds = subscriber.transport._credentials
        assert type(creds).__name__ == "AnonymousCredentials"
        await hook.close()

    asyncio.run(scenario())
