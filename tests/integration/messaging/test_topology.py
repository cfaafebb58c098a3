"""Pub/Sub topology against the real emulator: applied twice, everything declared exists."""

import uuid

import pytest

from dgb import topology

pytestmark = pytest.mark.stack


def test_apply_twice_creates_everything_once(pubsub_server):
    project = f"dgb-topo-{uuid.uuid4().hex[:8]}"
    first = topology.apply(project)
    spec = topology.render(project)
    assert len(first["created"]) == len(spec["topics"]) + len(spec["subscriptions"])
    assert topology.apply(project) == {"created": [], "updated": []}
    have = topology.existing(project)
    assert have["topics"] == sorted(spec["topics"])
    assert have["subscriptions"] == sorted(s["name"] for s in spec["subscriptions"])


def test_declared_policies_follow_seed_table(pubsub_server):
    from google.cloud import pubsub_v1

    project = f"dgb-topo-{uuid.uuid4().hex[:8]}"
    topology.apply(project)
    sub = pubsub_v1.SubscriberClient()
    expected = {
        "dgb.news.scraped--enrichment": (600, 10, 600, 10),
        "dgb.news.enriched--typesense": (120, 10, 300, 5),
        "dgb.news.enriched--embeddings": (600, 30, 600, 5),
        "dgb.news.embedded--typesense-update": (120, 0, 0, 5),
    }
    for name, (ack, min_b, max_b, attempts) in expected.items():
        got = sub.get_subscription(request={"subscription": f"projects/{project}/subscriptions/{name}"})
        assert got.ack_deadline_seconds == ack
        assert got.retry_policy.minimum_backoff.seconds == min_b
        assert got.retry_policy.maximum_backoff.seconds == max_b
        assert got.dead_letter_policy.dead_letter_topic == f"projects/{project}/topics/{name}-dlq"
        assert got.dead_letter_policy.max_delivery_attempts == attempts


def test_drift_is_corrected(pubsub_server):
    from google.cloud import pubsub_v1
    from google.protobuf import field_mask_pb2

    project = f"dgb-topo-{uuid.uuid4().hex[:8]}"
    topology.apply(project)
    sub = pubsub_v1.SubscriberClient()
    path = f"projects/{project}/subscriptions/{topology.SUB_TYPESENSE}"
    sub.update_subscription(
        request={
            "subscription": {"name": path, "ack_deadline_seconds": 33},
            "update_mask": field_mask_pb2.FieldMask(paths=["ack_deadline_seconds"]),
        }
    )
    assert topology.apply(project)["updated"] == [topology.SUB_TYPESENSE]
    assert sub.get_subscription(request={"subscription": path}).ack_deadline_seconds == 120


def test_every_subscription_never_expires_and_topics_retain_messages_for_replay(pubsub_server):
    """Real Pub/Sub deletes a subscription idle for 31 days unless its expiration policy says
    otherwise: every declared one has an empty TTL (never). Replay's new subscription can only
    seek back to messages published before it existed when the topic retains them."""
    from google.cloud import pubsub_v1

    spec = topology.render("p")
    assert all(s["expiration_policy"] == {"ttl": topology.NEVER_EXPIRE} for s in spec["subscriptions"])
    assert set(spec["topic_retention"]) == {f"projects/p/topics/{t}" for t in topology.TOPICS}

    project = f"dgb-topo-{uuid.uuid4().hex[:8]}"
    topology.apply(project)
    sub, pub = pubsub_v1.SubscriberClient(), pubsub_v1.PublisherClient()
    for body in topology.render(project)["subscriptions"]:
        got = sub.get_subscription(request={"subscription": body["name"]})
        assert "expiration_policy" in got and got.expiration_policy.ttl.total_seconds() == 0, body["name"]
        assert got.retain_acked_messages is False
    for name in topology.TOPICS:
        got = pub.get_topic(request={"topic": f"projects/{project}/topics/{name}"})
        assert got.message_retention_duration.total_seconds() == topology.TOPIC_RETENTION_S


def test_a_subscription_created_without_an_expiration_policy_is_reported(pubsub_server):
    """A subscription made by hand (Pub/Sub's default: expire after 31 idle days) is drift; the
    emulator cannot update the policy, so apply leaves it there and real Pub/Sub gets the update."""
    from google.cloud import pubsub_v1

    project = f"dgb-topo-{uuid.uuid4().hex[:8]}"
    body = next(
        b for b in topology.render(project)["subscriptions"] if b["name"].endswith(topology.SUB_TYPESENSE)
    )
    pubsub_v1.PublisherClient().create_topic(request={"name": body["topic"]})
    sub = pubsub_v1.SubscriberClient()
    sub.create_subscription(
        request={"name": body["name"], "topic": body["topic"], "ack_deadline_seconds": 120}
    )
    current = sub.get_subscription(request={"subscription": body["name"]})
    assert "expiration_policy" in topology._drifted(current, body)
    topology.apply(project)  # does not fail on the emulator's refusal


def test_an_existing_topic_without_retention_gets_it(pubsub_server):
    """A stack whose topics predate the retention declaration: apply brings them in line."""
    from google.cloud import pubsub_v1

    project = f"dgb-topo-{uuid.uuid4().hex[:8]}"
    pub = pubsub_v1.PublisherClient()
    path = f"projects/{project}/topics/{topology.TOPIC_ENRICHED}"
    pub.create_topic(request={"name": path})
    assert pub.get_topic(request={"topic": path}).message_retention_duration.total_seconds() == 0
    assert topology.TOPIC_ENRICHED in topology.apply(project)["updated"]
    got = pub.get_topic(request={"topic": path})
    assert got.message_retention_duration.total_seconds() == topology.TOPIC_RETENTION_S
    assert topology.apply(project) == {"created": [], "updated": []}
