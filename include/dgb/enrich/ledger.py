"""The daily LLM usage ledger (table ``llm_usage_daily``, migration 0002).

:func:`record_usage` adds a batch's usage to the row of each (day, model) with one UPSERT, so
concurrent tasks and re-runs accumulate instead of overwriting. The caller passes a DB-API
connection (the DAG's ``PostgresHook`` connection, or :func:`dgb.db.connect`). The enrich stage
records each chunk's usage with ``commit=False`` inside the chunk's own transaction
(:meth:`dgb.pipeline.stages.EnrichStage.record_chunk`), so the results of paid calls and their
bill commit together: a run stopped midway loses neither.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import Any

COUNTERS = ("calls", "input_tokens", "output_tokens", "throttled", "failures")

UPSERT_SQL = (
    "INSERT INTO llm_usage_daily (day, model_id, calls, input_tokens, output_tokens, throttled, failures)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (day, model_id) DO UPDATE SET"
    " calls = llm_usage_daily.calls + EXCLUDED.calls,"
    " input_tokens = llm_usage_daily.input_tokens + EXCLUDED.input_tokens,"
    " output_tokens = llm_usage_daily.output_tokens + EXCLUDED.output_tokens,"
    " throttled = llm_usage_daily.throttled + EXCLUDED.throttled,"
    " failures = llm_usage_daily.failures + EXCLUDED.failures,"
    " updated_at = now()"
)


def _day(value: Any) -> date:
    if value is None:
        return datetime.now(UTC).date()
    if isinstance(value, datetime):
        return value.astimezone(UTC).date() if value.tzinfo else value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])


def aggregate(model_id: str, usage_rows: Iterable[Any]) -> dict[tuple[date, str], dict[str, int]]:
    """Sum usage rows per (day, model). A row is a usage dict (``calls``, ``input_tokens``,
    ``output_tokens``, ``throttled``, ``failures``, optional ``day`` and ``model_id``) or a
    classification result carrying one in ``.usage``; rows without usage are skipped."""
    totals: dict[tuple[date, str], dict[str, int]] = {}
    for row in usage_rows:
        if row is not None and not isinstance(row, dict):
            row = getattr(row, "usage", None)
        if not row:
            continue
        key = (_day(row.get("day")), str(row.get("model_id") or model_id))
        acc = totals.setdefault(key, dict.fromkeys(COUNTERS, 0))
        for name in COUNTERS:
            acc[name] += int(row.get(name) or 0)
    return totals


def record_usage(conn, model_id: str, usage_rows: Iterable[Any], *, commit: bool = True) -> int:
    """Add ``usage_rows`` to ``llm_usage_daily``; returns the number of (day, model) rows touched.

    With ``commit`` (default) the change is committed (rolled back on error); pass
    ``commit=False`` to make it part of the caller's transaction.
    """
    totals = aggregate(model_id, usage_rows)
    if not totals:
        return 0
    params = [(day, model, *(acc[name] for name in COUNTERS)) for (day, model), acc in sorted(totals.items())]
    try:
        with conn.cursor() as cur:
            cur.executemany(UPSERT_SQL, params)
        if commit:
            conn.commit()
    except BaseException:
        if commit:
            conn.rollback()
        raise
    return len(params)
