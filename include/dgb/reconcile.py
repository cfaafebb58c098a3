"""Reconciliation, dead-letter redrive and replay: the pipeline's safety net (a daily DAG catches
articles a stage never processed; dead letters are re-published explicitly; replay by snapshot + seek).

No Airflow import: the DAGs (dags/reconcile.py, operators in plugins/dgb_airflow/operators/
reconcile.py) and the CLI (``dgb reconcile|redrive|replay``) pass a psycopg 3 connection, a
Typesense client and, for seek replays, a Pub/Sub subscriber client in.

**Reconcile** (:func:`run` = :func:`find_stuck` + :func:`typesense_drift` + :func:`repair`)

* stuck states, each beyond a threshold (:class:`Thresholds`): scraped but not enriched;
  enriched but not embedded with the CURRENT model; enriched but not indexed at its current
  ``version`` (never indexed, or stale); outbox rows still unsent (old, or with many failed
  publishes). An article counts once, in its earliest gap.
* Typesense drift: documents **missing** (an article that should be searchable is not),
  **extra** (a document whose article is not in PostgreSQL or was removed) and **older**
  (the document's ``version`` is below the article's).
* repairs go through the normal path: the event that starts the stuck stage is written to the
  outbox (``dgb.news.scraped`` for an enrichment gap, ``dgb.news.enriched`` for an embedding gap,
  ``dgb.news.embedded`` for an index gap of an embedded article, else ``dgb.news.enriched``),
  with the article's trace_id and the attribute ``dgb_source=reconcile``; a missing/older
  document gets ``indexed_version`` cleared first (else the index stage would see the article
  as done and skip it); extra documents are deleted from Typesense; unsent outbox rows whose
  backoff is pending are made due now (the caller relays). Every stage is idempotent, so a
  re-send of something that was merely slow costs a skipped message, never a duplicate.
* bounded: ``news.reconcile_attempts`` counts re-sends since the article was last complete;
  a re-send waits ``retry_after_s`` after the previous one; past ``max_attempts`` the article is
  flagged (``problem = 'stuck'``, ``reconcile_attempts = max_attempts + 1``) for an operator and
  no longer re-sent (the stages' own sweeps still take it up). Once complete again
  the counter and the flag are cleared. ``reset_flagged=True`` (``dgb reconcile --reset-stuck``)
  re-arms flagged articles after a fix.
* every run writes a ``reconcile_runs`` row (found, repaired, flagged, seconds).

**Redrive** (:func:`redrive`): selected OPEN dead letters (by reason, subscription, ids;
bounded by ``limit``) are re-published through the outbox - a fresh event of the article for
the dead letter's subscription (built from PostgreSQL), or the original payload and
attributes when the dead letter has no known article - and marked ``redriven`` with
``resolved_at`` and a ``resolution``, in the same transaction. If it fails again the stage
re-opens the dead letter (``status = 'open'``).

**Replay** (:func:`replay`): re-process a time window.
``republish`` re-emits, from PostgreSQL, the event of ``topic`` for every article whose stage
timestamp for that topic (scraped_at / enriched_at / embedded_at) falls in ``[start, end)``.
It is idempotent by construction: the stages skip work already done (enrich: ``enriched_at``
set; embed: embedded with the current model; index: ``indexed_version = version``), so
replaying a window twice, or a window already processed, changes nothing; only what is
missing gets done. ``seek`` follows Pub/Sub's reprocessing workflow: snapshot each
subscription of the topic (a restore point: seek back to it to undo), then seek it to
``start`` so Pub/Sub redelivers what it retained since then (``end`` cannot bound a seek:
later messages come again too, harmlessly). Seeking to a time only brings back acknowledged
messages when the subscription retains them (``retain_acked_messages``); when it does not,
or the server refuses snapshots/seek, replay logs why and falls back to ``republish``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable

from dgb import events, outbox, topology
from dgb.db import transaction

log = logging.getLogger("dgb.reconcile")

SOURCE_ATTR = "dgb_source"          # attribute of every event re-sent from here
GAPS = ("enrich", "embed", "index")
GAP_TOPIC = {"enrich": topology.TOPIC_SCRAPED, "embed": topology.TOPIC_ENRICHED, "index": topology.TOPIC_EMBEDDED}
STAGE_COLUMN = {topology.TOPIC_SCRAPED: "scraped_at", topology.TOPIC_ENRICHED: "enriched_at",
                topology.TOPIC_EMBEDDED: "embedded_at"}
MODES = ("daily", "sweep", "manual")
FLAG = "stuck"


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    try:
        return float(raw) if raw.strip() else default
    except ValueError as exc:
        raise ValueError(f"{name} must be a number, got {raw!r}") from exc


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


# --------------------------------------------------------------------------- thresholds


@dataclass(frozen=True)
class Thresholds:
    """When an article counts as stuck, and how hard reconciliation tries.

    Environment (defaults): ``DGB_RECONCILE_STUCK_MINUTES`` (10) for every stage gap,
    ``DGB_RECONCILE_OUTBOX_MINUTES`` (5) and ``DGB_RECONCILE_OUTBOX_ATTEMPTS`` (5) for unsent
    outbox rows, ``DGB_RECONCILE_MAX_ATTEMPTS`` (5) re-sends per article before it is flagged,
    ``DGB_RECONCILE_SWEEP_WINDOW_HOURS`` (48) the sweep's window.
    """

    enrich_s: float = 600.0
    embed_s: float = 600.0
    index_s: float = 600.0
    outbox_s: float = 300.0
    outbox_attempts: int = 5
    max_attempts: int = 5
    retry_after_s: float | None = None   # between two re-sends of one article; None = its gap's threshold
    window_s: float | None = None        # only articles changed within this window (the sweep); None = all
    limit: int = 5000                    # rows per kind and run

    @classmethod
    def from_env(cls, *, window: bool = False, **overrides: Any) -> "Thresholds":
        stuck = _env_float("DGB_RECONCILE_STUCK_MINUTES", 10) * 60
        values: dict[str, Any] = {
            "enrich_s": stuck, "embed_s": stuck, "index_s": stuck,
            "outbox_s": _env_float("DGB_RECONCILE_OUTBOX_MINUTES", 5) * 60,
            "outbox_attempts": int(_env_float("DGB_RECONCILE_OUTBOX_ATTEMPTS", 5)),
            "max_attempts": int(_env_float("DGB_RECONCILE_MAX_ATTEMPTS", 5)),
            "window_s": _env_float("DGB_RECONCILE_SWEEP_WINDOW_HOURS", 48) * 3600 if window else None,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def with_age(self, seconds: float) -> "Thresholds":
        """The same, with one age threshold for every stage gap and the outbox."""
        from dataclasses import replace

        return replace(self, enrich_s=seconds, embed_s=seconds, index_s=seconds, outbox_s=seconds)

    def age(self, gap: str) -> float:
        return {"enrich": self.enrich_s, "embed": self.embed_s, "index": self.index_s}[gap]

    def retry_after(self, gap: str) -> float:
        return self.age(gap) if self.retry_after_s is None else self.retry_after_s


# --------------------------------------------------------------------------- finding


@dataclass
class Stuck:
    unique_id: str
    gap: str                  # enrich | embed | index
    since: datetime           # the stage timestamp older than the threshold
    attempts: int = 0         # reconcile re-sends so far
    reconciled_at: datetime | None = None
    problem: str | None = None


@dataclass
class Found:
    enrich: list[Stuck] = field(default_factory=list)
    embed: list[Stuck] = field(default_factory=list)
    index: list[Stuck] = field(default_factory=list)
    outbox: list[dict] = field(default_factory=list)     # unsent rows (id, topic, aggregate_id, ...)
    flagged: list[str] = field(default_factory=list)     # stuck, but already past max_attempts

    def articles(self) -> list[Stuck]:
        return self.enrich + self.embed + self.index

    def counts(self) -> dict[str, int]:
        return {"enrich": len(self.enrich), "embed": len(self.embed), "index": len(self.index),
                "outbox": len(self.outbox), "flagged": len(self.flagged)}


_OUTBOX_PENDING = ("NOT EXISTS (SELECT 1 FROM outbox o WHERE o.aggregate_id = n.unique_id"
                   " AND o.published_at IS NULL AND o.topic = ANY(%(topics)s))")


def _window_clause(thresholds: Thresholds, column: str) -> str:
    return f" AND {column} >= %(window_start)s" if thresholds.window_s else ""


def find_stuck(conn, now: datetime | None = None, thresholds: Thresholds | None = None, *,
               model: str | None = None) -> Found:
    """Every article stuck in a stage beyond its threshold, and every unsent outbox row past
    its threshold. ``model``: the current embedding model (``None`` = any model counts as
    embedded). An article whose next event still waits in the outbox is not re-sent (the
    outbox row is reported instead)."""
    now = now or utcnow()
    t = thresholds or Thresholds.from_env()
    params: dict[str, Any] = {
        "enrich_cut": now - timedelta(seconds=t.enrich_s),
        "embed_cut": now - timedelta(seconds=t.embed_s),
        "index_cut": now - timedelta(seconds=t.index_s),
        "outbox_cut": now - timedelta(seconds=t.outbox_s),
        "window_start": now - timedelta(seconds=t.window_s or 0),
        "model": model, "limit": t.limit, "max": t.max_attempts,
        "topics": list(topology.TOPICS), "attempts": t.outbox_attempts,
    }
    stale_model = "embedding_model IS DISTINCT FROM %(model)s" if model else "false"
    queries = {
        "enrich": ("scraped_at", "enriched_at IS NULL AND removed_at IS NULL AND scraped_at < %(enrich_cut)s"
                   + _window_clause(t, "scraped_at")),
        "embed": ("enriched_at", "enriched_at IS NOT NULL AND removed_at IS NULL"
                  f" AND (embedded_at IS NULL OR {stale_model}) AND enriched_at < %(embed_cut)s"
                  + _window_clause(t, "updated_at")),
        "index": ("updated_at", "enriched_at IS NOT NULL AND indexed_version IS DISTINCT FROM version"
                  " AND updated_at < %(index_cut)s" + _window_clause(t, "updated_at")),
    }
    found = Found()
    seen: set[str] = set()
    flagged: set[str] = set()
    with conn.cursor() as cur:
        for gap in GAPS:
            since_col, cond = queries[gap]
            cur.execute(
                f"SELECT unique_id, {since_col}, reconcile_attempts, reconciled_at, problem FROM news n"
                f" WHERE {cond} AND {_OUTBOX_PENDING} ORDER BY {since_col} LIMIT %(limit)s", params)
            for uid, since, attempts, reconciled_at, problem in cur.fetchall():
                if uid in seen:        # counted in an earlier gap already
                    continue
                seen.add(uid)
                if attempts > t.max_attempts:   # flagged by an earlier run: the operator's now
                    flagged.add(uid)
                    continue
                getattr(found, gap).append(Stuck(uid, gap, since, attempts, reconciled_at, problem))
        cur.execute(
            "SELECT id, topic, aggregate_id, created_at, available_at, attempts, last_error FROM outbox"
            " WHERE published_at IS NULL AND (created_at < %(outbox_cut)s OR attempts >= %(attempts)s)"
            " ORDER BY created_at LIMIT %(limit)s", params)
        names = [d.name for d in cur.description]
        found.outbox = [dict(zip(names, r)) for r in cur.fetchall()]
    conn.commit()
    found.flagged = sorted(flagged)
    return found


# --------------------------------------------------------------------------- Typesense drift


@dataclass
class Drift:
    missing: list[str] = field(default_factory=list)   # should be searchable, no document
    extra: list[str] = field(default_factory=list)     # document without a live article
    older: list[str] = field(default_factory=list)     # document.version < news.version
    newer: list[str] = field(default_factory=list)     # document.version > news.version (should not happen)
    checked_articles: int = 0
    checked_documents: int = 0
    error: str | None = None

    def counts(self) -> dict[str, int]:
        return {"ts_missing": len(self.missing), "ts_extra": len(self.extra), "ts_older": len(self.older),
                "ts_newer": len(self.newer)}


def _ts_export(ts, alias: str, filter_by: str | None = None) -> dict[str, int | None]:
    params = {"include_fields": "id,version"}
    if filter_by:
        params["filter_by"] = filter_by
    raw = ts.collections[alias].documents.export(params)
    if isinstance(raw, bytes):
        raw = raw.decode()
    out: dict[str, int | None] = {}
    for line in raw.splitlines():
        if line.strip():
            doc = json.loads(line)
            out[doc["id"]] = doc.get("version")
    return out


def _ts_versions(ts, alias: str, ids: list[str] | None, chunk: int = 100) -> dict[str, int | None]:
    """id -> version of the documents (all of them, or of ``ids`` only: filtered exports)."""
    if ids is None:
        return _ts_export(ts, alias)
    out: dict[str, int | None] = {}
    for i in range(0, len(ids), chunk):
        part = [u for u in ids[i:i + chunk] if "`" not in u]
        if part:
            out.update(_ts_export(ts, alias, "unique_id:=[" + ",".join(f"`{u}`" for u in part) + "]"))
    return out


def typesense_drift(conn, ts, alias: str, *, now: datetime | None = None, min_age_s: float = 0.0,
                    window_s: float | None = None, batch: int = 5000) -> Drift:
    """Compare PostgreSQL with the Typesense collection behind ``alias``.

    Full (``window_s`` None): every article against every document (one export of ids and
    versions). Windowed: only articles changed within ``window_s``, their documents fetched
    by filtered export (documents of articles not in PostgreSQL are only found by a full
    check). Articles changed less than ``min_age_s`` ago are in flight and not judged."""
    now = now or utcnow()
    cut = now - timedelta(seconds=min_age_s)
    drift = Drift()
    rows: dict[str, tuple] = {}
    last = 0
    while True:
        with conn.cursor() as cur:
            if window_s:
                cur.execute("SELECT id, unique_id, version, enriched_at IS NOT NULL, removed_at IS NOT NULL,"
                            " updated_at FROM news WHERE id > %s AND updated_at >= %s ORDER BY id LIMIT %s",
                            (last, now - timedelta(seconds=window_s), batch))
            else:
                cur.execute("SELECT id, unique_id, version, enriched_at IS NOT NULL, removed_at IS NOT NULL,"
                            " updated_at FROM news WHERE id > %s ORDER BY id LIMIT %s", (last, batch))
            page = cur.fetchall()
        conn.commit()
        if not page:
            break
        last = page[-1][0]
        for _id, uid, version, enriched, removed, updated in page:
            rows[uid] = (version, enriched, removed, updated)
    drift.checked_articles = len(rows)
    docs = _ts_versions(ts, alias, None if not window_s else list(rows))
    drift.checked_documents = len(docs)
    for uid, (version, enriched, removed, updated) in rows.items():
        settled = updated is None or updated < cut
        if uid in docs:
            if removed:
                if settled:
                    drift.extra.append(uid)
                continue
            doc_version = docs[uid] if docs[uid] is not None else 0
            if doc_version < version and settled:
                drift.older.append(uid)
            elif doc_version > version:
                drift.newer.append(uid)
        elif enriched and not removed and settled:
            drift.missing.append(uid)
    if not window_s:
        drift.extra.extend(sorted(uid for uid in docs if uid not in rows))
    return drift


# --------------------------------------------------------------------------- events from PostgreSQL


_ROW = """
SELECT n.unique_id, n.agency_key, n.published_at, n.scraped_at, n.trace_id, n.enriched_at, n.summary,
       tm.code AS most_specific_theme_code, n.embedded_at, n.embedding_dim, n.embedding_model, n.version,
       n.indexed_version, n.removed_at, n.reconcile_attempts, n.reconciled_at, n.problem
  FROM news n LEFT JOIN themes tm ON tm.id = n.most_specific_theme_id
 WHERE n.unique_id = ANY(%s)
"""


def load_rows(cur, unique_ids: Iterable[str]) -> dict[str, dict]:
    ids = list(dict.fromkeys(unique_ids))
    if not ids:
        return {}
    cur.execute(_ROW, (ids,))
    names = [d.name for d in cur.description]
    return {r[0]: dict(zip(names, r)) for r in cur.fetchall()}


def event_for(row: dict, topic: str, source: str) -> events.Event:
    """The ``topic`` event of an article, rebuilt from its row (trace_id kept)."""
    uid = row["unique_id"]
    if topic == topology.TOPIC_SCRAPED:
        payload = {"unique_id": uid, "agency_key": row["agency_key"], "published_at": row["published_at"],
                   "scraped_at": row["scraped_at"]}
    elif topic == topology.TOPIC_ENRICHED:
        if row["enriched_at"] is None:
            raise ValueError(f"{uid} is not enriched: no {topic} event")
        payload = {"unique_id": uid, "enriched_at": row["enriched_at"],
                   "most_specific_theme_code": row["most_specific_theme_code"], "has_summary": bool(row["summary"])}
    elif topic == topology.TOPIC_EMBEDDED:
        if row["embedded_at"] is None:
            raise ValueError(f"{uid} is not embedded: no {topic} event")
        payload = {"unique_id": uid, "embedded_at": row["embedded_at"], "embedding_dim": row["embedding_dim"]}
    else:
        raise ValueError(f"unknown topic {topic!r}")
    trace = str(row["trace_id"]) if row.get("trace_id") else None
    event = events.make_event(topic, payload, trace_id=trace)
    return events.Event(event.topic, event.payload, {**event.attributes, SOURCE_ATTR: source})


def topic_for(row: dict, wanted: str, model: str | None = None) -> str:
    """The event to send for ``wanted`` given what the article has done so far: the wanted
    topic when the row can produce it, else the earliest stage it still needs."""
    embedded = row["embedded_at"] is not None and (model is None or row["embedding_model"] == model)
    if row["enriched_at"] is None:
        return topology.TOPIC_SCRAPED
    if wanted == topology.TOPIC_EMBEDDED and (not embedded or row["removed_at"] is not None):
        return topology.TOPIC_ENRICHED
    if wanted == topology.TOPIC_SCRAPED:
        return topology.TOPIC_SCRAPED
    return wanted


def _enqueue(cur, event: events.Event) -> None:
    outbox.enqueue_raw(cur, event.topic, event.unique_id, event.payload, event.attributes)


# --------------------------------------------------------------------------- repairing


@dataclass
class Report:
    mode: str
    dry_run: bool = False
    found: dict[str, int] = field(default_factory=dict)
    repaired: dict[str, int] = field(default_factory=dict)
    flagged: list[str] = field(default_factory=list)        # newly flagged this run
    waiting: int = 0                                         # re-sent recently, not due again yet
    resolved: int = 0                                        # complete again: counters/flags cleared
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
        return (f"reconcile {self.mode}{' (dry run)' if self.dry_run else ''}: found {found}; repaired {fixed};"
                f" flagged={len(self.flagged)} waiting={self.waiting} resolved={self.resolved}"
                f" in {self.seconds:.1f}s")


_COMPLETE = """
(removed_at IS NULL AND enriched_at IS NOT NULL AND embedded_at IS NOT NULL
   AND (%(model)s::text IS NULL OR embedding_model = %(model)s::text) AND indexed_version = version)
OR (removed_at IS NOT NULL AND (enriched_at IS NULL OR indexed_version = version))
"""


def resolve_completed(conn, model: str | None = None, now: datetime | None = None) -> int:
    """Clear reconcile counters, and the 'stuck' flag, of articles that are complete again."""
    with transaction(conn) as cur:
        cur.execute(
            "UPDATE news SET reconcile_attempts = 0, reconciled_at = NULL,"
            " problem = CASE WHEN problem = 'stuck' THEN NULL ELSE problem END,"
            " problem_at = CASE WHEN problem = 'stuck' THEN NULL ELSE problem_at END"
            f" WHERE (reconcile_attempts > 0 OR problem = 'stuck') AND ({_COMPLETE})", {"model": model})
        return cur.rowcount


def reset_flagged(conn) -> int:
    """Re-arm articles flagged 'stuck' (after an operator fixed the cause)."""
    with transaction(conn) as cur:
        cur.execute("UPDATE news SET reconcile_attempts = 0, reconciled_at = NULL,"
                    " problem = CASE WHEN problem = 'stuck' THEN NULL ELSE problem END"
                    " WHERE reconcile_attempts > 0 OR problem = 'stuck'")
        return cur.rowcount


def repair(conn, found: Found, drift: Drift | None = None, *, ts=None, alias: str | None = None,
           now: datetime | None = None, thresholds: Thresholds | None = None, model: str | None = None,
           dry_run: bool = False, source: str = "reconcile", report: Report | None = None) -> Report:
    """Repair what :func:`find_stuck` / :func:`typesense_drift` found (see the module doc).

    One transaction for every PostgreSQL change (events, counters, flags); Typesense deletes
    of extra documents after it. The caller relays the outbox."""
    now = now or utcnow()
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
        rows = load_rows(cur, actions)
        for uid, gap in actions.items():
            row = rows.get(uid)
            if row is None or row["reconcile_attempts"] > t.max_attempts:   # gone, or flagged already
                continue
            if row["reconcile_attempts"] >= t.max_attempts:
                flagged.append(uid)
                if not dry_run:
                    cur.execute(
                        "UPDATE news SET problem = CASE WHEN problem IS NULL OR problem = 'dead_letter'"
                        " THEN %s ELSE problem END, problem_at = %s, last_error = %s,"
                        " last_error_stage = 'reconcile', last_error_at = %s WHERE unique_id = %s",
                        (FLAG, now, f"reconcile: stuck before {gap} after {row['reconcile_attempts']} re-sends",
                         now, uid))
                    # past max_attempts = flagged: later runs count it and leave it alone
                    cur.execute("UPDATE news SET reconcile_attempts = %s, reconciled_at = %s WHERE unique_id = %s",
                                (t.max_attempts + 1, now, uid))
                continue
            if row["reconciled_at"] is not None and row["reconciled_at"] > now - timedelta(seconds=t.retry_after(gap)):
                rep.waiting += 1
                continue
            wanted = GAP_TOPIC[gap]
            topic = topic_for(row, wanted, model)
            if dry_run:
                repaired[topic] = repaired.get(topic, 0) + 1
                continue
            if uid in drift_ids or gap == "index":
                # the index stage skips an article whose indexed_version = version: clear it
                cur.execute("UPDATE news SET indexed_version = NULL WHERE unique_id = %s"
                            " AND indexed_version = version", (uid,))
            _enqueue(cur, event_for(row, topic, source))
            cur.execute("UPDATE news SET reconcile_attempts = reconcile_attempts + 1, reconciled_at = %s"
                        " WHERE unique_id = %s", (now, uid))
            repaired[topic] = repaired.get(topic, 0) + 1
        if found.outbox:
            ids = [str(r["id"]) for r in found.outbox]
            if dry_run:
                repaired["outbox_rescheduled"] = sum(1 for r in found.outbox if r["available_at"] > now)
            else:
                cur.execute("UPDATE outbox SET available_at = clock_timestamp() WHERE id = ANY(%s::uuid[])"
                            " AND published_at IS NULL AND available_at > clock_timestamp()", (ids,))
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
            except Exception as exc:  # noqa: BLE001 - the next run deletes the rest
                rep.drift_error = f"deleting extra documents: {type(exc).__name__}: {exc}"[:500]
                log.warning("reconcile: %s", rep.drift_error)
        repaired["ts_deleted"] = deleted if not dry_run else len(drift.extra)
    rep.repaired.update({k: v for k, v in repaired.items() if v})
    rep.flagged.extend(flagged)
    rep.samples.update({
        "enrich": [s.unique_id for s in found.enrich[:10]], "embed": [s.unique_id for s in found.embed[:10]],
        "index": [s.unique_id for s in found.index[:10]],
        **({"ts_missing": drift.missing[:10], "ts_extra": drift.extra[:10], "ts_older": drift.older[:10]}
           if drift is not None else {}),
    })
    return rep


def record(conn, mode: str, *, found: dict, repaired: dict, flagged: int, seconds: float,
           dry_run: bool = False, detail: dict | None = None) -> int:
    with transaction(conn) as cur:
        cur.execute(
            "INSERT INTO reconcile_runs (mode, dry_run, found, repaired, flagged, seconds, detail)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (mode, dry_run, json.dumps(found), json.dumps(repaired), flagged, seconds,
             json.dumps(detail or {}, default=str)))
        return cur.fetchone()[0]


def run(conn, *, mode: str = "manual", ts=None, alias: str | None = None, thresholds: Thresholds | None = None,
        model: str | None = None, drift: bool | None = None, dry_run: bool = False, now: datetime | None = None,
        reset_stuck: bool = False, record_run: bool = True) -> Report:
    """One reconciliation: clear what is complete again, find, compare with Typesense, repair,
    record a ``reconcile_runs`` row. ``drift`` defaults to True when a Typesense client is given."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    t0 = time.monotonic()
    now = now or utcnow()
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
        except Exception as exc:  # noqa: BLE001 - Typesense down: reconcile PostgreSQL anyway, say so
            conn.rollback()
            rep.drift_error = f"{type(exc).__name__}: {exc}"[:500]
            log.warning("reconcile: Typesense drift check skipped: %s", rep.drift_error)
    repair(conn, found, drift_result, ts=ts, alias=alias, now=now, thresholds=t, model=model, dry_run=dry_run,
           report=rep)
    rep.seconds = time.monotonic() - t0
    if record_run:
        rep.run_id = record(conn, mode, found=rep.found, repaired=rep.repaired, flagged=len(rep.flagged),
                            seconds=rep.seconds, dry_run=dry_run,
                            detail={"thresholds": asdict(t), "model": model, "alias": alias,
                                    "waiting": rep.waiting, "resolved": rep.resolved,
                                    "flagged_ids": rep.flagged[:50], "samples": rep.samples,
                                    "drift_error": rep.drift_error})
    log.info(rep.line())
    return rep


# --------------------------------------------------------------------------- redrive


@dataclass
class RedriveReport:
    selected: int = 0
    redriven: list[dict] = field(default_factory=list)    # {id, unique_id, reason, topic, how}
    skipped: list[dict] = field(default_factory=list)     # {id, reason, why}
    dry_run: bool = False
    run_id: int | None = None

    def as_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        topics: dict[str, int] = {}
        for r in self.redriven:
            topics[r["topic"]] = topics.get(r["topic"], 0) + 1
        return (f"redrive{' (dry run)' if self.dry_run else ''}: selected={self.selected}"
                f" redriven={len(self.redriven)} {json.dumps(topics)} skipped={len(self.skipped)}")


def redrive(conn, reason: str | None = None, limit: int = 100, subscription: str | None = None, *,
            ids: Iterable[int] | None = None, model: str | None = None, dry_run: bool = False,
            actor: str = "manual", now: datetime | None = None) -> RedriveReport:
    """Re-publish selected OPEN dead letters through the outbox and mark them ``redriven``.

    Selection: ``reason`` (exact), ``subscription``, ``ids`` (dead_letters.id), oldest first,
    at most ``limit``. An article's dead letter gets a fresh event of the subscription's topic
    (or of the earliest stage the article still needs); its ``problem = 'dead_letter'`` flag and
    reconcile counters are cleared. A dead letter with no known article is re-published with its
    original payload and attributes; one whose payload is not a JSON object cannot be re-sent and
    is not selected (it stays open for an operator to discard)."""
    now = now or utcnow()
    if limit < 1:
        raise ValueError("limit must be >= 1")
    # only letters that can be re-published: an article we know, or a payload that looks like a
    # JSON object (so poison that can never be re-sent does not eat the limit every time)
    conds = ["status = 'open'", "((d.unique_id IS NOT NULL AND EXISTS (SELECT 1 FROM news n"
             " WHERE n.unique_id = d.unique_id)) OR left(ltrim(d.payload), 1) = '{')"]
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
        cur.execute("SELECT id, subscription, message_key, unique_id, trace_id, reason, payload, attributes"
                    f" FROM dead_letters d WHERE {' AND '.join(conds)} ORDER BY first_seen, id LIMIT %s"
                    " FOR UPDATE SKIP LOCKED", (*params, limit))
        letters = cur.fetchall()
        rep.selected = len(letters)
        rows = load_rows(cur, [l[3] for l in letters if l[3]])
        for dl_id, sub_name, key, uid, trace_id, why, payload, attributes in letters:
            by_reason[why] = by_reason.get(why, 0) + 1
            try:
                sub_topic = topology.subscription(sub_name).topic
            except KeyError:
                rep.skipped.append({"id": dl_id, "reason": why, "why": f"unknown subscription {sub_name}"})
                continue
            row = rows.get(uid) if uid else None
            if row is not None:
                topic = topic_for(row, sub_topic, model)
                event = event_for(row, topic, "redrive")
                how = "fresh event from PostgreSQL"
                if not dry_run:
                    _enqueue(cur, event)
                    cur.execute("UPDATE news SET problem = CASE WHEN problem = 'dead_letter' THEN NULL ELSE problem END,"
                                " reconcile_attempts = 0, reconciled_at = NULL WHERE unique_id = %s", (uid,))
            else:
                try:
                    original = json.loads(payload) if payload is not None else None
                except ValueError:
                    original = None
                if not isinstance(original, dict):
                    rep.skipped.append({"id": dl_id, "reason": why,
                                        "why": "no article and the original payload is not a JSON object"})
                    continue
                topic = sub_topic
                attrs = {k: str(v) for k, v in (attributes or {}).items() if not k.startswith("dgb_")}
                attrs[SOURCE_ATTR] = "redrive"
                how = "original payload"
                if not dry_run:
                    outbox.enqueue_raw(cur, topic, key, original, attrs)
            if not dry_run:
                cur.execute("UPDATE dead_letters SET status = 'redriven', resolved_at = %s, resolution = %s"
                            " WHERE id = %s",
                            (now, f"redriven by {actor}: {how} on {topic}", dl_id))
            rep.redriven.append({"id": dl_id, "unique_id": uid, "reason": why, "topic": topic, "how": how})
            topics[topic] = topics.get(topic, 0) + 1
        if dry_run:
            conn.rollback()
    if not dry_run:
        rep.run_id = record(conn, "redrive", found={"selected": rep.selected, **by_reason}, repaired=topics,
                            flagged=0, seconds=0.0,
                            detail={"reason": reason, "limit": limit, "subscription": subscription,
                                    "actor": actor, "skipped": rep.skipped[:50]})
    log.info(rep.line())
    return rep


# --------------------------------------------------------------------------- replay


@dataclass
class ReplayReport:
    topic: str
    start: str
    end: str
    mode_requested: str
    mode_used: str = ""
    enqueued: int = 0
    seek: list[dict] = field(default_factory=list)       # {subscription, snapshot, time}
    fallback_reason: str | None = None
    dry_run: bool = False
    run_id: int | None = None

    def as_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        extra = f" (fallback: {self.fallback_reason})" if self.fallback_reason else ""
        what = (f"{self.enqueued} {self.topic} event(s) republished" if self.mode_used == "republish"
                else f"seeked {', '.join(s['subscription'] for s in self.seek)}")
        return f"replay {self.start}..{self.end} {self.mode_requested}->{self.mode_used}: {what}{extra}"


def _aware(value: datetime | str) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


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
            raise SeekUnavailable(f"{sub} does not retain acknowledged messages (retain_acked_messages=false): "
                                  "seeking to a time would bring back nothing already processed")
        snap = f"projects/{project}/snapshots/{_snapshot_name(sub, now)}"
        ts = timestamp_pb2.Timestamp()
        ts.FromDatetime(start.astimezone(timezone.utc).replace(tzinfo=None))
        try:
            subscriber.create_snapshot(request={"name": snap, "subscription": path})
            subscriber.seek(request={"subscription": path, "time": ts})
        except (exceptions.MethodNotImplemented, exceptions.FailedPrecondition, exceptions.InvalidArgument,
                exceptions.NotFound, exceptions.PermissionDenied, exceptions.Unknown) as exc:
            raise SeekUnavailable(f"snapshot/seek of {sub} not supported here: {type(exc).__name__}: {exc}") from exc
        done.append({"subscription": sub, "snapshot": snap, "time": start.isoformat()})
    return done


def replay(conn, start: datetime | str, end: datetime | str, topic: str | None = None, mode: str = "republish", *,
           project: str | None = None, subscriber=None, subscription: str | None = None,
           limit: int = 50_000, dry_run: bool = False, now: datetime | None = None) -> ReplayReport:
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
    now = now or utcnow()
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
                log.info("replay: seeked %s to %s (snapshots %s, a restore point); messages after %s are "
                         "redelivered too (seek has no end bound): the stages skip work already done",
                         subs, start_dt.isoformat(), [s["snapshot"] for s in rep.seek], end_dt.isoformat())
            except SeekUnavailable as exc:
                rep.fallback_reason = str(exc)
        if rep.fallback_reason:
            log.warning("replay: seek mode unavailable (%s); falling back to republish from PostgreSQL",
                        rep.fallback_reason)
    if not rep.mode_used:
        rep.mode_used = "republish"
        column = STAGE_COLUMN[topic]
        with transaction(conn) as cur:
            cur.execute(f"SELECT unique_id FROM news WHERE {column} >= %s AND {column} < %s"
                        f" ORDER BY {column} LIMIT %s", (start_dt, end_dt, limit))
            uids = [r[0] for r in cur.fetchall()]
            rows = load_rows(cur, uids)
            for uid in uids:
                if not dry_run:
                    _enqueue(cur, event_for(rows[uid], topic, "replay"))
                rep.enqueued += 1
            if dry_run:
                conn.rollback()
        log.info("replay: %d %s event(s) of %s..%s %s the outbox (idempotent: the stages skip work "
                 "already done)", rep.enqueued, topic, start_dt.isoformat(), end_dt.isoformat(),
                 "would go to" if dry_run else "written to")
    if not dry_run:
        rep.run_id = record(conn, "replay", found={"articles": rep.enqueued},
                            repaired={topic: rep.enqueued} if rep.mode_used == "republish" else
                            {"seeked": len(rep.seek)}, flagged=0, seconds=0.0,
                            detail={"start": rep.start, "end": rep.end, "topic": topic, "mode": mode,
                                    "mode_used": rep.mode_used, "fallback_reason": rep.fallback_reason,
                                    "seek": rep.seek})
    log.info(rep.line())
    return rep
