"""Pulling from the Pub/Sub emulator in tests: raw messages (``pull_all``) or messages as the
pipeline's trigger hands them to a DAG run (``pull``)."""

from __future__ import annotations

from dgb.pipeline.messages import InMessage


def pull_all(project: str, subscription: str, want: int, timeout: float = 5.0) -> list:
    """Pull and ack up to ``want`` messages (ReceivedMessage objects) with the plain client; stops at
    the first empty answer. Blocking: from a coroutine, run it in a thread."""
    from google.api_core import exceptions
    from google.cloud import pubsub_v1

    sub = pubsub_v1.SubscriberClient()
    path = f"projects/{project}/subscriptions/{subscription}"
    out: list = []
    for _ in range(10):
        try:
            resp = sub.pull(request={"subscription": path, "max_messages": 100}, timeout=timeout)
        except exceptions.DeadlineExceeded:
            break
        if not resp.received_messages:
            break
        sub.acknowledge(request={"subscription": path, "ack_ids": [m.ack_id for m in resp.received_messages]})
        out.extend(resp.received_messages)
        if len(out) >= want:
            break
    return out


def pull(project: str, subscription: str, want: int, ack: bool = True) -> list[InMessage]:
    """Pull messages as the trigger hands them to a DAG run (its raw-event payload)."""
    from google.cloud import pubsub_v1

    from dgb_airflow.triggers.pubsub import raw_event

    sub = pubsub_v1.SubscriberClient()
    path = f"projects/{project}/subscriptions/{subscription}"
    out = []
    for _ in range(20):
        resp = sub.pull(request={"subscription": path, "max_messages": 100}, timeout=5)
        for m in resp.received_messages:
            out.append(InMessage.from_payload(subscription, raw_event(m)))
        if resp.received_messages and ack:
            sub.acknowledge(
                request={"subscription": path, "ack_ids": [m.ack_id for m in resp.received_messages]}
            )
        if len(out) >= want:
            break
    return out
