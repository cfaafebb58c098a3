"""Scrape DAGs: one per active agency (`scrape_<key>`) and `scrape_ebc_sources`, from the agency config.

Each is scheduled on its due asset, emitted by the `scrape_dispatcher` DAG (dags/scrape_dispatcher.py)
when its poll of the agency's listing (at the agency's learnt cadence) finds news;
`DGB_SCRAPE_CADENCE=fixed`: every 10 minutes instead."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Asset, Param

from dgb.dags_meta import DEFAULT_ARGS, SCRAPE_POOL, SCRAPE_WEIGHT_RULE
from dgb.scraper.dags import EBC_DAG_ID, scrape_specs
from dgb_airflow.operators.scrape import ScrapeAgencyOperator

# "x-" schemes are ours: Airflow does not look a handler up for them (for "dgb://" it loaded every
# provider's asset handlers, Google's and Amazon's clients among them: ~0.5 s and ~50 MB in every
# process that parses this file, each scrape task included)
NEWS_TABLE = Asset(name="dgb_news", uri="x-dgb://postgres/news")
SCRAPED_TOPIC = Asset(name="dgb.news.scraped", uri="x-dgb://pubsub/dgb.news.scraped")

DOC = """
### {dag_id}
Scrapes {what} {when}, stores new and edited articles in PostgreSQL
(`news`, with `news_update_history` for edits and a `scrape_runs` row per agency run) and,
in the same transaction, their `dgb.news.scraped` events in the outbox; the task then publishes
them to Pub/Sub at once (the `outbox_relay` DAG is the safety net).

**Backfill**: `airflow dags trigger {dag_id} -c '{{"start_date": "2026-11-01"}}'`
(optional `end_date`, and `allow_update: false` to leave known articles untouched).
"""

for spec in scrape_specs():
    what = (
        "the EBC sources"
        if len(spec.agency_keys) > 1 or spec.dag_id == EBC_DAG_ID
        else f"agency `{spec.agency_key}`"
    )
    name, uri = spec.due_asset
    when = (
        "every 10 minutes (staggered)"
        if spec.schedule
        else f"when `scrape_dispatcher`'s poll of its listing finds news (asset `{name}`; the polls"
        " follow a cadence learnt from its publication history, between the floor and the ceiling;"
        " see `dgb status`)"
    )
    with DAG(
        dag_id=spec.dag_id,
        schedule=spec.schedule or Asset(name=name, uri=uri),
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        dagrun_timeout=timedelta(minutes=30),
        default_args=DEFAULT_ARGS,
        tags=["dgb", "scrape"],
        params={
            "start_date": Param(
                None,
                type=["null", "string"],
                format="date",
                description="backfill from this date (YYYY-MM-DD)",
            ),
            "end_date": Param(
                None,
                type=["null", "string"],
                format="date",
                description="backfill up to this date (YYYY-MM-DD)",
            ),
            "allow_update": Param(True, type="boolean", description="update known articles that changed"),
        },
        doc_md=DOC.format(dag_id=spec.dag_id, what=what, when=when),
    ) as dag:
        ScrapeAgencyOperator(
            task_id="scrape",
            agency_keys=spec.agency_keys,
            pool=SCRAPE_POOL,
            weight_rule=SCRAPE_WEIGHT_RULE,  # the oldest waiting run first, not the DAG id's order
            outlets=[NEWS_TABLE, SCRAPED_TOPIC],
            execution_timeout=timedelta(minutes=20),  # inside the 30 min run timeout
        )
    globals()[spec.dag_id] = dag
