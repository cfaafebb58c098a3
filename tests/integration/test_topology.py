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
