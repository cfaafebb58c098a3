"""System backpressure: integrity checks wait while the event pipeline is behind or the database
is loaded (:func:`system_load`, the one home of that decision)."""

from __future__ import annotations

from typing import Any

from dgb.config import integrity as config_integrity
from dgb.pipeline.definitions import ENRICH, params


def backlog(conn, threshold: int | None = None, outbox_max_age_s: float | None = None) -> str | None:
    """Why the event pipeline is behind (so checks should yield), or None.

    * an outbox row still unpublished ``outbox_max_age_s`` after it was written
      (``DGB_INTEGRITY_OUTBOX_MAX_AGE_S``, default 60; 0 disables);
    * more than ``threshold`` articles waiting for enrichment (the enrich stage's sweep rule,
      :data:`dgb.pipeline.definitions.ENRICH`: pending and not held as poison)
      (``DGB_INTEGRITY_BACKLOG_MAX``, default 5000; 0 disables).
    Both read partial indexes and stop early, so this is cheap at any table size.
    """
    threshold = config_integrity.backlog_max() if threshold is None else threshold
    max_age = config_integrity.outbox_max_age_s() if outbox_max_age_s is None else outbox_max_age_s
    reason = None
    with conn.cursor() as cur:
        if max_age > 0:
            cur.execute(
                "SELECT min(created_at), count(*) FROM (SELECT created_at FROM outbox"
                " WHERE published_at IS NULL AND failed_at IS NULL"
                " AND created_at < now() - make_interval(secs => %s)"
                " LIMIT 1000) old",
                (max_age,),
            )
            oldest, stale = cur.fetchone()
            if stale:
                reason = (
                    f"{stale}{'+' if stale >= 1000 else ''} outbox event(s)"
                    f" unpublished for over {max_age:.0f} s"
                )
        if reason is None and threshold > 0:
            cur.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM news WHERE {ENRICH.sweep} LIMIT %(limit)s) p",
                {**params(None), "limit": threshold + 1},
            )
            pending = cur.fetchone()[0]
            if pending > threshold:
                reason = f"more than {threshold} articles pending enrichment"
    conn.commit()
    return reason


def database_load(conn, max_active: int | None = None, max_lock_waits: int | None = None) -> str | None:
    """Why the database is too loaded for integrity checks now, or None: more than ``max_active``
    other sessions running a statement on this database (``DGB_LOAD_MAX_ACTIVE``, default 40;
    0 disables) or more than ``max_lock_waits`` lock requests waiting (``DGB_LOAD_MAX_LOCK_WAITS``,
    default 20; 0 disables). Reads ``pg_stat_activity`` / ``pg_locks`` (cheap, no table access)."""
    max_active = config_integrity.load_max_active() if max_active is None else max_active
    max_lock_waits = config_integrity.load_max_lock_waits() if max_lock_waits is None else max_lock_waits
    reason = None
    with conn.cursor() as cur:
        if max_active > 0:
            cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND state = 'active' AND pid <> pg_backend_pid()"
            )
            active = cur.fetchone()[0]
            if active > max_active:
                reason = f"{active} active database sessions (more than {max_active})"
        if reason is None and max_lock_waits > 0:
            cur.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
            waiting = cur.fetchone()[0]
            if waiting > max_lock_waits:
                reason = f"{waiting} lock requests waiting (more than {max_lock_waits})"
    conn.commit()
    return reason


def system_load(conn, **thresholds: Any) -> str | None:
    """Why integrity checks should wait now (event pipeline backlog, then database load), or
    None. One home for the load decision: the DAGs' load sensor
    (``dgb_airflow.sensors.load.PipelineLoadSensor``) polls it, and runs re-check it between checks.
    ``thresholds``: ``backlog_threshold``, ``outbox_max_age_s``, ``max_active``, ``max_lock_waits``."""
    reason = backlog(conn, thresholds.get("backlog_threshold"), thresholds.get("outbox_max_age_s"))
    return reason or database_load(conn, thresholds.get("max_active"), thresholds.get("max_lock_waits"))
