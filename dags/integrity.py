"""Integrity DAGs: one per article-age tier (`integrity_tier_<tier>`), each on its own schedule,
all from one configuration (dgb.integrity.tiers.Schedule, `DGB_INTEGRITY_*`)."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from dgb.dags_meta import DEFAULT_ARGS
from dgb.integrity.dags import POOL, tier_dag_specs
from dgb.integrity.tiers import Schedule
from dgb_airflow.operators.integrity import IntegrityTierOperator

DOC = """
### {dag_id}
Integrity re-checks of articles aged **{label}**, every **{every}** ({mode} schedule).

Each run takes up to {batch} due articles of the tier from `integrity_state` (never checked
first, then the longest overdue; indexed query) and, per article:

* **content**: conditional GET (`If-None-Match` / `If-Modified-Since`): 304 = unchanged;
  404/410 = removed (`news.removed_at`, `problem='removed'`, hidden from search); otherwise the
  page is parsed with the scraper's parser and compared on extracted fields. A change updates the
  article, writes `news_update_history` rows (`source='integrity'`) and re-sends it through the
  pipeline (outbox `dgb.news.scraped`);
* **image**: HEAD, GET with `Range: bytes=0-1023` when HEAD is refused; a broken image sets
  `news.image_broken` and is re-indexed.

Politeness and safety are the scraper's (per-host interval, Retry-After/backoff, robots.txt,
size cap) plus the SSRF guard (`dgb url-policy URL`). Runs yield when the event pipeline has a
backlog. Pool `{pool}` caps concurrent checking. Metrics: `dgb integrity-report`, the SQL views
`integrity_agency_metrics` / `integrity_tier_outcomes`, and the **DGB integrity** page in the UI.
"""


def _every(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    if minutes % (24 * 60) == 0:
        return f"{minutes // (24 * 60)} day(s)"
    if minutes % 60 == 0:
        return f"{minutes // 60} hour(s)"
    return f"{minutes} minutes"


_schedule = Schedule.from_env()
for spec in tier_dag_specs(_schedule):
    with DAG(
        dag_id=spec.dag_id,
        schedule=spec.every,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        dagrun_timeout=timedelta(hours=3),
        default_args=DEFAULT_ARGS,
        tags=["dgb", "integrity"],
        doc_md=DOC.format(
            dag_id=spec.dag_id,
            label=spec.tier.label,
            every=_every(spec.every),
            mode=_schedule.mode,
            batch=spec.batch_size,
            pool=POOL,
        ),
    ) as dag:
        IntegrityTierOperator(
            task_id="check_tier",
            tier=spec.tier_name,
            limit=spec.batch_size,
            pool=POOL,
            max_seconds=max(60.0, min(spec.every.total_seconds() * 0.9, 3600.0)),
            execution_timeout=timedelta(hours=2),
        )
    globals()[spec.dag_id] = dag
