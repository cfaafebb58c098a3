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
) -> int:
    with transaction(conn) as cur:
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
