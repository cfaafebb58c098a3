"""Replay: re-process a time window.

``republish`` re-emits, from PostgreSQL, the event of ``topic`` for every article whose stage
timestamp for that topic (scraped_at / enriched_at / embedded_at) falls in ``[start, end)``.
It is idempotent by construction: the stages skip work already done (their ``done`` rules in
:mod:`dgb.pipeline.definitions`: enrich: ``enriched_at`` set; embed: embedded with the current
model; index: ``indexed_version = version``), so replaying a window twice, or a window already
processed, changes nothing; only what is missing gets done. ``seek`` works on Pub/Sub itself:
snapshot each subscription of the topic (a restore point: seek back to it to undo), then seek it
to ``start`` so Pub/Sub redelivers what it retained since then (``end`` cannot bound a seek:
later messages come again too, harmlessly). Seeking to a time only brings back acknowledged
messages when the subscription retains them (``retain_acked_messages``); when it does not,
or the server refuses snapshots/seek, replay logs why and falls back to ``republish``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from dgb import topology
from dgb.db import transaction
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
    seek: list[dict] = field(default_factory=list)  # {subscription, snapshot, time}
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
            else f"seeked {', '.join(s['subscription'] for s in self.seek)}"
        )
        return f"replay {self.start}..{self.end} {self.mode_requested}->{self.mode_used}: {what}{extra}"


def _aware(value: datetime | str) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _snapshot_name(sub: str, at: datetime) -> str:
    base = re.sub(r"[^A-Za-z0-9._~+%-]", "-", sub)
    return f"dgb-replay-{base}-{at:%Y%m%dT%H%M%S}"[:255]


class SeekUnavailable(RuntimeError):
    pass


def _seek(subscriber, project: str, subscriptions: list[str], start: datetime, now: datetime) -> list[dict]:
    """Pub/Sub's reprocessing workflow: snapshot (restore point), then seek to ``start``; raise
    SeekUnavailable with the reason when the server cannot do it for every subscription."""
    from google.api_core import exceptions
    from google.protobuf import timestamp_pb2

    done = []
    for sub in subscriptions:
        path = f"projects/{project}/subscriptions/{sub}"
        try:
            info = subscriber.get_subscription(request={"subscription": path})
        except exceptions.GoogleAPICallError as exc:
            raise SeekUnavailable(f"cannot read {sub}: {type(exc).__name__}: {exc}") from exc
        if not getattr(info, "retain_acked_messages", False):
            raise SeekUnavailable(
                f"{sub} does not retain acknowledged messages (retain_acked_messages=false): "
                "seeking to a time would bring back nothing already processed"
            )
        snap = f"projects/{project}/snapshots/{_snapshot_name(sub, now)}"
        ts = timestamp_pb2.Timestamp()
        ts.FromDatetime(start.astimezone(UTC).replace(tzinfo=None))
        try:
            subscriber.create_snapshot(request={"name": snap, "subscription": path})
            subscriber.seek(request={"subscription": path, "time": ts})
        except (
            exceptions.MethodNotImplemented,
            exceptions.FailedPrecondition,
            exceptions.InvalidArgument,
            exceptions.NotFound,
            exceptions.PermissionDenied,
            exceptions.Unknown,
        ) as exc:
            raise SeekUnavailable(
                f"snapshot/seek of {sub} not supported here: {type(exc).__name__}: {exc}"
            ) from exc
        done.append({"subscription": sub, "snapshot": snap, "time": start.isoformat()})
    return done


def replay(
    conn,
    start: datetime | str,
    end: datetime | str,
    topic: str | None = None,
    mode: str = "republish",
    *,
    project: str | None = None,
    subscriber=None,
    subscription: str | None = None,
    limit: int = 50_000,
    dry_run: bool = False,
    now: datetime | None = None,
) -> ReplayReport:
    """Re-process the window ``[start, end)`` of ``topic`` (default ``dgb.news.scraped``); see
    the module doc. ``mode="seek"`` needs ``project`` and ``subscriber`` (a Pub/Sub
    SubscriberClient); ``subscription`` limits the seek to one subscription of the topic."""
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
        if subscriber is None or not project:
            rep.fallback_reason = "no Pub/Sub subscriber client/project given"
        elif dry_run:
            rep.mode_used = "seek"
        else:
            try:
                rep.seek = _seek(subscriber, project, subs, start_dt, now)
                rep.mode_used = "seek"
                log.info(
                    "replay: seeked %s to %s (snapshots %s, a restore point); messages after %s are "
                    "redelivered too (seek has no end bound): the stages skip work already done",
                    subs,
                    start_dt.isoformat(),
                    [s["snapshot"] for s in rep.seek],
                    end_dt.isoformat(),
                )
            except SeekUnavailable as exc:
                rep.fallback_reason = str(exc)
        if rep.fallback_reason:
            log.warning(
                "replay: seek mode unavailable (%s); falling back to republish from PostgreSQL",
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
            found={"articles": rep.enqueued},
            repaired={topic: rep.enqueued} if rep.mode_used == "republish" else {"seeked": len(rep.seek)},
            flagged=0,
            seconds=0.0,
            detail={
                "start": rep.start,
                "end": rep.end,
                "topic": topic,
                "mode": mode,
                "mode_used": rep.mode_used,
                "fallback_reason": rep.fallback_reason,
                "seek": rep.seek,
            },
        )
    log.info(rep.line())
    return rep
