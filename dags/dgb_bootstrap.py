"""Bootstrap: schema migrations, reference data, Pub/Sub topology, Typesense collection."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import dag, task

from dgb.dags_meta import BOOTSTRAP_DAG_ID, DEFAULT_ARGS


@dag(
    dag_id=BOOTSTRAP_DAG_ID,
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["dgb", "maintenance"],
    doc_md="""
### dgb_bootstrap
Idempotent set-up of everything the pipeline's data plane needs, for deployments without
`make up` (Astronomer, Cloud Composer): applies pending PostgreSQL migrations, loads the
agency catalogue and the theme taxonomy, creates/updates the Pub/Sub topology (topics,
subscriptions, dead-letter topics) and the Typesense collection + alias. Safe to run any
time; daily it re-asserts the declared state.
""",
)
def dgb_bootstrap():
    # every task ends: migrations and reference data take seconds, the topology and the collection
    # a few calls each; a hung server fails the task (to be retried) instead of holding a slot
    # one decorator per task: a single task(...) object reused for several functions names every
    # task after the first one (migrate, migrate__1, ...)
    timeout = timedelta(minutes=15)

    @task(execution_timeout=timeout)
    def migrate() -> list[str]:
        from airflow.providers.postgres.hooks.postgres import PostgresHook

        from dgb import db

        conn = PostgresHook(postgres_conn_id="dgb_db").get_conn()
        try:
            return db.migrate(conn)
        finally:
            conn.close()

    @task(execution_timeout=timeout)
    def load_reference() -> str:
        from airflow.providers.postgres.hooks.postgres import PostgresHook

        from dgb import agencies, db, taxonomy

        conn = PostgresHook(postgres_conn_id="dgb_db").get_conn()
        try:
            n_agencies = db.upsert_agencies(conn, agencies.load_agencies().values())
            n_themes = db.upsert_themes(conn, taxonomy.themes_rows(taxonomy.load_taxonomy()))
        finally:
            conn.close()
        return f"{n_agencies} agencies, {n_themes} themes"

    @task(execution_timeout=timeout)
    def pubsub_topology() -> dict:
        from dgb import topology
        from dgb_airflow.hooks.pubsub import DgbPubSubHook

        hook = DgbPubSubHook(gcp_conn_id="google_cloud_default")
        return topology.apply(hook.project_id, hook.get_conn(), hook.subscriber_client)

    @task(execution_timeout=timeout)
    def typesense_collection() -> str:
        from dgb.config import settings
        from dgb.search.schema import ensure_collection
        from dgb_airflow.hooks.typesense import TypesenseHook

        return ensure_collection(settings(), TypesenseHook().get_conn())

    migrate() >> load_reference()
    pubsub_topology()
    typesense_collection()


dgb_bootstrap()
