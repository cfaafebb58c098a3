"""The engagement DAGs (no Airflow import; dags/engagement.py builds them, `make up` unpauses them;
their schedules are settings, :mod:`dgb.config.engagement`).

* ``trending_scores``: every ``DGB_TRENDING_MINUTES`` (default 10), the trending scores;
* ``engagement_import``: hourly (``DGB_ENGAGEMENT_CRON``), view counts from Umami; skips unless
  the Airflow connection ``umami_db`` exists.
"""

from __future__ import annotations

TRENDING_DAG_ID = "trending_scores"
VIEWS_DAG_ID = "engagement_import"
UMAMI_CONN_ID = "umami_db"


def dag_ids(settings=None) -> list[str]:
    return [TRENDING_DAG_ID, VIEWS_DAG_ID]
