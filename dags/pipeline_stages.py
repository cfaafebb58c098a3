"""Event-driven stages: enrich_news, embed_news, index_news, on Pub/Sub asset watchers."""

from __future__ import annotations

from datetime import timedelta

import pendulum

# the Task SDK's timetables: the core ones (airflow.timetables) serialize at construction and pull
# in the scheduler's models, which every stage task would then import while parsing this file
from airflow.sdk import DAG, Asset, AssetOrTimeSchedule, AssetWatcher, CronTriggerTimetable

from dgb import topology
from dgb.config import settings
from dgb.config.pipeline import stage_early_wake
from dgb.dags_meta import DEFAULT_ARGS
from dgb.pipeline.dags import STAGE_DAGS
from dgb_airflow.operators.stage import StageOperator
from dgb_airflow.triggers.pubsub import PubSubAckTrigger

PROJECT = settings().gcp_project  # DGB_GCP_PROJECT

DOC = """
### {dag_id}
{doc}

**Triggers**: an asset per subscription ({subs}) with an AssetWatcher on the ack-mode Pub/Sub
trigger (`dgb_airflow.triggers.pubsub.PubSubAckTrigger`: a message is acked only after its asset
event is stored; poison messages go to the subscription's dead-letter topic), OR every minute
to sweep work the events missed. A run processes every triggering event and message, plus up to
1,000 pending articles from PostgreSQL.

**Manual run**: `airflow dags trigger {dag_id} -c '{{"unique_ids": ["<unique_id>", ...]}}'`
"""


def subscription_asset(name: str) -> Asset:
    sub = topology.subscription(name)
    return Asset(
        name=name,
        # an "x-" scheme is not normalised: any other one makes the Task SDK import every
        # provider's asset URI handlers (GCS, S3, ...), ~2 s of every stage task's DAG parse
        uri=f"x-dgb://pubsub/{PROJECT}/{name}",
        watchers=[
            AssetWatcher(
                name=f"watch_{name.replace('.', '_').replace('-', '_')}",
                trigger=PubSubAckTrigger(
                    project_id=PROJECT,
                    subscription=name,
                    dead_letter_topic=sub.dead_letter_topic,
                    max_failures=sub.max_delivery_attempts,
                ),
            )
        ],
    )


# one Asset (one watcher) per subscription, shared by every DAG it starts or wakes
ASSETS: dict[str, Asset] = {}
EARLY_WAKE = stage_early_wake()  # DGB_STAGE_EARLY_WAKE

for spec in STAGE_DAGS:
    names = spec.subscriptions + (spec.wake_subscriptions if EARLY_WAKE else ())
    for n in names:
        if n not in ASSETS:
            ASSETS[n] = subscription_asset(n)
    assets = [ASSETS[n] for n in names]
    condition = assets[0]
    for extra in assets[1:]:
        condition = condition | extra
    with (
        DAG(
            dag_id=spec.dag_id,
            schedule=AssetOrTimeSchedule(
                timetable=CronTriggerTimetable(spec.sweep_cron, timezone="UTC"), assets=condition
            ),
            start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
            catchup=False,
            max_active_runs=1,  # every run sweeps all pending work: overlapping runs would repeat it
            dagrun_timeout=timedelta(minutes=30),
            default_args={**DEFAULT_ARGS, "retry_delay": timedelta(seconds=10)},
            tags=["dgb", "pipeline", spec.stage],
            doc_md=DOC.format(
                dag_id=spec.dag_id,
                doc=spec.doc,
                subs=", ".join(f"`{s}`" for s in spec.subscriptions)
                + "".join(
                    f"; woken by `{s}` (DGB_STAGE_EARLY_WAKE)" for s in names[len(spec.subscriptions) :]
                ),
            ),
        ) as dag
    ):
        # inside the 30 min run timeout, so a hung attempt is killed and retried within the run
        StageOperator(task_id=spec.stage, stage=spec.stage, execution_timeout=timedelta(minutes=20))
    globals()[spec.dag_id] = dag
