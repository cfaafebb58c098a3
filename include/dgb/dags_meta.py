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
    import importlib

    from dgb import has_module

    ids = [BOOTSTRAP_DAG_ID]
    for module in OPTIONAL_DAG_MODULES:
        if has_module(module):
            ids += importlib.import_module(module).dag_ids(settings)
    return ids


# Domain modules that generate DAGs; each exposes dag_ids(settings) -> list[str].
OPTIONAL_DAG_MODULES = (
    "dgb.scraper.dags",
    "dgb.pipeline.dags",
    "dgb.integrity.dags",
    "dgb.reconcile.dags",
    "dgb.engagement.dags",
)

# Airflow pools (created by `make up`; airflow_settings.yaml for Astro): name -> (slots, description)
SCRAPE_POOL = "scrape_http"
POOLS = {
    SCRAPE_POOL: (4, "Concurrent scrape tasks (each fetches one host at a time, politely)"),
    "integrity_http": (2, "Concurrent integrity-check tasks (HEAD/conditional GET re-checks of stored news)"),
}
# the order in which scrape tasks waiting for the pool start: the oldest run first (Airflow's own
# order ties asset-triggered runs, which have no logical date; plugins/dgb_airflow/priority.py)
SCRAPE_WEIGHT_RULE = "dgb_airflow.priority.OldestRunFirst"
