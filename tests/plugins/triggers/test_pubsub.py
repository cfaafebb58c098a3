"""The ack-mode trigger (dgb_airflow.triggers.pubsub): its config and serialization, the filter
(dgb.events.parse_message's contract) and the producer's stream and advance paths against the
real Pub/Sub emulator: ack on success, dead-letter publish on reject, backoff on failure."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid

import pytest
from airflow.triggers.shared_stream import AdvanceItem, AdvanceOutcome

from dgb import events, topology
from dgb_airflow.triggers.pubsub import (
    TRIGGER_PATH,
    PubSubAckTrigger,
    PubSubStreamConfig,
    PubSubStreamProducer,
    event_groups,
    reject_reason,
)
from tests.support.pubsub import pull_all

SUB = topology.subscription(topology.SUB_TYPESENSE)


def _event(unique_id: str = "a_1"):
    return events.make_event(
        SUB.topic,
        {
            "unique_id": unique_id,
            "enriched_at": "2026-11-20T10:00:00+00:00",
            "most_specific_theme_code": "01",
            "has_summary": True,
        },
    )


# ------------------------------------------------------------------ config and serialization


def test_serialize_round_trips_one_flat_config():
    trigger = PubSubAckTrigger(
        project_id="p1", subscription=SUB.name, dead_letter_topic=SUB.dead_letter_topic, max_failures=3
    )
    path, kwargs = trigger.serialize()
    assert path == TRIGGER_PATH == f"{PubSubAckTrigger.__module__}.{PubSubAckTrigger.__qualname__}"
    assert json.loads(json.dumps(kwargs)) == kwargs  # stored as JSON in the trigger table
    assert set(kwargs) == PubSubStreamConfig.field_names()
    again = PubSubAckTrigger(**kwargs)
    assert again.config == trigger.config and again.config.max_failures == 3
    assert again.shared_stream_key() == ("dgb-pubsub", "p1", SUB.name)
    producer = PubSubAckTrigger.create_shared_stream_producer(kwargs)
    assert isinstance(producer, PubSubStreamProducer) and producer.config == trigger.config
    assert producer.hook.project_id == "p1"


@pytest.mark.parametrize(
    "bad",
    [
        {"max_messages": 0},
        {"ack_deadline_s": 5},
        {"ack_deadline_s": 601},
        {"max_failures": 0},
        {"poll_timeout_s": 0},
        {"gather_s": -1},
        {"subscription": ""},
    ],
)
def test_config_refuses_values_pubsub_cannot_take(bad):
    with pytest.raises(ValueError):
        PubSubStreamConfig(**{"project_id": "p", "subscription": SUB.name, **bad})


def test_config_names_the_topic_of_its_subscription():
    assert PubSubStreamConfig("p", topology.SUB_ENRICHMENT).topic == topology.TOPIC_SCRAPED
    with pytest.raises(KeyError, match="unknown subscription"):
        _ = PubSubStreamConfig("p", "no-such-subscription").topic


def test_trigger_has_no_standalone_run():
    trigger = PubSubAckTrigger(project_id="p", subscription=SUB.name)

    async def first():
        return await trigger.run().__anext__()

    with pytest.raises(NotImplementedError, match="shared stream"):
        asyncio.run(first())


# ------------------------------------------------------------------ the filter


def test_reject_reason_is_parse_messages_reason():
    ev = _event()
    assert reject_reason(SUB.topic, ev.data(), ev.attributes) is None
    assert reject_reason(SUB.topic, b"nope", ev.attributes) == "malformed_json"
    newer = {**ev.attributes, "event_version": "2.0"}
    assert reject_reason(SUB.topic, ev.data(), newer) == "unsupported_version"
    assert reject_reason(SUB.topic, ev.data(), {"event_version": "1.0"}) == "missing_attributes"
    assert reject_reason(SUB.topic, b'["u"]', ev.attributes) == "malformed_payload"
    # the topic's own fields count too (the stages' contract): a scraped payload on an enriched topic
    scraped = events.make_event(
        topology.TOPIC_SCRAPED,
        {"unique_id": "a_1", "agency_key": "mec", "published_at": "x", "scraped_at": "y"},
    )
    assert reject_reason(SUB.topic, scraped.data(), scraped.attributes) == "malformed_payload"


def test_filter_yields_valid_messages_and_rejects_the_rest():
    trigger = PubSubAckTrigger(project_id="p", subscription=SUB.name)
    good, bad = _event("a_1"), _event("a_2")
    one = {"message_id": "1", "data": base64.b64encode(good.data()).decode(), "attributes": good.attributes}
    two = {"message_id": "2", "data": base64.b64encode(b"{broken").decode(), "attributes": bad.attributes}
    three = {**one, "message_id": "3"}
    # a mixed batch keeps its valid messages; a batch with none is rejected (no event)
    raws = [{"messages": [one, two, three]}, {"messages": [two]}]

    async def stream():
        for raw in raws:
            yield raw

    async def collect():
        return [ev async for ev in trigger.filter_shared_stream(stream())]

    fired = asyncio.run(collect())
    assert len(fired) == 1
    assert fired[0].payload == {"messages": [one, three]}  # the asset event's payload


def test_a_batch_event_logs_short_and_reaches_the_supervisor_as_a_plain_trigger_event():
    from airflow.jobs.triggerer_job_runner import TriggerEventEntry, messages
    from airflow.triggers.base import TriggerEvent

    trigger = PubSubAckTrigger(project_id="p", subscription=SUB.name)
    batch = []
    for i in range(100):
        ev = _event(f"a_{i}")
        batch.append(
            {
                "message_id": str(i + 1),
                "data": base64.b64encode(ev.data()).decode(),
                "attributes": ev.attributes,
            }
        )

    async def stream():
        yield {"messages": batch}

    async def collect():
        return [ev async for ev in trigger.filter_shared_stream(stream())]

    (fired,) = asyncio.run(collect())
    # the triggerer's runner logs repr(event): short, whatever the batch holds
    assert repr(fired) == "TriggerEvent<100 message(s), ids 1..100>"
    assert len(json.dumps(fired.payload)) > 20_000
    # the runner -> supervisor message carries the whole payload and comes back a TriggerEvent
    wire = messages.TriggerStateChanges(events=[TriggerEventEntry(trigger_id=7, event=fired, persist_seq=1)])
    back = messages.TriggerStateChanges.model_validate_json(wire.model_dump_json())
    (entry,) = back.events
    assert type(entry.event) is TriggerEvent
    assert entry.event.payload == {"messages": batch}


def test_a_pull_is_split_into_events_by_bytes():
    assert event_groups([("a", 400), ("b", 400), ("c", 400), ("d", 900)], 1000) == [["a", "b"], ["c"], ["d"]]
    assert event_groups([("a", 10)], 10) == [["a"]] and event_groups([], 10) == []
    with pytest.raises(ValueError, match="max_event_bytes"):
        PubSubStreamConfig("p", SUB.name, max_message_bytes=4096, max_event_bytes=2048)


def _messages(events_: list) -> list:
    """(raw message, (ack_id, msg)) of every message in ``events_`` (stream items)."""
    return [(raw, pair) for batch, pairs in events_ for raw, pair in zip(batch["messages"], pairs)]


async def _take_messages(stream, n: int) -> list:
    """Stream items until they hold ``n`` messages (a pull may bring several in one event)."""
    got: list = []
    while sum(len(raw["messages"]) for raw, _ in got) < n:
        got.append(await asyncio.wait_for(stream.__anext__(), timeout=30))
    return got


# ------------------------------------------------------------------ the producer on the emulator


def _publish(project: str, data: bytes, attributes: dict) -> str:
    from google.cloud import pubsub_v1

    return (
        pubsub_v1.PublisherClient()
        .publish(f"projects/{project}/topics/{SUB.topic}", data, **attributes)
        .result(timeout=10)
    )


def test_producer_acks_clean_dead_letters_rejects_and_backs_off_failures(project):
    ev = _event("a_1")
    for data in (ev.data(), b"{broken", ev.data()):
        _publish(project, data, {**ev.attributes, "trace_id": str(uuid.uuid4())})
    trigger = PubSubAckTrigger(
        project_id=project,
        subscription=SUB.name,
        dead_letter_topic=SUB.dead_letter_topic,
        max_failures=2,
        poll_timeout_s=2,
        max_messages=1,  # one message per event: each gets its own outcome below
    )
    producer = PubSubAckTrigger.create_shared_stream_producer(trigger.serialize()[1])

    async def scenario():
        stream = producer.open_stream()
        got = [await stream.__anext__() for _ in range(3)]
        assert len(producer.outstanding) == 3
        by_kind: dict[str, list] = {}
        for raw, payload in got:
            kind = "bad" if base64.b64decode(raw["messages"][0]["data"]) == b"{broken" else "good"
            by_kind.setdefault(kind, []).append(payload)
        clean, failed = by_kind["good"]
        await producer.advance(
            [
                AdvanceItem(clean, AdvanceOutcome(acked=1, failed=0)),
                AdvanceItem(by_kind["bad"][0], AdvanceOutcome(acked=0, failed=0, rejected=1)),
                AdvanceItem(failed, AdvanceOutcome(acked=0, failed=1)),
            ]
        )
        failed_id = failed[0][1].message.message_id
        assert producer.outstanding == {} and producer.failures == {failed_id: 1}
        # the failed one was not acked: it comes back after its backoff (10 s), not at once
        started = time.monotonic()
        again = await asyncio.wait_for(stream.__anext__(), timeout=40)
        assert again[0]["messages"][0]["message_id"] == failed_id
        assert time.monotonic() - started >= 8
        # a second failure reaches max_failures=2: dead-lettered, then acked
        await producer.advance([AdvanceItem(again[1], AdvanceOutcome(acked=0, failed=1))])
        assert producer.failures == {}
        await stream.aclose()
        await producer.aclose()

    asyncio.run(scenario())
    dlq = pull_all(project, SUB.dead_letter_subscription, 2)
    assert sorted(m.message.attributes["dgb_dead_letter_reason"] for m in dlq) == [
        "delivery_failed_2_times",
        "malformed_json",
    ]
    assert {m.message.attributes["dgb_source_subscription"] for m in dlq} == {SUB.name}
    assert b"{broken" in {m.message.data for m in dlq}
    assert pull_all(project, SUB.name, 1, timeout=3) == []  # nothing left on the source


def test_in_a_burst_the_next_pull_waits_to_gather_what_arrives(project):
    """The first message after a quiet spell is yielded at once; the messages that follow within
    ``gather_s`` come in one event, not one each."""
    import threading

    first = _event("b_0")
    _publish(project, first.data(), first.attributes)
    producer = PubSubStreamProducer(PubSubStreamConfig(project, SUB.name, poll_timeout_s=2, gather_s=1.5))

    def trickle() -> None:  # one message every 0.1 s, as a stage's commits come
        for i in range(1, 6):
            ev = _event(f"b_{i}")
            _publish(project, ev.data(), ev.attributes)
            time.sleep(0.1)

    async def scenario():
        stream = producer.open_stream()
        started = time.monotonic()
        raw, payload = await stream.__anext__()
        assert [m["message_id"] for m in raw["messages"]] == [payload[0][1].message.message_id]
        assert time.monotonic() - started < 1.5  # not held back
        publisher = threading.Thread(target=trickle)
        publisher.start()
        raw2, payload2 = await stream.__anext__()
        publisher.join()
        assert len(raw2["messages"]) == 5  # gathered into one event
        await producer.advance(
            [AdvanceItem(p, AdvanceOutcome(acked=len(p), failed=0)) for p in (payload, payload2)]
        )
        await stream.aclose()
        await producer.aclose()

    asyncio.run(scenario())
    assert pull_all(project, SUB.name, 1, timeout=3) == []  # all acked


def test_pulled_messages_are_leased_to_the_short_deadline_and_kept_leased(project):
    """ack_deadline_s (10 s here) bounds redelivery after a crash; the extender keeps it while waiting."""
    ev = _event("a_9")
    _publish(project, ev.data(), ev.attributes)
    config = PubSubStreamConfig(project, SUB.name, ack_deadline_s=10, poll_timeout_s=2)
    producer = PubSubStreamProducer(config)

    async def scenario():
        stream = producer.open_stream()
        raw, payload = await stream.__anext__()
        # past the lease (the emulator redelivers an unextended message 10.0 s after its last
        # deadline change): the extender renewed it, so no redelivery
        await asyncio.sleep(12)
        assert await asyncio.to_thread(pull_all, project, SUB.name, 1, 2) == []
        await producer.advance([AdvanceItem(payload, AdvanceOutcome(acked=1, failed=0))])
        await stream.aclose()
        await producer.aclose()

    asyncio.run(scenario())
    assert pull_all(project, SUB.name, 1, timeout=3) == []  # acked


def test_advance_never_raises_when_the_broker_fails(project):
    """A raise would stop the whole shared group; broker errors are logged and Pub/Sub redelivers."""
    ev = _event("a_5")
    _publish(project, ev.data(), ev.attributes)
    cfg = PubSubStreamConfig(project, SUB.name, dead_letter_topic="no-such-topic", poll_timeout_s=2)
    producer = PubSubStreamProducer(cfg)

    async def scenario():
        stream = producer.open_stream()
        _raw, payload = await stream.__anext__()
        await producer.hook.close()  # a broken channel: every call now fails
        await producer.advance([AdvanceItem(payload, AdvanceOutcome(acked=1, failed=0))])
        assert producer.outstanding == {}  # advanced: no longer extended
        await stream.aclose()
        await producer.aclose()

    asyncio.run(scenario())


def test_a_failed_dead_letter_publish_releases_the_message_for_redelivery(project):
    """The lease leak: a reject whose dead-letter publish fails is no longer kept leased (extended
    forever, never redelivered) but released with a backoff; once the dead-letter topic works, the
    redelivered message is dead-lettered and acked."""
    from google.cloud import pubsub_v1

    bad = _event("a_6")
    _publish(project, b"{broken", bad.attributes)
    missing = f"dlq-{uuid.uuid4().hex[:6]}"
    cfg = PubSubStreamConfig(
        project, SUB.name, dead_letter_topic=missing, poll_timeout_s=2, ack_deadline_s=10
    )
    producer = PubSubStreamProducer(cfg)

    async def scenario():
        stream = producer.open_stream()
        _raw, payload = await stream.__anext__()
        message_id = payload[0][1].message.message_id
        await producer.advance([AdvanceItem(payload, AdvanceOutcome(acked=0, failed=0, rejected=1))])
        assert producer.outstanding == {} and producer.failures == {message_id: 1}
        # the dead-letter topic appears (an operator fixed it) and gets a subscription to read it
        publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
        topic = publisher.topic_path(project, missing)
        await asyncio.to_thread(publisher.create_topic, request={"name": topic})
        await asyncio.to_thread(
            subscriber.create_subscription,
            request={"name": subscriber.subscription_path(project, missing), "topic": topic},
        )
        again = await asyncio.wait_for(stream.__anext__(), timeout=60)  # redelivered after the backoff
        assert again[0]["messages"][0]["message_id"] == message_id
        await producer.advance([AdvanceItem(again[1], AdvanceOutcome(acked=0, failed=0, rejected=1))])
        assert producer.outstanding == {} and producer.failures == {}
        await stream.aclose()
        await producer.aclose()

    asyncio.run(scenario())
    [dead] = pull_all(project, missing, 1)
    assert dead.message.attributes["dgb_dead_letter_reason"] == "malformed_json"
    assert pull_all(project, SUB.name, 1, timeout=3) == []  # acked on the source


def test_leases_are_extended_only_up_to_max_lease(project):
    """A message leased for longer than max_lease_s without an advance is no longer extended nor
    counted as outstanding: its lease lapses and Pub/Sub redelivers it."""
    ev = _event("a_7")
    _publish(project, ev.data(), ev.attributes)
    cfg = PubSubStreamConfig(project, SUB.name, ack_deadline_s=10, max_lease_s=10, poll_timeout_s=2)
    producer = PubSubStreamProducer(cfg)

    async def scenario():
        stream = producer.open_stream()
        _raw, payload = await stream.__anext__()
        ack_id = payload[0][0]
        assert producer.release_expired_leases(now=time.monotonic()) == []  # young: kept
        assert producer.release_expired_leases(now=time.monotonic() + 11) == [ack_id]
        assert producer.outstanding == {}
        # not extended any more: the message comes back once its 10 s lease lapses
        again = await asyncio.wait_for(stream.__anext__(), timeout=60)
        assert again[0]["messages"][0]["message_id"] == payload[0][1].message.message_id
        await producer.advance([AdvanceItem(again[1], AdvanceOutcome(acked=1, failed=0))])
        await stream.aclose()
        await producer.aclose()

    asyncio.run(scenario())
    assert pull_all(project, SUB.name, 1, timeout=3) == []


def test_a_pull_never_leases_more_than_max_outstanding(project):
    """Pull size is bounded by what is outstanding: with 3 allowed, 3 are leased and the other
    messages stay on the subscription for another consumer (the subscriber queue cannot overflow)."""
    for i in range(7):
        ev = _event(f"b_{i}")
        _publish(project, ev.data(), ev.attributes)
    cfg = PubSubStreamConfig(project, SUB.name, max_outstanding=3, max_messages=100, poll_timeout_s=2)
    producer = PubSubStreamProducer(cfg)

    async def scenario():
        stream = producer.open_stream()
        got = await _take_messages(stream, 3)
        assert len(producer.outstanding) == 3 and len(_messages(got)) == 3
        others = await asyncio.to_thread(pull_all, project, SUB.name, 7, 3)  # acks what it gets
        assert len(others) == 4
        await producer.advance([AdvanceItem(p, AdvanceOutcome(acked=1, failed=0)) for _raw, p in got])
        assert producer.outstanding == {}
        await stream.aclose()
        await producer.aclose()

    asyncio.run(scenario())
    assert pull_all(project, SUB.name, 1, timeout=3) == []


def test_a_message_over_the_size_cap_is_dead_lettered_without_its_content(project):
    """Data + attributes over max_message_bytes: never yielded (so never an asset event), dead-lettered
    as message_too_large with no body and only short identifying attributes, then acked."""
    ev = _event("a_8")
    huge = json.dumps({**json.loads(ev.data()), "padding": "x" * 5000}).encode()
    _publish(project, huge, {**ev.attributes, "noise": "n" * 300})
    small = _event("a_9")
    _publish(project, small.data(), small.attributes)
    cfg = PubSubStreamConfig(
        project, SUB.name, dead_letter_topic=SUB.dead_letter_topic, max_message_bytes=4096, poll_timeout_s=2
    )
    producer = PubSubStreamProducer(cfg)

    async def scenario():
        stream = producer.open_stream()
        raw, payload = await stream.__anext__()
        [message] = raw["messages"]  # the big one never reaches an event
        assert json.loads(base64.b64decode(message["data"]))["unique_id"] == "a_9"
        await producer.advance([AdvanceItem(payload, AdvanceOutcome(acked=1, failed=0))])
        assert producer.outstanding == {}
        await stream.aclose()
        await producer.aclose()

    asyncio.run(scenario())
    [dead] = pull_all(project, SUB.dead_letter_subscription, 2)
    attrs = dict(dead.message.attributes)
    assert attrs["dgb_dead_letter_reason"] == "message_too_large"
    assert dead.message.data == b"" and "noise" not in attrs
    assert attrs["unique_id"] == "a_8" and attrs["trace_id"] == ev.attributes["trace_id"]
    assert int(attrs["dgb_original_bytes"]) > 4096
    assert pull_all(project, SUB.name, 1, timeout=3) == []  # both acked on the source


def test_dead_letters_of_one_batch_are_published_together(project):
    """Many rejects in one advance: every one dead-lettered (concurrently, each publish bounded by
    dead_letter_timeout_s) and acked."""
    for i in range(12):
        _publish(project, b"{broken %d" % i, _event(f"c_{i}").attributes)
    cfg = PubSubStreamConfig(project, SUB.name, dead_letter_topic=SUB.dead_letter_topic, poll_timeout_s=2)
    producer = PubSubStreamProducer(cfg)

    async def scenario():
        stream = producer.open_stream()
        got = await _take_messages(stream, 12)
        await producer.advance(
            [AdvanceItem(p, AdvanceOutcome(acked=0, failed=0, rejected=1)) for _raw, p in got]
        )
        assert producer.outstanding == {} and producer.failures == {}
        await stream.aclose()
        await producer.aclose()

    asyncio.run(scenario())
    dead = pull_all(project, SUB.dead_letter_subscription, 12)
    assert len({m.message.attributes["dgb_source_message_id"] for m in dead}) == 12
    assert {m.message.attributes["dgb_dead_letter_reason"] for m in dead} == {"malformed_json"}
    assert pull_all(project, SUB.name, 1, timeout=3) == []


def test_one_event_per_pull_and_its_invalid_messages_dead_lettered_when_it_is_clean(project):
    """A pull of several messages is one raw event (one asset event in Airflow, not one per
    message); when that event is stored (clean), its valid messages are acked and the invalid
    ones, which the filter left out of the event, are dead-lettered with their own reason."""
    good = [_event(f"f_{i}") for i in range(3)]
    for ev in good[:2]:
        _publish(project, ev.data(), ev.attributes)
    _publish(project, b"{broken", _event("f_x").attributes)
    _publish(project, good[2].data(), good[2].attributes)
    cfg = PubSubStreamConfig(project, SUB.name, dead_letter_topic=SUB.dead_letter_topic, poll_timeout_s=2)
    trigger = PubSubAckTrigger(**cfg.to_kwargs())
    producer = PubSubStreamProducer(cfg)

    async def scenario():
        stream = producer.open_stream()
        got = await _take_messages(stream, 4)
        assert len(_messages(got)) == 4 and len(got) < 4  # fewer events than messages

        async def replay():
            for raw, _payload in got:
                yield raw

        fired = [ev.payload async for ev in trigger.filter_shared_stream(replay())]
        await producer.advance([AdvanceItem(p, AdvanceOutcome(acked=1, failed=0)) for _raw, p in got])
        assert producer.outstanding == {} and producer.failures == {}
        await stream.aclose()
        await producer.aclose()
        return got, fired

    got, fired = asyncio.run(scenario())
    in_events = [json.loads(base64.b64decode(m["data"]))["unique_id"] for p in fired for m in p["messages"]]
    assert sorted(in_events) == ["f_0", "f_1", "f_2"]
    [dead] = pull_all(project, SUB.dead_letter_subscription, 1)
    assert dead.message.attributes["dgb_dead_letter_reason"] == "malformed_json"
    assert dead.message.data == b"{broken"
    assert pull_all(project, SUB.name, 1, timeout=3) == []  # all four acked on the source


def test_bad_ack_ids_are_isolated_within_a_bounded_number_of_calls(project):
    """The emulator refuses a whole request for one bad ack id: the hook bisects, so the good ids
    of the request still get their deadline / ack, and the bad ones are returned."""
    from dgb_airflow.hooks.pubsub import DgbPubSubAsyncHook

    for i in range(4):
        ev = _event(f"d_{i}")
        _publish(project, ev.data(), ev.attributes)
    hook = DgbPubSubAsyncHook(project_id=project)

    async def scenario():
        received = []
        while len(received) < 4:
            received += await hook.pull(SUB.name, 10, timeout=5)
        ids = [m.ack_id for m in received]
        assert await hook.modify_ack_deadline(SUB.name, ids + ["bogus-1"], 30) == ["bogus-1"]
        failed = await hook.acknowledge(SUB.name, ["bogus-2", *ids, "bogus-3"])
        assert sorted(failed) == ["bogus-2", "bogus-3"]
        await hook.close()

    asyncio.run(scenario())
    assert pull_all(project, SUB.name, 1, timeout=3) == []  # the good ones were acked


# ------------------------------------------------------------------ inside Airflow's shared-stream manager


def test_through_airflows_shared_stream_manager_acks_persisted_and_dead_letters_rejected(project):
    """The triggerer's own machinery (SharedStreamManager), as its runner drives it: events fire
    for valid messages, each is acked once confirmed persisted; the invalid one is rejected by the
    filter and dead-lettered; nothing comes back after the lease (10 s) once the stream stopped."""
    from airflow.triggers.shared_stream import SharedStreamManager

    good = [_event(f"a_{i}") for i in range(2)]
    for ev in good:
        _publish(project, ev.data(), ev.attributes)
    _publish(project, b"{broken", _event("a_x").attributes)
    trigger = PubSubAckTrigger(
        project_id=project,
        subscription=SUB.name,
        dead_letter_topic=SUB.dead_letter_topic,
        ack_deadline_s=10,
        poll_timeout_s=2,
    )
    key = trigger.shared_stream_key()
    fired: list = []

    async def scenario():
        manager = SharedStreamManager(ack_timeout=30)
        stream = manager.subscribe(trigger_id=1, trigger=trigger, key=key)

        async def runner():  # what TriggerRunner does with each event it takes
            async for event in trigger.filter_shared_stream(stream):
                seq = manager.bind_pending_event(trigger_id=1, key=key)
                fired.append(event.payload)  # "stored as an asset event"
                manager.confirm_persisted([seq])

        task = asyncio.create_task(runner())
        dead = []
        deadline = time.monotonic() + 60
        while not dead and time.monotonic() < deadline:
            dead = await asyncio.to_thread(pull_all, project, SUB.dead_letter_subscription, 1, 2)
        await asyncio.sleep(2)  # the clean ones' advance follows the next pull
        task.cancel()
        await manager.unsubscribe(1, key)
        return dead

    dead = asyncio.run(scenario())
    messages = [m for p in fired for m in p["messages"]]
    assert sorted(json.loads(base64.b64decode(m["data"]))["unique_id"] for m in messages) == ["a_0", "a_1"]
    assert [m.message.attributes["dgb_dead_letter_reason"] for m in dead] == ["malformed_json"]
    time.sleep(12)  # past the lease: anything not acked would be back
    assert pull_all(project, SUB.name, 3, timeout=3) == []


def test_an_event_never_confirmed_persisted_is_not_acked_but_redelivered(project):
    """Ack after commit: while the asset event is not confirmed stored the message stays leased;
    when the confirmation never comes (the persist failed), the ack timeout fails the event and the
    message is released for redelivery after a backoff, never acked."""
    from airflow.triggers.shared_stream import SharedStreamManager

    ev = _event("e_1")
    _publish(project, ev.data(), ev.attributes)
    trigger = PubSubAckTrigger(project_id=project, subscription=SUB.name, ack_deadline_s=10, poll_timeout_s=2)
    key = trigger.shared_stream_key()
    fired: list = []

    async def scenario():
        manager = SharedStreamManager(ack_timeout=3)
        stream = manager.subscribe(trigger_id=1, trigger=trigger, key=key)

        async def runner():  # takes events but never gets the persist confirmation
            async for event in trigger.filter_shared_stream(stream):
                manager.bind_pending_event(trigger_id=1, key=key)
                fired.append(event.payload)

        task = asyncio.create_task(runner())
        await asyncio.sleep(8)  # fired, then failed by the 3 s ack timeout and released
        task.cancel()
        await manager.unsubscribe(1, key)

    asyncio.run(scenario())
    assert len(fired) == 1 and [m["attributes"]["unique_id"] for m in fired[0]["messages"]] == ["e_1"]
    again: list = []
    deadline = time.monotonic() + 60
    while not again and time.monotonic() < deadline:  # not acked: Pub/Sub delivers it again
        again = pull_all(project, SUB.name, 1, timeout=5)
    assert [m.message.message_id for m in again] == [fired[0]["messages"][0]["message_id"]]
