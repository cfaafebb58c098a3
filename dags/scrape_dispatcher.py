"""The scrape dispatcher: every minute, poll the agencies whose learnt cadence makes them due and
start the scrape DAGs of those whose listing shows news."""

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
Every minute: forecasts each agency's articles per hour from its publication history in `news`
(articles by hour of the week over the last 28 days, an empirical Bayes prior fitted over all
agencies, time since its newest article), plans the listing budget (`DGB_SCRAPE_LISTING_SHARE`,
0.18 of www.gov.br's 2 req/s over the week) hour by hour where the news is forecast, allocates this
hour's polls to the agencies where a poll brings the most articles under `DGB_SCRAPE_TARGET`
(intervals between `DGB_SCRAPE_FLOOR`, 60 s, and `DGB_SCRAPE_CEILING`, 3600 s), and polls this
minute's share of the hour's budget, for up to 45 s: one listing request each (Plone 6: 10 summaries), items
compared with the stored URLs up to the known-URL fence. An agency whose listing shows an
unknown item (or fails) gets its scrape DAG started: an event of its due asset. Every agency's
cadence, reason and measured lag go to `scrape_cadence`, its polls per hour to `listing_polls`
(`dgb status`, the pipeline view).
Manual runs of a scrape DAG still work and count as polls. `DGB_SCRAPE_CADENCE=fixed` removes
this DAG (the scrape DAGs then run every 10 minutes).
""",
    ) as scrape_dispatcher:
        ScrapeDispatchOperator(
            task_id="dispatch",
            outlets=[AssetAlias(DUE_ALIAS)],
            execution_timeout=timedelta(minutes=2),
        )
