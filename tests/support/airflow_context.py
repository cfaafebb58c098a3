"""The part of an Airflow task context the operators read, built without Airflow."""

from __future__ import annotations

from types import SimpleNamespace


def task_context(
    conf: dict | None = None,
    params: dict | None = None,
    run_id: str = "manual__test",
    try_number: int = 1,
    triggering_asset_events: dict | None = None,
) -> dict:
    """The part of an Airflow task context the operators read."""
    return {
        "params": params or {},
        "dag_run": SimpleNamespace(conf=conf or {}),
        "run_id": run_id,
        "ti": SimpleNamespace(try_number=try_number),
        "triggering_asset_events": triggering_asset_events or {},
    }
