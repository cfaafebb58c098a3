"""Outbox relay on its own short schedule (the scrape DAGs also relay right after scraping)."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from dgb.dags_meta import DEFAULT_ARGS
from dgb.scraper.dags import RELAY_DAG_ID
from dgb_airflow.operators.outbox import OutboxRelayOperator

with DAG(
    dag_id=RELAY_DAG_ID,
    schedule=timedelta(minutes=1),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(minutes=10),
    default_args={**DEFAULT_ARGS, "retry_delay": timedelta(seconds=15)},
    tags=["dgb", "outbox"],
    doc_md="""
### outbox_relay
Publishes every pending row of the `outbox` table to its Pub/Sub topic, in creation order,
marking rows sent only once Pub/Sub confirmed them. Rows whose publish failed are retried
with exponential backoff (per row). Runs every minute as a safety net beside the relay task
that follows each scrape, so no event waits for the daily reconciliation.
""",
) as outbox_relay:
    OutboxRelayOperator(task_id="relay_outbox", execution_timeout=timedelta(minutes=5))
