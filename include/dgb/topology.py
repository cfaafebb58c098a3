"""Pub/Sub topology, declared once.

The same declaration is applied to the local emulator (`make up`, tests) and to real GCP
(`dgb topology apply --project ...` with real credentials), and rendered for review
(`dgb topology show`; the commands live in :mod:`dgb.topology_cli`). Ack deadlines follow
production (600 s for enrichment and embeddings, 120 s for the Typesense subscriptions), each with
a dead-letter topic. The emulator does not implement dead-letter or retry policies reliably, so
our consumers implement both themselves; the policies are still declared and sent so production
gets them.
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
    subs = []
    for s in SUBSCRIPTIONS:
        body = {
            "name": f"projects/{project}/subscriptions/{s.name}",
            "topic": f"projects/{project}/topics/{s.topic}",
            "ack_deadline_seconds": s.ack_deadline_s,
            "message_retention_duration": f"{s.message_retention_s}s",
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
            }
        )
    return {"project": project, "topics": topics, "subscriptions": subs}


def apply(project: str, publisher=None, subscriber=None) -> dict:
    """Create what is missing and bring existing subscriptions' policies in line. Idempotent."""
    from google.api_core import exceptions
    from google.cloud import pubsub_v1
    from google.protobuf import duration_pb2, field_mask_pb2

    publisher = publisher or pubsub_v1.PublisherClient()
    subscriber = subscriber or pubsub_v1.SubscriberClient()
    spec = render(project)
    created, updated = [], []
    for topic in spec["topics"]:
        try:
            publisher.create_topic(request={"name": topic})
            created.append(topic.rsplit("/", 1)[1])
        except exceptions.AlreadyExists:
            pass
    for body in spec["subscriptions"]:
        request = _subscription_request(body, duration_pb2)
        try:
            subscriber.create_subscription(request=request)
            created.append(body["name"].rsplit("/", 1)[1])
        except exceptions.AlreadyExists:
            current = subscriber.get_subscription(request={"subscription": body["name"]})
            if _drifted(current, body):
                paths = ["ack_deadline_seconds", "dead_letter_policy", "retry_policy"]
                paths = [p for p in paths if p in body or p == "ack_deadline_seconds"]
                subscriber.update_subscription(
                    request={
                        "subscription": request,
                        "update_mask": field_mask_pb2.FieldMask(paths=paths),
                    }
                )
                updated.append(body["name"].rsplit("/", 1)[1])
    return {"created": created, "updated": updated}


def _subscription_request(body: dict, duration_pb2) -> dict:
    def dur(text: str):
        return duration_pb2.Duration(seconds=int(text.rstrip("s")))

    req = {
        "name": body["name"],
        "topic": body["topic"],
        "ack_deadline_seconds": body["ack_deadline_seconds"],
        "message_retention_duration": dur(body["message_retention_duration"]),
    }
    if "dead_letter_policy" in body:
        req["dead_letter_policy"] = dict(body["dead_letter_policy"])
    if "retry_policy" in body:
        req["retry_policy"] = {k: dur(v) for k, v in body["retry_policy"].items()}
    return req


def _drifted(current, body: dict) -> bool:
    if current.ack_deadline_seconds != body["ack_deadline_seconds"]:
        return True
    dlp = body.get("dead_letter_policy")
    if dlp and (
        current.dead_letter_policy.dead_letter_topic != dlp["dead_letter_topic"]
        or current.dead_letter_policy.max_delivery_attempts != dlp["max_delivery_attempts"]
    ):
        # the emulator may not store dead-letter policies; only report drift when it does
        return bool(current.dead_letter_policy.dead_letter_topic)
    return False


def apply_to_emulator(settings) -> dict:
    os.environ["PUBSUB_EMULATOR_HOST"] = settings.pubsub_emulator_host
    return apply(settings.gcp_project)


def existing(project: str) -> dict:
    """What the server has now (topics and subscriptions under our prefixes)."""
    from google.cloud import pubsub_v1

    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    topics = sorted(t.name for t in publisher.list_topics(request={"project": f"projects/{project}"}))
    subs = sorted(s.name for s in subscriber.list_subscriptions(request={"project": f"projects/{project}"}))
    return {"topics": topics, "subscriptions": subs}


def describe_subscriptions() -> list[dict]:
    return [asdict(s) | {"dead_letter_topic": s.dead_letter_topic} for s in SUBSCRIPTIONS]
