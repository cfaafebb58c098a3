"""The ``reconcile_runs`` ledger: one row per reconcile, redrive or replay run."""

from __future__ import annotations

import json

from dgb.db import transaction


def record(
    conn,
    mode: str,
    *,
    found: dict,
    repaired: dict,
    flagged: int,
    seconds: float,
    dry_run: bool = False,
    detail: dict | None = None,
    cur=None,
) -> int:
    """Insert the run's row and return its id; with ``cur``, inside the caller's transaction (the
    row commits with the work it describes), else in a transaction of its own."""
    if cur is not None:
        return _insert(cur, mode, dry_run, found, repaired, flagged, seconds, detail)
    with transaction(conn) as own:
        return _insert(own, mode, dry_run, found, repaired, flagged, seconds, detail)


def _insert(cur, mode, dry_run, found, repaired, flagged, seconds, detail) -> int:
    cur.execute(
        "INSERT INTO reconcile_runs (mode, dry_run, found, repaired, flagged, seconds, detail)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (
            mode,
            dry_run,
            json.dumps(found),
            json.dumps(repaired),
            flagged,
            seconds,
            json.dumps(detail or {}, default=str),
        ),
    )
    return cur.fetchone()[0]
