"""Dead-letter redrive: re-publish selected open dead letters after a fix.

Selected OPEN dead letters (by reason, subscription, ids; bounded by ``limit``) are re-published
through the outbox - a fresh event of the article for the dead letter's subscription (built from
PostgreSQL), or the original payload and attributes when the dead letter has no known article -
and marked ``redriven`` with ``resolved_at`` and a ``resolution``, in the same transaction as
the run's ``reconcile_runs`` row. If it fails again the stage re-opens the dead letter
(``status = 'open'``).

A caller that may run the same request twice (an Airflow retry after the commit, e.g. a worker
killed while relaying) passes ``once_key`` (the DAG run): the second call finds the committed run
of that key and reports it again instead of redriving the next batch.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from dgb import outbox, topology
from dgb.db import transaction
from dgb.reconcile.resend import SOURCE_ATTR, enqueue, event_for, load_rows, topic_for
from dgb.reconcile.runs import record

log = logging.getLogger("dgb.reconcile")


@dataclass
class RedriveReport:
    selected: int = 0
    redriven: list[dict] = field(default_factory=list)  # {id, unique_id, reason, topic, how}
    skipped: list[dict] = field(default_factory=list)  # {id, reason, why}
    dry_run: bool = False
    run_id: int | None = None
    already_done: bool = False  # the report of an earlier call with the same once_key

    @classmethod
    def from_run(cls, run_id: int, detail: dict) -> RedriveReport:
        return cls(
            selected=int(detail.get("selected", 0)),
            redriven=list(detail.get("redriven") or []),
            skipped=list(detail.get("skipped") or []),
            run_id=run_id,
            already_done=True,
        )

    def as_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        topics: dict[str, int] = {}
        for r in self.redriven:
            topics[r["topic"]] = topics.get(r["topic"], 0) + 1
        return (
            f"redrive{' (dry run)' if self.dry_run else ''}{' (already done)' if self.already_done else ''}:"
            f" selected={self.selected}"
            f" redriven={len(self.redriven)} {json.dumps(topics)} skipped={len(self.skipped)}"
        )


def redrive(
    conn,
    reason: str | None = None,
    limit: int = 100,
    subscription: str | None = None,
    *,
    ids: Iterable[int] | None = None,
    model: str | None = None,
    dry_run: bool = False,
    actor: str = "manual",
    once_key: str | None = None,
    now: datetime | None = None,
) -> RedriveReport:
    """Re-publish selected OPEN dead letters through the outbox and mark them ``redriven``.

    Selection: ``reason`` (exact), ``subscription``, ``ids`` (dead_letters.id), oldest first,
    at most ``limit``. An article's dead letter gets a fresh event of the subscription's topic
    (or of the earliest stage the article still needs); its ``problem = 'dead_letter'`` flag, its
    stage hold / parking (migration 0008: the sweep takes it up again) and reconcile counters are
    cleared. A dead letter with no known article is re-published with its
    original payload and attributes; one whose payload is not a JSON object cannot be re-sent and
    is not selected (it stays open for an operator to discard). ``once_key``: see the module doc."""
    now = now or datetime.now(UTC)
    if limit < 1:
        raise ValueError("limit must be >= 1")
    # only letters that can be re-published: an article we know, or a payload that looks like a
    # JSON object (so poison that can never be re-sent does not eat the limit every time)
    conds = [
        "status = 'open'",
        "((d.unique_id IS NOT NULL AND EXISTS (SELECT 1 FROM news n"
        " WHERE n.unique_id = d.unique_id)) OR left(ltrim(d.payload), 1) = '{')",
    ]
    params: list = []
    if reason:
        conds.append("reason = %s")
        params.append(reason)
    if subscription:
        topology.subscription(subscription)  # KeyError for an unknown one
        conds.append("subscription = %s")
        params.append(subscription)
    if ids is not None:
        conds.append("d.id = ANY(%s)")
        params.append(list(ids))
    rep = RedriveReport(dry_run=dry_run)
    by_reason: dict[str, int] = {}
    topics: dict[str, int] = {}
    with transaction(conn) as cur:
        if once_key and not dry_run:
            # one redrive per key: serialise callers of the key, then look for its committed run
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"dgb.redrive:{once_key}",))
            cur.execute(
                "SELECT id, detail FROM reconcile_runs WHERE mode = 'redrive' AND detail->>'once_key' = %s"
                " ORDER BY id LIMIT 1",
                (once_key,),
            )
            done = cur.fetchone()
            if done is not None:
                rep = RedriveReport.from_run(done[0], done[1] or {})
                log.warning(
                    "redrive %s already committed as reconcile_runs %s: %s", once_key, done[0], rep.line()
                )
                return rep
        cur.execute(
            "SELECT id, subscription, message_key, unique_id, trace_id, reason, payload, attributes"
            f" FROM dead_letters d WHERE {' AND '.join(conds)} ORDER BY first_seen, id LIMIT %s"
            " FOR UPDATE SKIP LOCKED",
            (*params, limit),
        )
        letters = cur.fetchall()
        rep.selected = len(letters)
        rows = load_rows(cur, [letter[3] for letter in letters if letter[3]], model)
        for dl_id, sub_name, key, uid, _trace_id, why, payload, attributes in letters:
            by_reason[why] = by_reason.get(why, 0) + 1
            try:
                sub_topic = topology.subscription(sub_name).topic
            except KeyError:
                rep.skipped.append({"id": dl_id, "reason": why, "why": f"unknown subscription {sub_name}"})
                continue
            row = rows.get(uid) if uid else None
            if row is not None:
                topic = topic_for(row, sub_topic)
                event = event_for(row, topic, "redrive")
                how = "fresh event from PostgreSQL"
                if not dry_run:
                    enqueue(cur, event)
                    cur.execute(
                        "UPDATE news SET"
                        " problem = CASE WHEN problem = 'dead_letter' THEN NULL ELSE problem END,"
                        " hold_stage = NULL, hold_reason = NULL, hold_failures = 0, parked_at = NULL,"
                        " reconcile_attempts = 0, reconciled_at = NULL WHERE unique_id = %s",
                        (uid,),
                    )
            else:
                try:
                    original = json.loads(payload) if payload is not None else None
                except ValueError:
                    original = None
                if not isinstance(original, dict):
                    rep.skipped.append(
                        {
                            "id": dl_id,
                            "reason": why,
                            "why": "no article and the original payload is not a JSON object",
                        }
                    )
                    continue
                topic = sub_topic
                attrs = {k: str(v) for k, v in (attributes or {}).items() if not k.startswith("dgb_")}
                attrs[SOURCE_ATTR] = "redrive"
                how = "original payload"
                if not dry_run:
                    outbox.enqueue_raw(cur, topic, key, original, attrs)
            if not dry_run:
                cur.execute(
                    "UPDATE dead_letters SET status = 'redriven', resolved_at = %s, resolution = %s"
                    " WHERE id = %s",
                    (now, f"redriven by {actor}: {how} on {topic}", dl_id),
                )
            rep.redriven.append({"id": dl_id, "unique_id": uid, "reason": why, "topic": topic, "how": how})
            topics[topic] = topics.get(topic, 0) + 1
        if dry_run:
            conn.rollback()
        else:  # the run's row commits with the redrive it describes
            rep.run_id = record(
                conn,
                "redrive",
                found={"selected": rep.selected, **by_reason},
                repaired=topics,
                flagged=0,
                seconds=0.0,
                detail={
                    "reason": reason,
                    "limit": limit,
                    "subscription": subscription,
                    "actor": actor,
                    "once_key": once_key,
                    "selected": rep.selected,
                    "redriven": rep.redriven,
                    "skipped": rep.skipped[:50],
                },
                cur=cur,
            )
    log.info(rep.line())
    return rep
