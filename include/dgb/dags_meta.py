"""Registry of the pipeline's DAG ids and shared DAG defaults (no Airflow import).

DAG files build their DAGs from here, and `make up` unpauses exactly these ids, so the
list of "pipeline DAGs" has one home.
"""

from __future__ import annotations

from datetime import timedelta

OWNER = "dgb-pipeline"

DEFAULT_ARGS = {
    "owner": OWNER,
    "retries": 3,
    "retry_delay": timedelta(seconds=30),
    "retry_exponential_backoff": True,
    "max_retry_delay": timedelta(minutes=10),
}

BOOTSTRAP_DAG_ID = "dgb_bootstrap"


def pipeline_dag_ids(settings=None) -> list[str]:
    """Every DAG id this checkout defines (the ones `make up` unpauses)."""
    ids = [BOOTSTRAP_DAG_ID]
    try:
        from dgb.scraper import dags as scrape_dags
    except ModuleNotFoundError:
        scrape_dags = None
    if scrape_dags is not None:
        ids += scrape_dags.dag_ids(settings)
    return ids
