"""The typed message and asset-payload contracts of dgb.events (one model per topic)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from dgb import events, topology

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PAYLOADS = {
    topology.TOPIC_SCRAPED: {"unique_id": "u1", "agency_key": "mec", "published_at": None, "scraped_at": NOW},
    topology.TOPIC_ENRICHED: {
        "unique_id": "u1",
        "enriched_at": NOW,
        "most_specific_theme_code": "01.01.01",
        "has_summary": True,
    },
    topology.TOPIC_EMBEDDED: {"unique_id": "u1", "embedded_at": NOW, "embedding_dim": 512},
}
MODELS = {
    topology.TOPIC_SCRAPED: events.ScrapedPayload,
    topology.TOPIC_ENRICHED: events.EnrichedPayload,
    topology.TOPIC_EMBEDDED: events.EmbeddedPayload,
}


def reason(topic: str, data, attributes) -> str:
    with pytest.raises(events.InvalidEvent) as exc:
        events.parse_message(topic, data, attributes)
    return exc.value.reason


@pytest.mark.parametrize("topic", topology.TOPICS)
def test_every_built_event_parses_back_into_its_topics_typed_model(topic):
    ev = events.make_event(topic, {**PAYLOADS[topic], "not_in_contract": 1}, trace_id="t-1", now=NOW)
    assert "not_in_contract" not in ev.payload
    assert ev.payload.get("scraped_at", NOW.isoformat()) == NOW.isoformat()
    msg = events.parse_message(topic, ev.data(), ev.attributes)
    assert isinstance(msg, events.Message) and isinstance(msg.payload, MODELS[topic])
    assert msg.topic == topic and msg.unique_id == "u1" and msg.trace_id == "t-1"
    assert msg.attributes == ev.attributes and msg.attributes["event_ts"] == NOW.isoformat()
    assert events.PAYLOAD_FIELDS[topic] == tuple(MODELS[topic].model_fields)


def test_the_dead_letter_reasons():
    topic = topology.TOPIC_EMBEDDED
    ev = events.make_event(topic, PAYLOADS[topic])
    ok, data = ev.attributes, ev.data()
    assert reason(topic, data, {**ok, "trace_id": ""}) == "missing_attributes"
    assert reason(topic, data, None) == "missing_attributes"
    assert reason(topic, data, {**ok, "event_version": "9.9"}) == "unsupported_version"
    assert reason(topic, b"not json{", ok) == "malformed_json"
    assert reason(topic, b'["u1"]', ok) == "malformed_payload"
    assert reason(topic, json.dumps({"unique_id": "u1"}), ok) == "malformed_payload"  # fields missing
    assert reason(topic, json.dumps({**ev.payload, "embedding_dim": "512"}), ok) == "malformed_payload"
    assert reason(topic, json.dumps({**ev.payload, "unique_id": ""}), ok) == "malformed_payload"
    assert reason(topic, json.dumps({**ev.payload, "unique_id": "u2"}), ok) == "malformed_payload"
    assert reason("dgb.news.unknown", data, ok) == "unknown_topic"
    with pytest.raises(events.InvalidEvent, match="embedding_dim"):
        events.parse_message(topic, json.dumps({**ev.payload, "embedding_dim": None}), ok)


def test_nullable_fields_must_still_be_present():
    topic = topology.TOPIC_SCRAPED
    ev = events.make_event(topic, PAYLOADS[topic])
    assert events.parse_message(topic, ev.data(), ev.attributes).payload.published_at is None
    without = {k: v for k, v in ev.payload.items() if k != "published_at"}
    assert reason(topic, json.dumps(without), ev.attributes) == "malformed_payload"
    with pytest.raises(ValueError, match="misses"):
        events.make_event(topic, without)


def test_the_asset_payload_round_trip():
    received = SimpleNamespace(
        message=SimpleNamespace(
            message_id="m-1", data=b'{"unique_id": "u1"}', attributes={"a": "b"}, publish_time=NOW
        ),
        delivery_attempt=None,
    )
    asset = events.AssetPayload.from_received(received)
    stored = json.loads(json.dumps(asset.model_dump()))  # what an asset event keeps
    back = events.AssetPayload.model_validate(stored)
    assert back == asset and back.raw_data() == b'{"unique_id": "u1"}'
    assert (back.message_id, back.attributes, back.publish_time, back.delivery_attempt) == (
        "m-1",
        {"a": "b"},
        NOW.isoformat(),
        0,
    )
    # data that is not base64 is kept as it is (the stage dead-letters it as malformed, never loses it)
    assert events.AssetPayload(message_id="m-2", data="not base64!").raw_data() == b"not base64!"
    assert events.AssetPayload(message_id="m-3", data=base64.b64encode(b"x").decode()).raw_data() == b"x"


def test_a_stage_message_from_an_asset_payload():
    from dgb.pipeline.messages import InMessage

    msg = InMessage.from_payload(
        "sub", {"message_id": 7, "data": base64.b64encode(b"{}").decode(), "attributes": {"trace_id": "t"}}
    )
    assert (msg.subscription, msg.message_id, msg.data) == ("sub", "7", b"{}")
    assert msg.attributes == {"trace_id": "t"}
    # a payload breaking the contract still becomes a message (then dead-lettered), never an exception
    bad = InMessage.from_payload("sub", {"message_id": "m", "data": "e30=", "attributes": ["x"]})
    assert (bad.message_id, bad.data, bad.attributes) == ("m", b"{}", {})


def test_a_message_published_by_production_is_accepted():
    """DestaquesGovBr's scrapers publish dgb.news.scraped with trace_id and event_version only
    (no unique_id attribute) and this payload: during a switch-over both may publish."""
    data = json.dumps(
        {
            "unique_id": "merenda-escolar_a1b2c3",
            "agency_key": "mec",
            "published_at": "2026-02-10T17:05:07-03:00",
            "scraped_at": "2026-02-10T20:06:00.123456+00:00",
        }
    ).encode()
    msg = events.parse_message(topology.TOPIC_SCRAPED, data, {"trace_id": "t-9", "event_version": "1.0"})
    assert msg.unique_id == "merenda-escolar_a1b2c3"
    assert msg.attributes["unique_id"] == "merenda-escolar_a1b2c3"  # the dedup attribute, from the payload
    with pytest.raises(events.InvalidEvent, match="differs"):
        events.parse_message(
            topology.TOPIC_SCRAPED,
            data,
            {"trace_id": "t-9", "event_version": "1.0", "unique_id": "other_000000"},
        )


def test_a_rolling_upgrade_mixes_minor_versions_without_dead_letters():
    """Old and new workers run side by side during an upgrade: a message of any minor version of
    our major passes, its extra fields ignored; another major, or a version that is not
    MAJOR.MINOR, is dead-lettered (kept, replayable)."""
    topic = topology.TOPIC_SCRAPED
    ev = events.make_event(topic, PAYLOADS[topic])
    newer = json.dumps({**ev.payload, "field_of_the_next_version": [1, 2]})
    for version in ("1.0", "1.1", "1.12", "01.3"):
        msg = events.parse_message(topic, newer, {**ev.attributes, "event_version": version})
        assert msg.unique_id == ev.unique_id
        assert "field_of_the_next_version" not in msg.payload.model_dump()
    for version in ("2.0", "0.9", "1", "v1.1", "1.x", "1.1.1", ""):
        assert reason(topic, newer, {**ev.attributes, "event_version": version}) in {
            "unsupported_version",
            "missing_attributes",  # "" is not a version at all
        }, version
    assert reason(topic, newer, {**ev.attributes, "event_version": "2.0"}) == "unsupported_version"


def test_the_producer_stamps_the_configured_minor_version(monkeypatch):
    """An upgrade publishes the next minor version (``DGB_EVENT_MINOR_VERSION``) on every event it
    builds, the major unchanged; unset, the code's own; and what it stamps, this code consumes."""
    topic = topology.TOPIC_SCRAPED
    monkeypatch.delenv("DGB_EVENT_MINOR_VERSION", raising=False)
    assert events.make_event(topic, PAYLOADS[topic]).attributes["event_version"] == topology.EVENT_VERSION
    major = topology.EVENT_VERSION.split(".")[0]
    for minor in ("1", "12"):
        monkeypatch.setenv("DGB_EVENT_MINOR_VERSION", minor)
        ev = events.make_event(topic, PAYLOADS[topic])
        assert ev.attributes["event_version"] == f"{major}.{minor}"
        assert events.parse_message(topic, ev.data(), ev.attributes).unique_id == "u1"
    for bad in ("-1", "1.1", "x", "10000"):
        monkeypatch.setenv("DGB_EVENT_MINOR_VERSION", bad)
        with pytest.raises(ValueError, match="DGB_EVENT_MINOR_VERSION"):
            events.make_event(topic, PAYLOADS[topic])
