"""The safety-net DAGs (no Airflow import; dags/reconcile.py builds them, `make up` unpauses them;
their schedules are settings, :mod:`dgb.config.reconcile`).

* ``reconcile_news``: daily, every article + a full Typesense comparison (production's daily
  safety-net DAG for articles a worker never processed), at ``DGB_RECONCILE_DAILY_CRON`` (default 03:30 UTC);
* ``reconcile_sweep``: every ``DGB_RECONCILE_SWEEP_MINUTES`` (default 15) over the articles changed
  in the last ``DGB_RECONCILE_SWEEP_WINDOW_HOURS`` (default 48);
* ``redrive_dead_letters``: manual, re-publishes selected dead letters after a fix;
* ``replay_events``: manual, re-processes a time window (republish, or snapshot + seek).
"""

from __future__ import annotations

RECONCILE_DAG_ID = "reconcile_news"
SWEEP_DAG_ID = "reconcile_sweep"
REDRIVE_DAG_ID = "redrive_dead_letters"
REPLAY_DAG_ID = "replay_events"


def dag_ids(settings=None) -> list[str]:
    return [RECONCILE_DAG_ID, SWEEP_DAG_ID, REDRIVE_DAG_ID, REPLAY_DAG_ID]
