"""Run records of the engagement jobs, and the push of their figures to Typesense.

A run (:func:`start`) takes its start time from PostgreSQL's clock; :func:`finish` records what it
did. The push (:func:`push`) sends, as partial updates, the figure ``key`` of every indexed article
whose ``news_features`` row was written, or which was (re)indexed, since the last run of the same
kind that pushed everything (less :data:`MARGIN`), so:

* every value the run itself changed goes out in the same run (its writes are after its start);
* a push that failed (Typesense down) is sent again by the next run: a failed run is no watermark;
* a whole-document upsert of the index stage that read the article before the run's write and
  reached Typesense after its push (its ``indexed_at`` is later than the watermark, or within the
  margin when its chunk's transaction started earlier) gets the value again.

A value is pushed at least once, sometimes twice: partial updates are idempotent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb

from dgb.search.partial import PartialResult, update_fields

#: The watermark is moved back this much: a stage chunk's transaction (whose start is what its
#: ``indexed_at`` records) may have begun before the previous run started.
MARGIN = timedelta(minutes=15)

#: Typesense field -> its type in the index (the push converts the JSON value to it).
FIELD_TYPES = {"trending_score": float, "view_count": int}


@dataclass
class Run:
    id: int
    kind: str
    started_at: datetime
    since: datetime | None  # the watermark: the last fully pushed run's start (None: never)


#: Run records older than this are deleted when a run starts (the latest complete run of each
#: kind is kept whatever its age: it is the watermark).
KEEP = timedelta(days=30)


def start(conn, kind: str) -> Run:
    """Record a run of ``kind`` (``trending`` | ``views``), committed; read its watermark; delete
    the records older than :data:`KEEP` but the watermark's."""
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(
            "DELETE FROM engagement_runs r WHERE r.kind = %s AND r.started_at < now() - %s"
            " AND r.id <> coalesce((SELECT max(id) FROM engagement_runs"
            " WHERE kind = r.kind AND status = 'ok'), 0)",
            (kind, KEEP),
        )
        cur.execute(
            "SELECT max(started_at) FROM engagement_runs WHERE kind = %s AND status = 'ok'",
            (kind,),
        )
        since = cur.fetchone()[0]
        cur.execute(
            "INSERT INTO engagement_runs (kind, started_at) VALUES (%s, clock_timestamp())"
            " RETURNING id, started_at",
            (kind,),
        )
        run_id, started = cur.fetchone()
    return Run(run_id, kind, started, since)


def finish(conn, run: Run, figures: dict[str, Any], error: str | None = None) -> None:
    """Record the outcome: ``ok`` (the run's watermark counts from now on) or ``failed``."""
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(
            "UPDATE engagement_runs SET finished_at = clock_timestamp(), status = %s, figures = %s,"
            " error = %s WHERE id = %s",
            ("failed" if error else "ok", Jsonb(figures), error[:2000] if error else None, run.id),
        )


_TO_PUSH = """
SELECT nf.unique_id, nf.features -> %(key)s
  FROM news_features nf
  JOIN news n ON n.unique_id = nf.unique_id
 WHERE nf.features ? %(key)s
   AND n.removed_at IS NULL AND n.indexed_at IS NOT NULL
   AND (%(since)s::timestamptz IS NULL OR nf.updated_at >= %(since)s OR n.indexed_at >= %(since)s)
 ORDER BY nf.unique_id
"""


def to_push(conn, key: str, since: datetime | None) -> dict[str, Any]:
    """``{unique_id: value}`` of ``key`` for the indexed articles written or indexed since
    ``since`` less :data:`MARGIN` (``None``: every article that has the key)."""
    cast = FIELD_TYPES[key]
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(_TO_PUSH, {"key": key, "since": since - MARGIN if since else None})
        return {uid: cast(value) for uid, value in cur.fetchall() if value is not None}


def push(conn, ts, alias: str, run: Run, key: str, *, batch_size: int = 500) -> PartialResult:
    """Send ``key`` of the articles :func:`to_push` selects to the index, as partial updates."""
    values = to_push(conn, key, run.since)
    return update_fields(ts, alias, ((uid, {key: v}) for uid, v in values.items()), batch_size=batch_size)


def push_all(
    conn,
    ts,
    alias: str,
    run: Run,
    key: str,
    what: str,
    figures: dict[str, Any],
    t0: float,
    *,
    batch_size: int = 500,
) -> None:
    """:func:`push`, its counts and the run's seconds into ``figures``; RuntimeError when the index
    rejected any (``what``: the values, e.g. "trending scores"), so the run is recorded as failed."""
    pushed = push(conn, ts, alias, run, key, batch_size=batch_size)
    figures.update(pushed.as_dict(), seconds=round(time.monotonic() - t0, 3))
    if pushed.failed:
        sample = dict(list(pushed.failed.items())[:5])
        raise RuntimeError(f"{len(pushed.failed)} {what} rejected by the index: {sample}")


def fail(conn, run: Run, figures: dict[str, Any], t0: float, exc: BaseException) -> None:
    """Record ``run`` as failed with ``exc`` (its seconds so far if not counted yet)."""
    figures.setdefault("seconds", round(time.monotonic() - t0, 3))
    finish(conn, run, figures, f"{type(exc).__name__}: {exc}")
