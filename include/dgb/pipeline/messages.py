"""What a stage run works on: the Pub/Sub messages it got (:class:`InMessage`) and the articles
they, a manual run or the sweep name (:class:`Work`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import ValidationError

from dgb import events, topology


@dataclass(frozen=True)
class InMessage:
    """One Pub/Sub message as it reached the stage (from an asset event's payload)."""

    subscription: str
    message_id: str
    data: bytes
    attributes: dict[str, str]

    @classmethod
    def from_payload(cls, subscription: str, payload: dict) -> InMessage:
        """From an asset event's payload (the :class:`dgb.events.AssetPayload` contract). A payload
        that breaks the contract still becomes a message, which the run then dead-letters."""
        try:
            asset = events.AssetPayload.model_validate(payload)
        except ValidationError:
            attrs = payload.get("attributes")
            asset = events.AssetPayload(
                message_id=str(payload.get("message_id") or ""),
                data=str(payload.get("data") or ""),
                attributes={str(k): str(v) for k, v in attrs.items()} if isinstance(attrs, dict) else {},
            )
        return cls(subscription, asset.message_id, asset.raw_data(), dict(asset.attributes))


def topic_of(subscription: str) -> str:
    """The topic a subscription's messages come from (their payload schema)."""
    return topology.subscription(subscription).topic


@dataclass
class Work:
    """One article a run takes up: named by messages (their ids), a manual run or the sweep."""

    unique_id: str
    trace_id: str | None
    subscription: str
    message_ids: list[str] = field(default_factory=list)
    row: dict | None = None
    manual: bool = False  # named by a manual run (takes up a parked article too)
