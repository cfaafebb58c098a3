"""Integrity DAGs, from one configuration (dgb.integrity.tiers.Schedule, `DGB_INTEGRITY_*`): the
budget scheduler's `integrity_budget` (default), or one per article-age tier
(`integrity_tier_<tier>`, schedule `tiers`/`exponential`). Each starts with the load sensor."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from dgb.dags_meta import DEFAULT_ARGS
from dgb.integrity.dags import POOL, budget_dag_spec, tier_dag_specs
from dgb.integrity.tiers import Schedule
from dgb_airflow.operators.integrity import IntegrityBudgetOperator, IntegrityTierOperator
from dgb_airflow.sensors.load import PipelineLoadSensor

BUDGET_DOC = """
### {dag_id}
Integrity re-checks within a request budget, every **{every}** (issue 14).

1. **wait_for_capacity** (deferrable sensor, shown as *deferred* while it waits): waits while
   the event pipeline has a backlog (outbox events unpublished, articles pending enrichment) or
   the database is loaded (active sessions, waiting locks); skips the run after ~9 min.
2. **check_budget**: takes what the budget allows in the slot ({rps} × slot; set
   `DGB_INTEGRITY_BUDGET_RPS` to pin a rate, `dgb.integrity.share`): articles under 3 h not
   checked for 10 min first, then articles unchecked for 25 days or with removal evidence due,
   then by expected value per cost (age, the agency's measured modification rate, time since the
   last change and check, the page's dateModified; a page that answers 304 costs less; images
   are re-checked less often than text). See `dgb.integrity.tiers` ("The budget scheduler").

Each check: conditional GET (304 = unchanged; 404/410 = suspect/removed with evidence; otherwise
parsed and compared field by field, changes re-sent through the pipeline) and, when due, the
image (HEAD, GET+Range fallback). Per-band coverage and overdue articles: `dgb integrity-report`,
StatsD `dgb.integrity.band.*`, the **DGB integrity** page. Pool `{pool}`.
"""

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
backlog (the `wait_for_capacity` sensor waits first).
Pool `{pool}` caps concurrent checking. Metrics: `dgb integrity-report`, the SQL views
`integrity_agency_metrics` / `integrity_tier_outcomes`, and the **DGB integrity** page in the UI.
"""


def _every(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    if minutes % (24 * 60) == 0:
        return f"{minutes // (24 * 60)} day(s)"
    if minutes % 60 == 0:
        return f"{minutes // 60} hour(s)"
    return f"{minutes} minutes"


def _load_sensor() -> PipelineLoadSensor:
    # The trigger gives up after max_wait_s (the run is skipped); the timeout only bounds the
    # sensor's own short pokes around it.
    return PipelineLoadSensor(
        task_id="wait_for_capacity",
        poll_interval=30.0,
        max_wait_s=540.0,
        execution_timeout=timedelta(minutes=12),
    )


def _rate(rps: float | None) -> str:
    if rps is None:
        return "what the scrapes leave of the host's requests/s, decided at the start of each run"
    return f"{rps:g} requests/s"


_schedule = Schedule.from_env()
if _schedule.mode == "budget":
    _spec = budget_dag_spec()
    with DAG(
        dag_id=_spec.dag_id,
        schedule=_spec.every,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        dagrun_timeout=timedelta(hours=1),
        default_args=DEFAULT_ARGS,
        tags=["dgb", "integrity"],
        doc_md=BUDGET_DOC.format(
            dag_id=_spec.dag_id, every=_every(_spec.every), rps=_rate(_spec.budget_rps), pool=POOL
        ),
    ) as dag:
        _load_sensor() >> IntegrityBudgetOperator(
            task_id="check_budget",
            pool=POOL,
            max_seconds=_spec.every.total_seconds() * 0.9,
            execution_timeout=timedelta(minutes=30),
        )
    globals()[_spec.dag_id] = dag
for spec in tier_dag_specs(_schedule) if _schedule.mode != "budget" else []:
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
        _load_sensor() >> IntegrityTierOperator(
            task_id="check_tier",
            tier=spec.tier_name,
            limit=spec.batch_size,
            pool=POOL,
            max_seconds=max(60.0, min(spec.every.total_seconds() * 0.9, 3600.0)),
            execution_timeout=timedelta(hours=2),
        )
    globals()[spec.dag_id] = dag
