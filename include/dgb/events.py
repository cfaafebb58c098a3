"""Pipeline events: the message and asset-payload contracts, as typed models, with building and
validating.

Two contracts, one home:

* **the message** on each topic: a JSON payload, one pydantic model per topic
  (:data:`PAYLOAD_MODELS`: :class:`ScrapedPayload`, :class:`EnrichedPayload`,
  :class:`EmbeddedPayload`), and the attributes every message carries (:class:`Attributes`):
  ``trace_id`` (UUID), ``event_version`` ("1.0": :func:`published_version`), ``unique_id`` (the
  dedup attribute, equal to the payload's) and ``event_ts`` (ISO 8601, UTC). :func:`make_event`
  builds one for the outbox; :func:`parse_message` is the ONE validating entry point (the Pub/Sub
  trigger's filter and the stages both call it) and returns a typed :class:`Message` or raises
  :class:`InvalidEvent` with a dead-letter reason;
* **the asset-event payload** (:class:`AssetPayload`): how the trigger hands a received Pub/Sub
  message to a DAG run (message id, base64 data, attributes, publish time, delivery attempt).

Payload models check what a consumer needs (fields present, of a JSON type that fits) and no
more: unknown extra fields are ignored (producers may add fields; ``event_version`` changes
when a field's meaning changes).
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from dgb import topology
from dgb.config import messaging as messaging_config

SUPPORTED_VERSIONS = frozenset({topology.EVENT_VERSION})
_VERSION = re.compile(r"(\d{1,4})\.(\d{1,4})")


def version_supported(version: str) -> bool:
    """Whether a consumer of this code accepts a message of ``event_version``: every
    ``MAJOR.MINOR`` of our major, older and newer minors alike.

    A minor version only adds fields (which the payload models ignore) and never changes a
    field's meaning, so during a rolling upgrade the old and the new workers both take the
    other's messages and none is dead-lettered for its version. A different major (a changed
    meaning) or a version that is not ``MAJOR.MINOR`` is ``unsupported_version``: dead-lettered,
    kept, and replayable once a consumer that knows it runs (docs: the upgrade runbook)."""
    if version in SUPPORTED_VERSIONS:
        return True
    m = _VERSION.fullmatch(version)
    return bool(m) and int(m.group(1)) == int(topology.EVENT_VERSION.split(".")[0])


def published_version() -> str:
    """The ``event_version`` this producer stamps: the code's (``topology.EVENT_VERSION``), or its
    major with the minor of ``DGB_EVENT_MINOR_VERSION`` (an upgrade that publishes the next minor
    while older consumers still run). Read at every event, so a process's setting is what counts."""
    minor = messaging_config.event_minor_version()
    if minor is None:
        return topology.EVENT_VERSION
    return f"{topology.EVENT_VERSION.split('.')[0]}.{minor}"


NonEmpty = Annotated[StrictStr, Field(min_length=1)]


class InvalidEvent(ValueError):
    """A message that can never be processed (bad JSON, schema, version): dead-letter it."""

    def __init__(self, reason: str, detail: str = ""):
        self.reason = reason
        super().__init__(f"{reason}: {detail}" if detail else reason)


# --------------------------------------------------------------------------- payloads per topic


class _Payload(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    unique_id: NonEmpty


class ScrapedPayload(_Payload):
    """``dgb.news.scraped``: an article was stored (new or edited)."""

    agency_key: StrictStr
    published_at: StrictStr | None  # ISO 8601
    scraped_at: StrictStr  # ISO 8601


class EnrichedPayload(_Payload):
    """``dgb.news.enriched``: an article got its themes and summary."""

    enriched_at: StrictStr
    most_specific_theme_code: StrictStr | None
    has_summary: StrictBool


class EmbeddedPayload(_Payload):
    """``dgb.news.embedded``: an article got its vector."""

    embedded_at: StrictStr
    embedding_dim: StrictInt


PAYLOAD_MODELS: dict[str, type[_Payload]] = {
    topology.TOPIC_SCRAPED: ScrapedPayload,
    topology.TOPIC_ENRICHED: EnrichedPayload,
    topology.TOPIC_EMBEDDED: EmbeddedPayload,
}
# topic -> the payload's fields, in order (derived from the models)
PAYLOAD_FIELDS: dict[str, tuple[str, ...]] = {t: tuple(m.model_fields) for t, m in PAYLOAD_MODELS.items()}

Payload = ScrapedPayload | EnrichedPayload | EmbeddedPayload


class Attributes(BaseModel):
    """The attributes every message carries (others, e.g. ``dgb_source``, are kept as they are)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    trace_id: NonEmpty
    event_version: NonEmpty
    # The dedup attribute. Production's publishers (DestaquesGovBr's scrapers, which may still run
    # during a switch-over) send only trace_id and event_version: their messages are accepted and
    # get the payload's unique_id as this attribute.
    unique_id: NonEmpty | None = None
    event_ts: StrictStr | None = None


REQUIRED_ATTRIBUTES = tuple(n for n, f in Attributes.model_fields.items() if f.is_required())


class Message(BaseModel):
    """A received message that passed its topic's contract (what :func:`parse_message` returns)."""

    model_config = ConfigDict(frozen=True)

    topic: str
    payload: Payload
    attributes: dict[str, str]  # all of them, the required ones checked by :class:`Attributes`

    @property
    def unique_id(self) -> str:
        return self.payload.unique_id

    @property
    def trace_id(self) -> str:
        return self.attributes["trace_id"]


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'payload'}: {e['msg']}" for e in exc.errors()[:5]
    )


def parse_message(topic: str, data: bytes | str, attributes: dict[str, str] | None) -> Message:
    """Validate a received message against its topic's contract; raise InvalidEvent (whose
    ``reason`` is the dead-letter reason) if it can never pass.

    Reasons, checked in this order: ``missing_attributes``, ``unsupported_version``,
    ``malformed_json``, ``malformed_payload`` (not an object, a field missing or of the wrong
    type, or ``unique_id`` differing from its attribute), ``unknown_topic``."""
    attributes = {str(k): str(v) for k, v in (attributes or {}).items()}
    try:
        required = Attributes.model_validate(attributes)
    except ValidationError as exc:
        raise InvalidEvent("missing_attributes", _problems(exc)) from exc
    if not version_supported(required.event_version):
        raise InvalidEvent("unsupported_version", required.event_version)
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidEvent("malformed_json", str(exc)[:200]) from exc
    if not isinstance(raw, dict):
        raise InvalidEvent("malformed_payload", "payload is not a JSON object")
    model = PAYLOAD_MODELS.get(topic)
    if model is None:
        raise InvalidEvent("unknown_topic", topic)
    try:
        payload = model.model_validate(raw)
    except ValidationError as exc:
        raise InvalidEvent("malformed_payload", _problems(exc)) from exc
    attributes.setdefault("unique_id", payload.unique_id)
    if payload.unique_id != attributes["unique_id"]:
        raise InvalidEvent("malformed_payload", "unique_id attribute differs from payload")
    return Message(topic=topic, payload=payload, attributes=attributes)


# --------------------------------------------------------------------------- building


@dataclass(frozen=True)
class Event:
    """An event to publish (through the outbox): topic, JSON payload, attributes."""

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
    """The ``topic`` event for ``payload`` (datetimes become ISO 8601; fields outside the topic's
    contract are dropped); ValueError when a contract field is missing."""
    fields = PAYLOAD_FIELDS[topic]
    missing = [f for f in fields if f not in payload]
    if missing:
        raise ValueError(f"{topic} payload misses {missing}")
    clean = {k: (_iso(v) if isinstance(v, datetime) else v) for k, v in payload.items() if k in fields}
    attrs = {
        "trace_id": str(trace_id or uuid.uuid4()),
        "event_version": published_version(),
        "unique_id": str(payload["unique_id"]),
        "event_ts": (now or datetime.now(UTC)).isoformat(),
    }
    return Event(topic, clean, attrs)


# --------------------------------------------------------------------------- asset-event payload


class AssetPayload(BaseModel):
    """A received Pub/Sub message as the trigger stores it in an asset event (JSON-serialisable)
    and a stage run reads it back."""

    model_config = ConfigDict(extra="ignore", frozen=True, coerce_numbers_to_str=True)

    message_id: str
    data: str = ""  # base64 of the message bytes
    attributes: dict[str, str] = Field(default_factory=dict)
    publish_time: str | None = None  # ISO 8601
    delivery_attempt: int = 0

    @classmethod
    def from_received(cls, received: Any) -> AssetPayload:
        """From a ``google.pubsub_v1.ReceivedMessage`` (what a pull returns)."""
        m = received.message
        return cls(
            message_id=m.message_id,
            data=base64.b64encode(m.data).decode("ascii"),
            attributes=dict(m.attributes),
            publish_time=m.publish_time.isoformat() if m.publish_time else None,
            delivery_attempt=received.delivery_attempt or 0,
        )

    def raw_data(self) -> bytes:
        """The message bytes (data that is not valid base64 is taken as it is, so the stage
        dead-letters it as malformed rather than losing it)."""
        try:
            return base64.b64decode(self.data, validate=True)
        except (ValueError, TypeError):
            return self.data.encode()
