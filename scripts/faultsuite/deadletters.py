"""The dead-letter side of the history: the ~5% poison messages the run sends (each must end up
dead-lettered), and every sign that one of the run's healthy articles was dead-lettered (a
``dead_letters`` row, ``news.problem = 'dead_letter'``, a dead-letter event in the outbox, a
message on a dead-letter topic). Outages are not poison: a healthy article must never be there."""

from __future__ import annotations

import json
import uuid

from dgb import events, topology

from .articles import Articles
from .context import Context
from .plumbing import Timeout, log, wait_for

# a value of the right JSON type for each payload field of dgb.events' contracts (others: "x")
POISON_VALUES = {
    "published_at": None,
    "most_specific_theme_code": None,
    "has_summary": False,
    "embedding_dim": 1,
}


class DeadLetterWatch:
    def __init__(self, ctx: Context, articles: Articles):
        self.ctx = ctx
        self.articles = articles
        self.poison_sent: dict[str, str] = {}  # poison id -> kind
        self.poison_seen: set[str] = set()
        # dead_lettered_healthy: run article -> where it was seen dead-lettered (table, flag, topic)
        self.dead_lettered: dict[str, set[str]] = {}

    def send_poison(self, count: int) -> None:
        from dgb import pubsub_clients

        publisher = pubsub_clients.publisher_client()
        kinds = (
            "malformed_json",
            "missing_attributes",
            "unsupported_version",
            "malformed_payload",
            "unknown_id",
        )
        for _ in range(count):
            pid = f"{self.ctx.tag}-poison-{len(self.poison_sent):03d}"
            kind = kinds[len(self.poison_sent) % len(kinds)]
            topic = topology.TOPICS[len(self.poison_sent) % len(topology.TOPICS)]
            attrs = {
                "trace_id": str(uuid.uuid4()),
                "event_version": topology.EVENT_VERSION,
                "unique_id": pid,
                "dgb_fault_run": self.ctx.run_id,
                "dgb_poison_id": pid,
            }
            # every field of the topic's contract, well typed (an "unknown_id" poison passes validation)
            fields = {f: POISON_VALUES.get(f, "x") for f in events.PAYLOAD_FIELDS[topic]}
            data = json.dumps({**fields, "unique_id": pid}).encode()
            if kind == "malformed_json":
                data = b'{"unique_id": "' + pid.encode() + b'", oops'
            elif kind == "missing_attributes":
                attrs.pop("trace_id")
            elif kind == "unsupported_version":
                attrs["event_version"] = "9.9"
            elif kind == "malformed_payload":
                data = json.dumps({"unique_id": pid}).encode()  # the topic's other fields missing
            try:
                publisher.publish(f"projects/{self.ctx.s.gcp_project}/topics/{topic}", data, **attrs).result(
                    timeout=10
                )
                self.poison_sent[pid] = kind
            except Exception as exc:
                log(f"poison publish failed: {exc}")

    def await_poison(self, timeout: float) -> None:
        try:
            wait_for(
                lambda: (self.collect() or True) and set(self.poison_sent) <= self.poison_seen,
                timeout,
                "every poison message dead-lettered",
                every=3,
            )
        except Timeout as exc:
            missing = sorted(set(self.poison_sent) - self.poison_seen)
            log(f"{exc}: {[(p, self.poison_sent[p]) for p in missing[:10]]}")

    def collect(self) -> None:
        """Poison seen dead-lettered: on the dead-letter topics (inspect subscriptions; others'
        messages are released at once) or in the dead_letters table."""
        from google.api_core import exceptions

        from dgb import pubsub_clients

        ours = set(self.articles.all_uids())
        if not self.poison_sent and not ours:
            return
        try:
            rows = self.ctx.db.query(
                "SELECT coalesce(attributes->>'dgb_poison_id', unique_id) FROM dead_letters"
                " WHERE attributes->>'dgb_fault_run' = %s OR unique_id LIKE %s",
                (self.ctx.run_id, f"{self.ctx.tag}-poison-%"),
            )
            self.poison_seen |= {r[0] for r in rows if r[0]}
            sub = pubsub_clients.subscriber_client()
            for s in topology.SUBSCRIPTIONS:
                path = f"projects/{self.ctx.s.gcp_project}/subscriptions/{s.dead_letter_subscription}"
                try:
                    resp = sub.pull(request={"subscription": path, "max_messages": 100}, timeout=2)
                except exceptions.DeadlineExceeded:
                    continue
                mine, others = [], []
                for m in resp.received_messages:
                    article = m.message.attributes.get("unique_id")
                    if article not in ours:
                        try:
                            body = json.loads(m.message.data)
                            article = body.get("unique_id") if isinstance(body, dict) else None
                        except ValueError:
                            article = None
                    if article in ours:  # one of the run's healthy articles, dead-lettered
                        self.dead_lettered.setdefault(article, set()).add("topic")
                    pid = (
                        m.message.attributes.get("dgb_poison_id")
                        if m.message.attributes.get("dgb_fault_run") == self.ctx.run_id
                        else None
                    )
                    if pid is None:  # a dead letter written by a stage: the article id is in the body
                        try:
                            body = json.loads(m.message.data)
                            uid = body.get("unique_id") if isinstance(body, dict) else None
                        except ValueError:
                            uid = None
                        pid = (
                            uid
                            if isinstance(uid, str) and uid.startswith(f"{self.ctx.tag}-poison-")
                            else None
                        )
                    if pid and article not in ours:
                        self.poison_seen.add(pid)
                        mine.append(m.ack_id)
                    else:
                        others.append(m.ack_id)
                if mine:
                    sub.acknowledge(request={"subscription": path, "ack_ids": mine})
                if others:
                    sub.modify_ack_deadline(
                        request={"subscription": path, "ack_ids": others, "ack_deadline_seconds": 0}
                    )
        except Exception as exc:
            log(f"dead-letter check: {type(exc).__name__}: {str(exc)[:120]}")

    def observe(self) -> None:
        """The run's own (well-formed, healthy) articles dead-lettered at any point: a
        ``dead_letters`` row, ``news.problem = 'dead_letter'`` (polled: a later success may clear
        it), an event on a dead-letter topic in the outbox, or (:meth:`collect`) a message on
        a dead-letter topic. Outages must never put an article there."""
        try:
            self.articles.refresh_uids()
            uids = self.articles.all_uids()
            if not uids:
                return
            dlq_topics = sorted({s.dead_letter_topic for s in topology.SUBSCRIPTIONS})
            found = [
                (
                    "table",
                    "SELECT DISTINCT coalesce(unique_id, message_key) FROM dead_letters"
                    " WHERE unique_id = ANY(%(u)s) OR message_key = ANY(%(u)s)",
                ),
                (
                    "flag",
                    "SELECT unique_id FROM news WHERE unique_id = ANY(%(u)s) AND problem = 'dead_letter'",
                ),
                (
                    "outbox",
                    "SELECT DISTINCT aggregate_id FROM outbox WHERE aggregate_id = ANY(%(u)s)"
                    " AND topic = ANY(%(t)s)",
                ),
            ]
            for source, sql in found:
                for (uid,) in self.ctx.db.query(sql, {"u": uids, "t": dlq_topics}):
                    if uid in uids and source not in self.dead_lettered.get(uid, ()):
                        self.dead_lettered.setdefault(uid, set()).add(source)
                        log(f"healthy article {uid} dead-lettered ({source})")
        except Exception as exc:
            log(f"dead-letter observation: {type(exc).__name__}: {str(exc)[:160]}")
