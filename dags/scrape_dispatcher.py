"""The scrape dispatcher: every minute, start the scrape DAGs whose learnt cadence makes them due."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, AssetAlias

from dgb.dags_meta import DEFAULT_ARGS
from dgb.scraper.dags import DISPATCHER_DAG_ID, DUE_ALIAS, learnt_cadence
from dgb_airflow.operators.scrape import ScrapeDispatchOperator

if learnt_cadence():
    with DAG(
        dag_id=DISPATCHER_DAG_ID,
        schedule=timedelta(minutes=1),
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        dagrun_timeout=timedelta(minutes=5),
        default_args={**DEFAULT_ARGS, "retry_delay": timedelta(seconds=10)},
        tags=["dgb", "scrape"],
        doc_md="""
### scrape_dispatcher
Every minute: computes each agency's scrape cadence from its publication history in `news`
(articles by hour of the week over the last 28 days, time since its newest article), between
`DGB_SCRAPE_FLOOR` (60 s) and `DGB_SCRAPE_CEILING` (3600 s), and emits the due asset of each
scrape DAG that is due, at most the listing share of www.gov.br's budget per minute
(`DGB_SCRAPE_LISTING_SHARE`, 0.5 of 2 req/s: 60). Every agency's cadence, reason and measured lag
go to `scrape_cadence` (`dgb status`, the pipeline view). Manual runs of a scrape DAG still work
and count as polls. `DGB_SCRAPE_CADENCE=fixed` removes this DAG (the scrape DAGs then run every
10 minutes).
""",
    ) as scrape_dispatcher:
        ScrapeDispatchOperator(
            task_id="dispatch",
            outlets=[AssetAlias(DUE_ALIAS)],
            execution_timeout=timedelta(minutes=2),
        )
