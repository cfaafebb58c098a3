"""Replay: re-process a time window.

``republish`` re-emits, from PostgreSQL, the event of ``topic`` for every article whose stage
timestamp for that topic (scraped_at / enriched_at / embedded_at) falls in ``[start, end)``.
It is idempotent by construction: the stages skip work already done (their ``done`` rules in
:mod:`dgb.pipeline.definitions`: enrich: ``enriched_at`` set; embed: embedded with the current
model; index: ``indexed_version = version``), so replaying a window twice, or a window already
processed, changes nothing; only what is missing gets done.

``seek`` is Pub/Sub's own reprocessing workflow (never seek a subscription a running
pipeline consumes): for each subscription of ``topic`` (or the one named), snapshot it, create a
NEW subscription of the topic (``<subscription>--replay-<stamp>``, with a 1-day expiration in case
this run dies), seek the new one to the snapshot (it inherits the running subscription's state)
and then back to ``start`` (the topic retains 7 days of messages, declared in
:mod:`dgb.topology`, so messages already acked on the running subscription come back), pull it
dry, hand the messages published in ``[start, end)`` to the ``process`` callback (the stage that
consumes the subscription: the caller builds it), ack them on the new subscription, then delete
the new subscription and the snapshot. The running subscription and its DAGs are not touched.

A seek that cannot run (no client, a server or topic that cannot snapshot/seek, a window older
than the topic's retention) is an error (:class:`SeekUnavailable`) unless the caller opts in to
``fallback_republish``: then replay logs why and republishes from PostgreSQL instead.

``dgb replay`` and the ``replay_events`` DAG's operator both ask through :class:`ReplayRequest` and
:func:`replay_through_stages` (the seek callback: the consuming stage run over the window's
messages); they differ only in where their clients come from (settings or Airflow connections).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from dgb import topology
from dgb.db import transaction
from dgb.pipeline.definitions import DEFINITIONS
from dgb.pipeline.messages import InMessage
from dgb.pipeline.runner import RunOptions, run_stage
from dgb.pipeline.stage import Stage
from dgb.reconcile.resend import enqueue, event_for, load_rows
from dgb.reconcile.runs import record

log = logging.getLogger("dgb.reconcile")

# topic -> the stage timestamp that dates its event (the window a republish selects on)
STAGE_COLUMN = {
    topology.TOPIC_SCRAPED: "scraped_at",
    topology.TOPIC_ENRICHED: "enriched_at",
    topology.TOPIC_EMBEDDED: "embedded_at",
}


@dataclass
class ReplayReport:
    topic: str
    start: str
    end: str
    mode_requested: str
    mode_used: str = ""
    enqueued: int = 0
    # per subscription: {subscription, snapshot, replay_subscription, time, stage, delivered,
    # in_window, results (the process callback's reports)}
    seek: list[dict] = field(default_factory=list)
    fallback_reason: str | None = None
    dry_run: bool = False
    run_id: int | None = None

    def as_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        extra = f" (fallback: {self.fallback_reason})" if self.fallback_reason else ""
        what = (
            f"{self.enqueued} {self.topic} event(s) republished"
            if self.mode_used == "republish"
            else "replayed "
            + (
                ", ".join(f"{s['in_window']} message(s) of {s['subscription']}" for s in self.seek)
                or "nothing (dry run)"
            )
        )
        return f"replay {self.start}..{self.end} {self.mode_requested}->{self.mode_used}: {what}{extra}"


def _aware(value: datetime | str) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _snapshot_name(sub: str, stamp: str) -> str:
    base = re.sub(r"[^A-Za-z0-9._~+%-]", "-", sub)
    return f"dgb-replay-{base}-{stamp}"[:255]


class SeekUnavailable(RuntimeError):
    """Pub/Sub replay cannot run here (no client, no process callback, a server or topic that
    cannot snapshot/seek or does not retain the window); the message says why."""


Process = Callable[[str, list[InMessage]], dict]


def stage_of(subscription: str) -> str:
    """The stage that consumes ``subscription`` (the one whose messages a replay re-processes)."""
    for d in DEFINITIONS.values():
        if subscription in d.subscriptions:
            return d.name
    raise ValueError(f"no stage consumes {subscription}")


def _stamp(at: datetime) -> str:
    return f"{at.astimezone(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"


def _published(received) -> datetime | None:
    pt = received.message.publish_time
    if pt is None:
        return None
    return pt if pt.tzinfo else pt.replace(tzinfo=UTC)


def _replay_subscription(
    subscriber,
    publisher,
    project: str,
    sub: str,
    start: datetime,
    end: datetime,
    now: datetime,
    process: Process,
    limit: int,
    *,
    batch: int = 100,
    pull_timeout: float = 5.0,
    idle_pulls: int = 2,
) -> dict:
    """Pub/Sub's recommended reprocessing workflow for one subscription ``sub`` (which the running DAGs
    consume, and which is never seeked): snapshot it, create a NEW subscription of its topic,
    seek that one to the snapshot and then back to ``start``, pull it dry, hand the messages
    published in ``[start, end)`` to ``process`` (as messages of ``sub``), ack them there, and
    delete the new subscription and the snapshot whatever happens. Raises SeekUnavailable (with
    the reason) when the server refuses a step or the topic does not retain ``start``."""
    from google.api_core import exceptions
    from google.protobuf import duration_pb2, timestamp_pb2

    from dgb.events import AssetPayload

    declared = topology.subscription(sub)
    prefix = f"projects/{project}"
    topic_path = f"{prefix}/topics/{declared.topic}"
    stamp = _stamp(now)
    snap = f"{prefix}/snapshots/{_snapshot_name(sub, stamp)}"
    replay_sub = f"{prefix}/subscriptions/" + f"{sub}{topology.REPLAY_SUFFIX}{stamp}"[:255]
    try:
        retention = topology.seconds(
            publisher.get_topic(request={"topic": topic_path}).message_retention_duration
        )
    except exceptions.GoogleAPICallError as exc:
        raise SeekUnavailable(f"cannot read topic {declared.topic}: {type(exc).__name__}: {exc}") from exc
    if retention and retention < (now - start).total_seconds():
        raise SeekUnavailable(
            f"topic {declared.topic} retains messages for {retention:.0f}s; the window starts "
            f"{(now - start).total_seconds():.0f}s ago (older messages are gone from Pub/Sub)"
        )
    if not retention:
        raise SeekUnavailable(
            f"topic {declared.topic} retains no messages (message_retention_duration unset): a new "
            "subscription cannot seek back to the window (`dgb topology apply` declares it)"
        )
    out = {
        "subscription": sub,
        "snapshot": snap,
        "replay_subscription": replay_sub,
        "time": start.isoformat(),
        "delivered": 0,
        "in_window": 0,
        "stage": stage_of(sub),
        "results": [],
    }
    created_snap = created_sub = False
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(start.astimezone(UTC).replace(tzinfo=None))
    try:
        try:
            subscriber.create_snapshot(
                request={"name": snap, "subscription": f"{prefix}/subscriptions/{sub}"}
            )
            created_snap = True
            subscriber.create_subscription(
                request={
                    "name": replay_sub,
                    "topic": topic_path,
                    "ack_deadline_seconds": declared.ack_deadline_s,
                    "expiration_policy": {
                        "ttl": duration_pb2.Duration(seconds=topology.REPLAY_SUBSCRIPTION_TTL_S)
                    },
                    "labels": {"dgb-replay": "true"},
                }
            )
            created_sub = True
            # inherit the running subscription's state (its backlog and everything after) ...
            subscriber.seek(request={"subscription": replay_sub, "snapshot": snap})
            # ... then mark unacked what it already processed since the window's start
            subscriber.seek(request={"subscription": replay_sub, "time": ts})
        except exceptions.GoogleAPICallError as exc:
            raise SeekUnavailable(f"snapshot/seek for {sub} failed: {type(exc).__name__}: {exc}") from exc
        idle = 0
        while idle < idle_pulls and out["in_window"] < limit:
            try:
                resp = subscriber.pull(
                    request={"subscription": replay_sub, "max_messages": batch}, timeout=pull_timeout
                )
                received = list(resp.received_messages)
            except exceptions.DeadlineExceeded:
                received = []
            if not received:
                idle += 1
                continue
            idle = 0
            out["delivered"] += len(received)
            window = []
            for m in received:
                at = _published(m)
                if at is None or start <= at < end:
                    window.append(InMessage.from_payload(sub, AssetPayload.from_received(m).model_dump()))
            if window:
                out["results"].append(process(sub, window))  # raises: nothing acked, all redone
                out["in_window"] += len(window)
            subscriber.acknowledge(
                request={"subscription": replay_sub, "ack_ids": [m.ack_id for m in received]}
            )
    finally:
        for what, done, call, key in (
            ("subscription", created_sub, subscriber.delete_subscription, "subscription"),
            ("snapshot", created_snap, subscriber.delete_snapshot, "snapshot"),
        ):
            if not done:
                continue
            name = replay_sub if what == "subscription" else snap
            try:
                call(request={key: name})
            except exceptions.GoogleAPICallError as exc:  # it expires by itself; say so
                log.warning("replay: could not delete the replay %s %s: %s", what, name, exc)
    return out


def replay(
    conn,
    start: datetime | str,
    end: datetime | str,
    topic: str | None = None,
    mode: str = "republish",
    *,
    project: str | None = None,
    subscriber=None,
    publisher=None,
    process: Process | None = None,
    subscription: str | None = None,
    limit: int = 50_000,
    dry_run: bool = False,
    fallback_republish: bool = False,
    now: datetime | None = None,
) -> ReplayReport:
    """Re-process the window ``[start, end)`` of ``topic`` (default ``dgb.news.scraped``); see
    the module doc. ``mode="seek"`` needs ``project``, ``subscriber`` and ``publisher`` (Pub/Sub
    clients) and ``process(subscription, messages) -> dict`` (runs the consuming stage over
    the messages; raising leaves them unacked and fails the replay); ``subscription`` limits it
    to one subscription of the topic; ``limit`` bounds the articles (republish) or the window's
    messages per subscription (seek). Raises :class:`SeekUnavailable` when seek cannot run,
    unless ``fallback_republish``."""
    topic = topic or topology.TOPIC_SCRAPED
    if topic not in STAGE_COLUMN:
        raise ValueError(f"topic must be one of {list(STAGE_COLUMN)}")
    if mode not in ("republish", "seek"):
        raise ValueError("mode must be 'republish' or 'seek'")
    start_dt, end_dt = _aware(start), _aware(end)
    if end_dt <= start_dt:
        raise ValueError(f"end {end_dt.isoformat()} is not after start {start_dt.isoformat()}")
    now = now or datetime.now(UTC)
    rep = ReplayReport(topic, start_dt.isoformat(), end_dt.isoformat(), mode, dry_run=dry_run)
    if mode == "seek":
        subs = [s.name for s in topology.SUBSCRIPTIONS if s.topic == topic]
        if subscription:
            if subscription not in subs:
                raise ValueError(f"{subscription} is not a subscription of {topic}")
            subs = [subscription]
        try:
            if subscriber is None or publisher is None or not project:
                raise SeekUnavailable("no Pub/Sub subscriber/publisher client or project given")
            if process is None:
                raise SeekUnavailable("no stage to process the replayed messages (process callback)")
            if dry_run:
                rep.seek = [{"subscription": s, "stage": stage_of(s), "in_window": 0} for s in subs]
            else:
                for sub in subs:
                    rep.seek.append(
                        _replay_subscription(
                            subscriber, publisher, project, sub, start_dt, end_dt, now, process, limit
                        )
                    )
            rep.mode_used = "seek"
            log.info(
                "replay: %s through new subscriptions seeked to snapshots of %s (running ones untouched)",
                [(s["subscription"], s.get("in_window")) for s in rep.seek],
                subs,
            )
        except SeekUnavailable as exc:
            if not fallback_republish:
                log.error("replay: seek mode unavailable: %s (fallback to republish not requested)", exc)
                raise
            rep.fallback_reason = str(exc)
            log.warning(
                "replay: seek mode unavailable (%s); falling back to republish from PostgreSQL (requested)",
                rep.fallback_reason,
            )
    if not rep.mode_used:
        rep.mode_used = "republish"
        column = STAGE_COLUMN[topic]
        with transaction(conn) as cur:
            cur.execute(
                f"SELECT unique_id FROM news WHERE {column} >= %s AND {column} < %s"
                f" ORDER BY {column} LIMIT %s",
                (start_dt, end_dt, limit),
            )
            uids = [r[0] for r in cur.fetchall()]
            rows = load_rows(cur, uids)
            for uid in uids:
                if not dry_run:
                    enqueue(cur, event_for(rows[uid], topic, "replay"))
                rep.enqueued += 1
            if dry_run:
                conn.rollback()
        log.info(
            "replay: %d %s event(s) of %s..%s %s the outbox (idempotent: the stages skip work already done)",
            rep.enqueued,
            topic,
            start_dt.isoformat(),
            end_dt.isoformat(),
            "would go to" if dry_run else "written to",
        )
    if not dry_run:
        rep.run_id = record(
            conn,
            "replay",
            found={"articles": rep.enqueued}
            if rep.mode_used == "republish"
            else {"delivered": sum(s.get("delivered", 0) for s in rep.seek)},
            repaired={topic: rep.enqueued}
            if rep.mode_used == "republish"
            else {s["subscription"]: s["in_window"] for s in rep.seek},
            flagged=0,
            seconds=0.0,
            detail={
                "start": rep.start,
                "end": rep.end,
                "topic": topic,
                "mode": mode,
                "mode_used": rep.mode_used,
                "fallback_reason": rep.fallback_reason,
                "seek": [{k: v for k, v in s.items() if k != "results"} for s in rep.seek],
            },
        )
    log.info(rep.line())
    return rep


# --------------------------------------------------------------------------- wired to the stages


@dataclass(frozen=True)
class ReplayRequest:
    """What to replay (``dgb replay``'s options, the ``replay_events`` DAG's conf): the window
    ``[start, end)`` (ISO 8601) of ``topic``, how (``mode``), and the bounds of :func:`replay`."""

    start: str
    end: str
    topic: str = topology.TOPIC_SCRAPED
    mode: str = "republish"
    subscription: str | None = None
    limit: int = 50_000
    dry_run: bool = False
    fallback_republish: bool = False

    @classmethod
    def from_conf(cls, conf: dict) -> ReplayRequest:
        """From the ``replay_events`` DAG's conf/params: ``start`` and ``end`` required, the rest
        optional (unset or empty: the defaults)."""
        if not conf.get("start") or not conf.get("end"):
            raise ValueError("replay_events needs conf 'start' and 'end' (ISO 8601)")
        return cls(
            conf["start"],
            conf["end"],
            topic=conf.get("topic") or topology.TOPIC_SCRAPED,
            mode=conf.get("mode") or "republish",
            subscription=conf.get("subscription") or None,
            limit=int(conf.get("limit") or 50_000),
            dry_run=bool(conf.get("dry_run", False)),
            fallback_republish=bool(conf.get("fallback_republish", False)),
        )


def replay_through_stages(
    conn,
    request: ReplayRequest,
    build_stage: Callable[[str], Stage],
    *,
    project: str | None = None,
    subscriber=None,
    publisher=None,
) -> ReplayReport:
    """:func:`replay` of ``request`` with the stages as its seek callback: each subscription's
    window goes to the stage that consumes it (``build_stage(name)``: the caller's clients), run
    over those messages alone (no sweep). ``project``, ``subscriber`` and ``publisher``: the
    Pub/Sub clients seek mode needs (republish needs none)."""

    def process(subscription: str, messages: list[InMessage]) -> dict:
        stage = build_stage(stage_of(subscription))
        summary = run_stage(stage, conn, messages, RunOptions(sweep_limit=0)).summary()
        log.info("replayed %d message(s) of %s: %s", len(messages), subscription, summary)
        return summary

    return replay(
        conn,
        request.start,
        request.end,
        request.topic,
        request.mode,
        project=project,
        subscriber=subscriber,
        publisher=publisher,
        process=process,
        subscription=request.subscription,
        limit=request.limit,
        dry_run=request.dry_run,
        fallback_republish=request.fallback_republish,
    )
