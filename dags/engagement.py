"""The engagement figures: trending_scores (every few minutes) and engagement_import (hourly, off
without the Umami connection). Ids come from dgb.engagement.dags, schedules from
dgb.config.engagement."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from dgb.config.engagement import engagement_cron, trending_minutes
from dgb.dags_meta import DEFAULT_ARGS
from dgb.engagement.dags import TRENDING_DAG_ID, UMAMI_CONN_ID, VIEWS_DAG_ID
from dgb_airflow.operators.engagement import EngagementImportOperator, TrendingOperator

START = pendulum.datetime(2026, 1, 1, tz="UTC")
PUSH_DOC = """
**Same run, partial updates.** Only values that changed are written to `news_features` (merged:
`features || new`), and every one of them is sent to Typesense before the run ends, as batched
partial updates (`documents/import?action=update`: the other fields of each document stay as the
index stage wrote them). Articles not in the index yet get the value with their whole document
(the index stage reads `news_features`). A run that could not push everything fails and is
recorded `failed` in `engagement_runs`; the next run sends it again (it re-sends everything
written or indexed since the last complete run).
"""

with DAG(
    dag_id=TRENDING_DAG_ID,
    schedule=timedelta(minutes=trending_minutes()),
    start_date=START,
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(minutes=30),
    default_args=DEFAULT_ARGS,
    tags=["dgb", "engagement", "trending"],
    doc_md=f"""
### {TRENDING_DAG_ID}
Every {trending_minutes()} minutes (`DGB_TRENDING_MINUTES`): production's `trending_score`, computed
in PostgreSQL. For an article of level-1 theme T published at p: T's articles in [p - 24 h, p]
divided by (T's articles in [p - 7 days, p] / 7), 3 decimals, 0 when that average is 0. The portal's
"Em alta" badge shows at >= 1.5; its sort is `trending_score:desc`.

**Live for 24 hours.** Articles published in the last 24 hours are rescored every run (late articles
move their neighbours' scores); when an article turns 24 hours old its score is set to 0, so the
badge and the sort always mean "trending now". Articles never live while the job ran get no score.
{PUSH_DOC}
Shell check: `SELECT kind, started_at, status, figures FROM engagement_runs ORDER BY id DESC LIMIT 5`.
""",
) as trending_scores:
    TrendingOperator(task_id="trending", execution_timeout=timedelta(minutes=20))

with DAG(
    dag_id=VIEWS_DAG_ID,
    schedule=engagement_cron(),
    start_date=START,
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(minutes=45),
    default_args=DEFAULT_ARGS,
    tags=["dgb", "engagement", "umami"],
    doc_md=f"""
### {VIEWS_DAG_ID}
Optional, `{engagement_cron()}` (UTC, `DGB_ENGAGEMENT_CRON`): production's `view_count` and
`unique_sessions`, the pageviews and distinct sessions of the last `DGB_ENGAGEMENT_DAYS` (30) days
of each `/artigos/<unique_id>` page, read from the portal's Umami analytics database (its own
`website_event` table, `event_type` 1) through the Airflow connection `{UMAMI_CONN_ID}` (type
postgres, read only). **Off until that connection exists**: the task is skipped, not failed.
`DGB_UMAMI_WEBSITE_ID` limits the count to the portal's website id(s). Articles whose views left
the window go to 0.
{PUSH_DOC}""",
) as engagement_import:
    EngagementImportOperator(
        task_id="import_views", umami_conn_id=UMAMI_CONN_ID, execution_timeout=timedelta(minutes=30)
    )
