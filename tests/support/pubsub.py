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


def drain(project: str, subscription: str) -> list[InMessage]:
    """Pull and ack everything ``subscription`` holds now, as the trigger hands it to a DAG run; the
    ack comes first, as the trigger's does once the asset event is stored (what the run then does
    with the messages is the run's business). ``return_immediately``: the emulator then answers at
    once, with every message it holds or none (a plain pull of an empty subscription waits out its
    timeout)."""
    import warnings

    from google.cloud import pubsub_v1

    from dgb_airflow.triggers.pubsub import raw_event

    sub = pubsub_v1.SubscriberClient()
    path = f"projects/{project}/subscriptions/{subscription}"
    out: list[InMessage] = []
    while True:
        with warnings.catch_warnings():  # return_immediately is deprecated for real Pub/Sub
            warnings.simplefilter("ignore", DeprecationWarning)
            resp = sub.pull(
                request={"subscription": path, "max_messages": 1000, "return_immediately": True}, timeout=30
            )
        if not resp.received_messages:
            return out
        sub.acknowledge(request={"subscription": path, "ack_ids": [m.ack_id for m in resp.received_messages]})
        out += [InMessage.from_payload(subscription, raw_event(m)) for m in resp.received_messages]
