"""Pipeline task instances as Airflow's metadata database has them, checked against the live
processes (``/proc``): a running one to kill, and the killed ones Airflow still counts as running."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from .catalogue import STAGE_DAGS
from .plumbing import Db


def running_task(af: Db, dags: tuple[str, ...], since: datetime) -> tuple[int, str] | None:
    rows = af.query(
        "SELECT pid, dag_id, task_id, id::text FROM task_instance WHERE state = 'running'"
        " AND dag_id = ANY(%s) AND start_date >= %s AND pid IS NOT NULL"
        " ORDER BY start_date DESC",
        (list(dags), since),
    )
    for pid, dag_id, task_id, _ti in rows:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "airflow" in cmd:
            return pid, f"{dag_id}.{task_id}"
    return None


def orphaned_tasks(af: Db) -> list[str]:
    """Pipeline task instances Airflow has as running whose process is gone (killed)."""
    try:
        rows = af.query(
            "SELECT dag_id, task_id, pid FROM task_instance WHERE state = 'running'"
            " AND (dag_id = ANY(%s) OR dag_id LIKE 'scrape\\_%%' OR dag_id = 'outbox_relay')",
            (list(STAGE_DAGS),),
        )
    except Exception:
        return []
    out = []
    for dag_id, task_id, pid in rows:
        if pid is None:
            continue
        try:
            alive = "airflow" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            alive = False
        if not alive:
            out.append(f"{dag_id}.{task_id}")
    return out
