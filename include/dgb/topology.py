"""Pub/Sub topology, declared once.

The same declaration is applied to the local emulator (`make up`, tests) and to real GCP
(`dgb topology apply --project ...` with real credentials), and rendered for review
(`dgb topology show`; the commands live in :mod:`dgb.topology_cli`). Ack deadlines follow
production (600 s for enrichment and embeddings, 120 s for the Typesense subscriptions), each with
a dead-letter topic. The emulator does not implement dead-letter or retry policies reliably, so
our consumers implement both themselves; the policies are still declared and sent so production
gets them.

Replay (:mod:`dgb.reconcile.replay`) snapshots a subscription, creates a NEW subscription
from the snapshot and seeks it back to the window's start; a subscription created now only sees
messages published before it when the TOPIC retains them, so every pipeline topic declares
``message_retention_duration`` (:data:`TOPIC_RETENTION_S`, 7 days: the replay horizon, billed as
storage in production). The consumers' own subscriptions need no ``retain_acked_messages`` for
that (``retain_acked_messages`` is declared per subscription, false by default). Real Pub/Sub
deletes a subscription idle for 31 days unless its ``expiration_policy`` says otherwise: every
declared subscription has an empty TTL (never expires), since a quiet agency or a paused DAG must
not lose its subscription; only replay's temporary subscriptions get a TTL
(:data:`REPLAY_SUBSCRIPTION_TTL_S`), so one a crashed replay left behind removes itself.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

TOPIC_SCRAPED = "dgb.news.scraped"
TOPIC_ENRICHED = "dgb.news.enriched"
TOPIC_EMBEDDED = "dgb.news.embedded"
TOPICS = (TOPIC_SCRAPED, TOPIC_ENRICHED, TOPIC_EMBEDDED)

SUB_ENRICHMENT = "dgb.news.scraped--enrichment"
SUB_TYPESENSE = "dgb.news.enriched--typesense"
SUB_EMBEDDINGS = "dgb.news.enriched--embeddings"
SUB_TYPESENSE_UPDATE = "dgb.news.embedded--typesense-update"

EVENT_VERSION = "1.0"
TOPIC_RETENTION_S = 7 * 24 * 3600  # topics keep messages this long: the horizon of a replay
NEVER_EXPIRE = ""  # expiration_policy.ttl of a subscription that never expires
REPLAY_SUBSCRIPTION_TTL_S = 24 * 3600  # a replay's temporary subscription expires after 1 idle day
REPLAY_SUFFIX = "--replay-"  # replay subscriptions are named <subscription>--replay-<stamp>
DLQ_SUFFIX = "-dlq"


@dataclass(frozen=True)
class Subscription:
    name: str
    topic: str
    ack_deadline_s: int
    min_backoff_s: int | None  # None: no retry policy (immediate redelivery)
    max_backoff_s: int | None
    max_delivery_attempts: int  # our consumers dead-letter after this many failures too
    message_retention_s: int = 7 * 24 * 3600
    retain_acked_messages: bool = False  # replay works from topic retention (module doc)

    @property
    def dead_letter_topic(self) -> str:
        return self.name + DLQ_SUFFIX

    @property
    def dead_letter_subscription(self) -> str:
        return self.dead_letter_topic + "--inspect"


# Production's subscriptions and ack deadlines. dgb.news.embedded--typesense-update has no retry
# policy and no limit there; Pub/Sub requires 5..100 attempts for a dead-letter policy, so it gets 5.
SUBSCRIPTIONS = (
    Subscription(SUB_ENRICHMENT, TOPIC_SCRAPED, 600, 10, 600, 10),
    Subscription(SUB_TYPESENSE, TOPIC_ENRICHED, 120, 10, 300, 5),
    Subscription(SUB_EMBEDDINGS, TOPIC_ENRICHED, 600, 30, 600, 5),
    Subscription(SUB_TYPESENSE_UPDATE, TOPIC_EMBEDDED, 120, None, None, 5),
)


def subscription(name: str) -> Subscription:
    for sub in SUBSCRIPTIONS:
        if sub.name == name:
            return sub
    raise KeyError(f"unknown subscription {name!r}")


def render(project: str) -> dict:
    """The full topology as plain data (resource paths, policies): what `apply` creates."""
    topics = [f"projects/{project}/topics/{t}" for t in TOPICS]
    topics += [f"projects/{project}/topics/{s.dead_letter_topic}" for s in SUBSCRIPTIONS]
    # topic -> message_retention_duration, for the topics replay seeks in (the pipeline's own)
    retention = {f"projects/{project}/topics/{t}": f"{TOPIC_RETENTION_S}s" for t in TOPICS}
    subs = []
    for s in SUBSCRIPTIONS:
        body = {
            "name": f"projects/{project}/subscriptions/{s.name}",
            "topic": f"projects/{project}/topics/{s.topic}",
            "ack_deadline_seconds": s.ack_deadline_s,
            "message_retention_duration": f"{s.message_retention_s}s",
            "retain_acked_messages": s.retain_acked_messages,
            "expiration_policy": {"ttl": NEVER_EXPIRE},
            "dead_letter_policy": {
                "dead_letter_topic": f"projects/{project}/topics/{s.dead_letter_topic}",
                "max_delivery_attempts": s.max_delivery_attempts,
            },
        }
        if s.min_backoff_s is not None:
            body["retry_policy"] = {
                "minimum_backoff": f"{s.min_backoff_s}s",
                "maximum_backoff": f"{s.max_backoff_s}s",
            }
        subs.append(body)
        subs.append(
            {
                "name": f"projects/{project}/subscriptions/{s.dead_letter_subscription}",
                "topic": f"projects/{project}/topics/{s.dead_letter_topic}",
                "ack_deadline_seconds": 60,
                "message_retention_duration": f"{s.message_retention_s}s",
                "retain_acked_messages": False,
                "expiration_policy": {"ttl": NEVER_EXPIRE},
            }
        )
    return {"project": project, "topics": topics, "topic_retention": retention, "subscriptions": subs}


def apply(project: str, publisher=None, subscriber=None) -> dict:
    """Create what is missing and bring existing subscriptions' policies in line. Idempotent."""
    from google.api_core import exceptions
    from google.protobuf import duration_pb2, field_mask_pb2

    from dgb.pubsub_clients import publisher_client, subscriber_client

    publisher = publisher or publisher_client()
    subscriber = subscriber or subscriber_client()
    spec = render(project)
    created: list[str] = []
    updated: list[str] = []
    for topic in spec["topics"]:
        request: dict = {"name": topic}
        retention = spec["topic_retention"].get(topic)
        if retention:
            request["message_retention_duration"] = _duration(retention, duration_pb2)
        try:
            publisher.create_topic(request=request)
            created.append(topic.rsplit("/", 1)[1])
        except exceptions.AlreadyExists:
            if retention:
                current = publisher.get_topic(request={"topic": topic})
                if int(seconds(current.message_retention_duration)) != int(retention.rstrip("s")):
                    publisher.update_topic(
                        request={
                            "topic": request,
                            "update_mask": field_mask_pb2.FieldMask(paths=["message_retention_duration"]),
                        }
                    )
                    updated.append(topic.rsplit("/", 1)[1])
    for body in spec["subscriptions"]:
        request = _subscription_request(body, duration_pb2)
        try:
            subscriber.create_subscription(request=request)
            created.append(body["name"].rsplit("/", 1)[1])
        except exceptions.AlreadyExists:
            current = subscriber.get_subscription(request={"subscription": body["name"]})
            drifted = _drifted(current, body)
            if drifted and os.environ.get("PUBSUB_EMULATOR_HOST"):
                # the emulator cannot update an expiration policy (it never expires anything);
                # real Pub/Sub gets the update
                drifted = [p for p in drifted if p != "expiration_policy"]
            if drifted:  # bring every declared policy in line, the drifted expiration policy too
                paths = [p for p in _UPDATABLE if p in body and (p != "expiration_policy" or p in drifted)]
                subscriber.update_subscription(
                    request={
                        "subscription": request,
                        "update_mask": field_mask_pb2.FieldMask(paths=paths),
                    }
                )
                updated.append(body["name"].rsplit("/", 1)[1])
    return {"created": created, "updated": updated}


def seconds(value) -> float:
    """A Duration field as proto-plus returns it (timedelta) or as raw protobuf, in seconds."""
    return value.total_seconds() if hasattr(value, "total_seconds") else float(value.seconds)


def _duration(text: str, duration_pb2):
    return duration_pb2.Duration(seconds=int(text.rstrip("s")))


def _subscription_request(body: dict, duration_pb2) -> dict:
    def dur(text: str):
        return _duration(text, duration_pb2)

    req = {
        "name": body["name"],
        "topic": body["topic"],
        "ack_deadline_seconds": body["ack_deadline_seconds"],
        "message_retention_duration": dur(body["message_retention_duration"]),
        "retain_acked_messages": body.get("retain_acked_messages", False),
    }
    if "expiration_policy" in body:
        ttl = body["expiration_policy"].get("ttl")
        req["expiration_policy"] = {"ttl": dur(ttl)} if ttl else {}
    if "dead_letter_policy" in body:
        req["dead_letter_policy"] = dict(body["dead_letter_policy"])
    if "retry_policy" in body:
        req["retry_policy"] = {k: dur(v) for k, v in body["retry_policy"].items()}
    return req


_UPDATABLE = (
    "ack_deadline_seconds",
    "dead_letter_policy",
    "retry_policy",
    "retain_acked_messages",
    "expiration_policy",
)


def _drifted(current, body: dict) -> list[str]:
    """The update-mask paths whose current value differs from the declaration."""
    paths = []
    if current.ack_deadline_seconds != body["ack_deadline_seconds"]:
        paths.append("ack_deadline_seconds")
    if bool(current.retain_acked_messages) != bool(body.get("retain_acked_messages", False)):
        paths.append("retain_acked_messages")
    if "expiration_policy" in body:
        ttl = body["expiration_policy"].get("ttl")
        want = int(ttl.rstrip("s")) if ttl else 0
        # an absent policy is Pub/Sub's default (deleted after 31 idle days): drift
        if "expiration_policy" not in current or int(seconds(current.expiration_policy.ttl)) != want:
            paths.append("expiration_policy")
    dlp = body.get("dead_letter_policy")
    # the emulator may not store dead-letter policies; only report drift when it does
    if (
        dlp
        and current.dead_letter_policy.dead_letter_topic
        and (
            current.dead_letter_policy.dead_letter_topic != dlp["dead_letter_topic"]
            or current.dead_letter_policy.max_delivery_attempts != dlp["max_delivery_attempts"]
        )
    ):
        paths.append("dead_letter_policy")
    return paths


def apply_to_emulator(settings) -> dict:
    os.environ["PUBSUB_EMULATOR_HOST"] = settings.pubsub_emulator_host
    return apply(settings.gcp_project)


def existing(project: str) -> dict:
    """What the server has now (topics and subscriptions under our prefixes)."""
    from dgb.pubsub_clients import publisher_client, subscriber_client

    publisher, subscriber = publisher_client(), subscriber_client()
    topics = sorted(t.name for t in publisher.list_topics(request={"project": f"projects/{project}"}))
    subs = sorted(s.name for s in subscriber.list_subscriptions(request={"project": f"projects/{project}"}))
    return {"topics": topics, "subscriptions": subs}


def describe_subscriptions() -> list[dict]:
    return [asdict(s) | {"dead_letter_topic": s.dead_letter_topic} for s in SUBSCRIPTIONS]
