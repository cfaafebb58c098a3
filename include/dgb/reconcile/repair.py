"""Repairing what was found, through the normal path, and one whole reconciliation (:func:`run`).

* repairs go through the normal path: the event that starts the stuck stage is written to the
  outbox (``dgb.news.scraped`` for an enrichment gap, ``dgb.news.enriched`` for an embedding gap,
  ``dgb.news.embedded`` for an index gap of an embedded article, else ``dgb.news.enriched``),
  with the article's trace_id and the attribute ``dgb_source=reconcile``; a missing/older
  document gets ``indexed_version`` cleared first (else the index stage would see the article
  as done and skip it); extra documents are deleted from Typesense; unsent outbox rows are left
  to the relay's per-row backoff (reported as ``outbox_in_backoff``: cutting it short would turn
  an outage into a hot retry loop), except a row whose next attempt lies beyond the backoff cap
  (:data:`dgb.outbox.BACKOFF_MAX_S`: set by hand or a clock jump), which is made due now (the
  caller relays); rows in the terminal failed state are counted (``outbox_failed``), and their
  article's event is re-sent like any stuck article's. Every stage is idempotent, so a
  re-send of something that was merely slow costs a skipped message, never a duplicate.
* bounded: ``news.reconcile_attempts`` counts re-sends since the article was last complete;
  a re-send waits ``retry_after_s`` after the previous one; past ``max_attempts`` the article is
  flagged (``problem = 'stuck'``, ``reconcile_attempts = max_attempts + 1``) for an operator and
  no longer re-sent (the stages' own sweeps still take it up). Once complete again (no stage has
  it pending: :func:`dgb.pipeline.definitions.complete`) the counter and the flag are cleared.
  ``reset_flagged=True`` (``dgb reconcile --reset-stuck``) re-arms flagged articles after a fix.
* every run writes a ``reconcile_runs`` row (found, repaired, flagged, seconds).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta

from dgb import outbox
from dgb.db import transaction
from dgb.pipeline import definitions
from dgb.reconcile.resend import enqueue, event_for, load_rows, topic_for
from dgb.reconcile.runs import record
from dgb.reconcile.stuck import GAP_TOPIC, Found, Thresholds, find_stuck
from dgb.search.drift import Drift, typesense_drift

log = logging.getLogger("dgb.reconcile")

MODES = ("daily", "sweep", "manual")
FLAG = "stuck"


@dataclass
class Report:
    mode: str
    dry_run: bool = False
    found: dict[str, int] = field(default_factory=dict)
    repaired: dict[str, int] = field(default_factory=dict)
    flagged: list[str] = field(default_factory=list)  # newly flagged this run
    waiting: int = 0  # re-sent recently, not due again yet
    resolved: int = 0  # complete again: counters/flags cleared
    seconds: float = 0.0
    samples: dict[str, list[str]] = field(default_factory=dict)
    drift_error: str | None = None
    run_id: int | None = None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["flagged"] = len(self.flagged)
        d["flagged_ids"] = self.flagged[:50]
        return d

    def line(self) -> str:
        found = " ".join(f"{k}={v}" for k, v in self.found.items())
        fixed = " ".join(f"{k}={v}" for k, v in self.repaired.items()) or "none"
        return (
            f"reconcile {self.mode}{' (dry run)' if self.dry_run else ''}: found {found}; repaired {fixed};"
            f" flagged={len(self.flagged)} waiting={self.waiting} resolved={self.resolved}"
            f" in {self.seconds:.1f}s"
        )


def resolve_completed(conn, model: str | None = None, now: datetime | None = None) -> int:
    """Clear reconcile counters, and the 'stuck' flag, of articles that are complete again (no
    stage has them pending, ``model`` being the current embedding model)."""
    with transaction(conn) as cur:
        cur.execute(
            "UPDATE news SET reconcile_attempts = 0, reconciled_at = NULL,"
            " problem = CASE WHEN problem = 'stuck' THEN NULL ELSE problem END,"
            " problem_at = CASE WHEN problem = 'stuck' THEN NULL ELSE problem_at END"
            f" WHERE (reconcile_attempts > 0 OR problem = 'stuck') AND ({definitions.complete()})",
            definitions.params(model),
        )
        return cur.rowcount


def reset_flagged(conn) -> int:
    """Re-arm articles flagged 'stuck' (after an operator fixed the cause)."""
    with transaction(conn) as cur:
        cur.execute(
            "UPDATE news SET reconcile_attempts = 0, reconciled_at = NULL,"
            " problem = CASE WHEN problem = 'stuck' THEN NULL ELSE problem END"
            " WHERE reconcile_attempts > 0 OR problem = 'stuck'"
        )
        return cur.rowcount


def repair(
    conn,
    found: Found,
    drift: Drift | None = None,
    *,
    ts=None,
    alias: str | None = None,
    now: datetime | None = None,
    thresholds: Thresholds | None = None,
    model: str | None = None,
    dry_run: bool = False,
    source: str = "reconcile",
    report: Report | None = None,
) -> Report:
    """Repair what :func:`find_stuck` / :func:`typesense_drift` found (see the module doc).

    One transaction for every PostgreSQL change (events, counters, flags); Typesense deletes
    of extra documents after it. The caller relays the outbox."""
    now = now or datetime.now(UTC)
    t = thresholds or Thresholds.from_env()
    rep = report or Report(mode="manual", dry_run=dry_run)
    rep.found.update(found.counts())
    if drift is not None:
        rep.found.update(drift.counts())
    # one action per article: its earliest gap; drift (missing/older) is an index gap
    actions: dict[str, str] = {s.unique_id: s.gap for s in found.articles()}
    drift_ids: set[str] = set()
    if drift is not None:
        for uid in drift.missing + drift.older + drift.newer:
            if uid not in actions and uid not in found.flagged:
                actions[uid] = "index"
            drift_ids.add(uid)
    repaired: dict[str, int] = {}
    flagged: list[str] = []
    with transaction(conn) as cur:
        rows = load_rows(cur, actions, model)
        for uid, gap in actions.items():
            row = rows.get(uid)
            if row is None or row["reconcile_attempts"] > t.max_attempts:  # gone, or flagged already
                continue
            if row["reconcile_attempts"] >= t.max_attempts:
                flagged.append(uid)
                if not dry_run:
                    cur.execute(
                        "UPDATE news SET problem = CASE WHEN problem IS NULL OR problem = 'dead_letter'"
                        " THEN %s ELSE problem END, problem_at = %s, last_error = %s,"
                        " last_error_stage = 'reconcile', last_error_at = %s WHERE unique_id = %s",
                        (
                            FLAG,
                            now,
                            f"reconcile: stuck before {gap} after {row['reconcile_attempts']} re-sends",
                            now,
                            uid,
                        ),
                    )
                    # past max_attempts = flagged: later runs count it and leave it alone
                    cur.execute(
                        "UPDATE news SET reconcile_attempts = %s, reconciled_at = %s WHERE unique_id = %s",
                        (t.max_attempts + 1, now, uid),
                    )
                continue
            if row["reconciled_at"] is not None and row["reconciled_at"] > now - timedelta(
                seconds=t.retry_after(gap)
            ):
                rep.waiting += 1
                continue
            wanted = GAP_TOPIC[gap]
            topic = topic_for(row, wanted)
            if dry_run:
                repaired[topic] = repaired.get(topic, 0) + 1
                continue
            if uid in drift_ids or gap == "index":
                # the index stage skips an article whose indexed_version = version: clear it
                cur.execute(
                    "UPDATE news SET indexed_version = NULL WHERE unique_id = %s"
                    " AND indexed_version = version",
                    (uid,),
                )
            enqueue(cur, event_for(row, topic, source))
            cur.execute(
                "UPDATE news SET reconcile_attempts = reconcile_attempts + 1, reconciled_at = %s"
                " WHERE unique_id = %s",
                (now, uid),
            )
            repaired[topic] = repaired.get(topic, 0) + 1
        if found.outbox:
            ids = [str(r["id"]) for r in found.outbox]
            horizon = now + timedelta(seconds=outbox.BACKOFF_MAX_S)
            in_backoff = sum(1 for r in found.outbox if now < r["available_at"] <= horizon)
            rep.found["outbox_in_backoff"] = in_backoff
            if dry_run:
                repaired["outbox_rescheduled"] = sum(1 for r in found.outbox if r["available_at"] > horizon)
            else:
                cur.execute(
                    "UPDATE outbox SET available_at = clock_timestamp() WHERE id = ANY(%s::uuid[])"
                    " AND published_at IS NULL AND failed_at IS NULL"
                    " AND available_at > clock_timestamp() + make_interval(secs => %s)",
                    (ids, outbox.BACKOFF_MAX_S),
                )
                repaired["outbox_rescheduled"] = cur.rowcount
        if dry_run:
            conn.rollback()
    if drift is not None and drift.extra and ts is not None and alias:
        deleted = 0
        if not dry_run:
            import typesense.exceptions as tse

            documents = ts.collections[alias].documents
            try:
                for uid in drift.extra:
                    try:
                        documents[uid].delete()
                        deleted += 1
                    except tse.ObjectNotFound:
                        pass
            except Exception as exc:
                rep.drift_error = f"deleting extra documents: {type(exc).__name__}: {exc}"[:500]
                log.warning("reconcile: %s", rep.drift_error)
        repaired["ts_deleted"] = deleted if not dry_run else len(drift.extra)
    rep.repaired.update({k: v for k, v in repaired.items() if v})
    rep.flagged.extend(flagged)
    rep.samples.update(
        {
            "enrich": [s.unique_id for s in found.enrich[:10]],
            "embed": [s.unique_id for s in found.embed[:10]],
            "index": [s.unique_id for s in found.index[:10]],
            **(
                {"ts_missing": drift.missing[:10], "ts_extra": drift.extra[:10], "ts_older": drift.older[:10]}
                if drift is not None
                else {}
            ),
        }
    )
    return rep


def run(
    conn,
    *,
    mode: str = "manual",
    ts=None,
    alias: str | None = None,
    thresholds: Thresholds | None = None,
    model: str | None = None,
    drift: bool | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
    reset_stuck: bool = False,
    record_run: bool = True,
) -> Report:
    """One reconciliation: clear what is complete again, find, compare with Typesense, repair,
    record a ``reconcile_runs`` row. ``drift`` defaults to True when a Typesense client is given."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    t0 = time.monotonic()
    now = now or datetime.now(UTC)
    t = thresholds or Thresholds.from_env(window=mode == "sweep")
    rep = Report(mode=mode, dry_run=dry_run)
    if not dry_run:
        if reset_stuck:
            rep.resolved += reset_flagged(conn)
        rep.resolved += resolve_completed(conn, model, now)
    found = find_stuck(conn, now, t, model=model)
    drift_result = None
    if (drift if drift is not None else ts is not None) and ts is not None and alias:
        try:
            drift_result = typesense_drift(conn, ts, alias, now=now, min_age_s=t.index_s, window_s=t.window_s)
        except Exception as exc:
            conn.rollback()
            rep.drift_error = f"{type(exc).__name__}: {exc}"[:500]
            log.warning("reconcile: Typesense drift check skipped: %s", rep.drift_error)
    repair(
        conn,
        found,
        drift_result,
        ts=ts,
        alias=alias,
        now=now,
        thresholds=t,
        model=model,
        dry_run=dry_run,
        report=rep,
    )
    rep.seconds = time.monotonic() - t0
    if record_run:
        rep.run_id = record(
            conn,
            mode,
            found=rep.found,
            repaired=rep.repaired,
            flagged=len(rep.flagged),
            seconds=rep.seconds,
            dry_run=dry_run,
            detail={
                "thresholds": asdict(t),
                "model": model,
                "alias": alias,
                "waiting": rep.waiting,
                "resolved": rep.resolved,
                "flagged_ids": rep.flagged[:50],
                "samples": rep.samples,
                "drift_error": rep.drift_error,
            },
        )
    log.info(rep.line())
    return rep
