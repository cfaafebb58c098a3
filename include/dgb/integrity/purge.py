"""Trimming the check log: ``integrity_checks`` rows are kept for a while, the daily roll-up
(``integrity_daily``) keeps the counts."""

from __future__ import annotations

import logging

from dgb.config import integrity as config_integrity
from dgb.db import transaction

log = logging.getLogger("dgb.integrity")


def purge_old_checks(conn, days: int | None = None, batch: int = 10_000) -> int:
    """Drop ``integrity_checks`` rows older than ``DGB_INTEGRITY_LOG_DAYS`` (default 14); the
    daily roll-up keeps the counts."""
    days = config_integrity.check_log_days() if days is None else days
    if days <= 0:
        return 0
    with transaction(conn) as cur:
        cur.execute(
            "DELETE FROM integrity_checks WHERE id IN (SELECT id FROM integrity_checks"
            " WHERE checked_at < now() - make_interval(days => %s) LIMIT %s)",
            (days, batch),
        )
        return cur.rowcount


def purge_after_run(conn) -> None:
    """Trim old ``integrity_checks`` rows after a run; a failure only logs (the run's work is kept)."""
    try:
        purge_old_checks(conn)
    except Exception:
        conn.rollback()
        log.warning("integrity: purging old check rows failed", exc_info=True)
