"""Pipeline events: payload and attribute contracts per topic (production's), building and validating.

Every message carries attributes ``trace_id`` (UUID), ``event_version`` ("1.0"),
``unique_id`` (the attribute consumers deduplicate on: a re-publish gets a new message id, never
a new unique_id) and ``event_ts`` (ISO 8601, UTC).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

from dgb import topology

SUPPORTED_VERSIONS = frozenset({topology.EVENT_VERSION})

PAYLOAD_FIELDS = {
    topology.TOPIC_SCRAPED: ("unique_id", "agency_key", "published_at", "scraped_at"),
    topology.TOPIC_ENRICHED: ("unique_id", "enriched_at", "most_specific_theme_code", "has_summary"),
    topology.TOPIC_EMBEDDED: ("unique_id", "embedded_at", "embedding_dim"),
}
REQUIRED_ATTRIBUTES = ("trace_id", "event_version", "unique_id")


class InvalidEvent(ValueError):
    """A message that can never be processed (bad JSON, schema, version): dead-letter it."""

    def __init__(self, reason: str, detail: str = ""):
        self.reason = reason
        super().__init__(f"{reason}: {detail}" if detail else reason)


@dataclass(frozen=True)
class Event:
    topic: str
    payload: dict
    attributes: dict[str, str]

    @property
    def unique_id(self) -> str:
        return self.payload["unique_id"]

    @property
    def trace_id(self) -> str:
        return self.attributes["trace_id"]

    def data(self) -> bytes:
        return json.dumps(self.payload, ensure_ascii=False, separators=(",", ":")).encode()


def _iso(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def make_event(topic: str, payload: dict, trace_id: str | None = None, now: datetime | None = None) -> Event:
    fields = PAYLOAD_FIELDS[topic]
    missing = [f for f in fields if f not in payload]
    if missing:
        raise ValueError(f"{topic} payload misses {missing}")
    clean = {k: (_iso(v) if isinstance(v, datetime) else v) for k, v in payload.items() if k in fields}
    attrs = {
        "trace_id": str(trace_id or uuid.uuid4()),
        "event_version": topology.EVENT_VERSION,
        "unique_id": str(payload["unique_id"]),
        "event_ts": (now or datetime.now(timezone.utc)).isoformat(),
    }
    return Event(topic, clean, attrs)


def parse_message(topic: str, data: bytes | str, attributes: dict[str, str] | None) -> Event:
    """Validate a received message against its topic's contract; raise InvalidEvent if it never can pass."""
    attributes = dict(attributes or {})
    missing = [a for a in REQUIRED_ATTRIBUTES if not attributes.get(a)]
    if missing:
        raise InvalidEvent("missing_attributes", f"{missing}")
    if attributes["event_version"] not in SUPPORTED_VERSIONS:
        raise InvalidEvent("unsupported_version", attributes["event_version"])
    try:
        payload = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidEvent("malformed_json", str(exc)[:200]) from exc
    if not isinstance(payload, dict):
        raise InvalidEvent("malformed_payload", "payload is not a JSON object")
    fields = PAYLOAD_FIELDS.get(topic)
    if fields is None:
        raise InvalidEvent("unknown_topic", topic)
    absent = [f for f in fields if f not in payload]
    if absent:
        raise InvalidEvent("malformed_payload", f"missing fields {absent}")
    if not isinstance(payload["unique_id"], str) or not payload["unique_id"]:
        raise InvalidEvent("malformed_payload", "unique_id must be a non-empty string")
    if payload["unique_id"] != attributes["unique_id"]:
        raise InvalidEvent("malformed_payload", "unique_id attribute differs from payload")
    return Event(topic, payload, attributes)
