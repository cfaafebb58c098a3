"""Events published per article version, counted from outside: the oracle's own subscriptions.

:class:`EventCounter` opens one subscription of its own on each pipeline topic (``<name>--<topic>``,
beside the pipeline's) before the run, and :meth:`~EventCounter.drain` pulls and acks what they
got. An **event** is one publish the pipeline meant: its topic, payload and attributes (every event
carries the time it was made, ``event_ts`` to the microsecond, so two versions of an article, or two
stages' events, never give the same one). A **copy** is a distinct Pub/Sub message id of that same
event. A redelivery to the counter's subscription keeps its message id, so it is not a
copy; a second publish of the same outbox row is. :meth:`~EventCounter.duplicates` lists the events
with more than one copy: the pipeline published that article version's event more than once.

Subscriptions only receive what is published after they exist: open the counter before the run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from dgb import topology


class EventCounter:
    """Own subscriptions on ``topics`` of ``project`` (Pub/Sub or its emulator, as the
    ``PUBSUB_EMULATOR_HOST`` of :mod:`dgb.pubsub_clients` says)."""

    def __init__(self, project: str, topics: Iterable[str] = topology.TOPICS, name: str = "chaos-oracle"):
        self.project, self.topics, self.name = project, tuple(topics), name
        self._copies: dict[tuple, set[str]] = {}  # event identity -> message ids
        self._uid: dict[tuple, str] = {}
        self._subscriber = None

    def path(self, topic: str) -> str:
        return f"projects/{self.project}/subscriptions/{self.name}--{topic}"

    def open(self) -> EventCounter:
        """Create the subscriptions (an existing one is kept, with what it holds)."""
        from google.api_core import exceptions

        from dgb.pubsub_clients import subscriber_client

        self._subscriber = subscriber_client()
        for topic in self.topics:
            try:
                self._subscriber.create_subscription(
                    request={
                        "name": self.path(topic),
                        "topic": f"projects/{self.project}/topics/{topic}",
                        "ack_deadline_seconds": 60,
                    }
                )
            except exceptions.AlreadyExists:
                pass
        return self

    def drain(self, timeout: float = 30.0, max_rounds: int = 1000) -> int:
        """Pull and ack everything the subscriptions hold now (each stops at its first empty
        answer); returns the messages read. Pulls ask ``return_immediately``: the emulator then
        answers at once with what it holds (real Pub/Sub deprecates it and may answer empty while
        it holds messages: there, drain until several answers in a row are empty)."""
        import warnings

        from google.api_core import exceptions

        if self._subscriber is None:
            raise RuntimeError("EventCounter.drain before open()")
        n = 0
        for topic in self.topics:
            for _ in range(max_rounds):
                request = {"subscription": self.path(topic), "max_messages": 500, "return_immediately": True}
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", DeprecationWarning)
                        resp = self._subscriber.pull(request=request, timeout=timeout)
                except exceptions.DeadlineExceeded:
                    break
                got = resp.received_messages
                if not got:
                    break
                for m in got:
                    self.add(topic, m.message.data, dict(m.message.attributes), m.message.message_id)
                self._subscriber.acknowledge(
                    request={"subscription": self.path(topic), "ack_ids": [m.ack_id for m in got]}
                )
                n += len(got)
        return n

    def add(self, topic: str, data: bytes, attributes: dict[str, str], message_id: str) -> None:
        """Count one received message."""
        identity = (topic, bytes(data), tuple(sorted(attributes.items())))
        self._copies.setdefault(identity, set()).add(message_id)
        if identity not in self._uid:
            uid = attributes.get("unique_id")
            if not uid:
                try:
                    uid = json.loads(data).get("unique_id")
                except (ValueError, AttributeError):
                    uid = None
            self._uid[identity] = uid or "?"

    @property
    def distinct(self) -> int:
        """Distinct events seen."""
        return len(self._copies)

    def duplicates(self) -> dict[str, list[str]]:
        """``unique_id`` -> ``"<topic> x<copies>"`` for each of its events published more than once."""
        out: dict[str, list[str]] = {}
        for identity, ids in self._copies.items():
            if len(ids) > 1:
                out.setdefault(self._uid[identity], []).append(f"{identity[0]} x{len(ids)}")
        return {k: sorted(v) for k, v in sorted(out.items())}

    def close(self) -> None:
        """Delete the subscriptions (best effort)."""
        if self._subscriber is None:
            return
        for topic in self.topics:
            try:
                self._subscriber.delete_subscription(request={"subscription": self.path(topic)})
            except Exception:  # already gone, or the broker is down: nothing to keep anyway
                pass
        self._subscriber = None
