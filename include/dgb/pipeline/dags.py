"""The event-driven stage DAGs (no Airflow import; dags/pipeline_stages.py builds them).

Each DAG is scheduled by its subscriptions' assets (one AssetWatcher each, on the ack-mode
Pub/Sub trigger) OR a short timer that sweeps pending work the events missed. The later stages are
also *woken* by the first stage's asset (``wake_subscriptions``, ``DGB_STAGE_EARLY_WAKE``): the
scraped event that starts enrich_news starts embed_news and index_news too, so their task start and
stage build overlap the enrichment instead of following it; a woken run does none of the wake's
messages, it waits for the work they announce (:func:`dgb.pipeline.runner.keep_sweeping`).
"""

from __future__ import annotations

from dataclasses import dataclass

from dgb import topology
from dgb.pipeline.definitions import definition


@dataclass(frozen=True)
class StageDag:
    dag_id: str
    stage: str
    sweep_cron: str
    doc: str
    # subscriptions whose events only wake the DAG (their messages are another stage's input)
    wake_subscriptions: tuple[str, ...] = ()

    @property
    def subscriptions(self) -> tuple[str, ...]:
        """The stage's input subscriptions (from its definition)."""
        return definition(self.stage).subscriptions


STAGE_DAGS = (
    StageDag(
        "enrich_news",
        "enrich",
        "* * * * *",
        "Classifies each scraped article into the 3-level theme taxonomy and writes a summary "
        "(DGB_CLASSIFIER: `local` offline classifier, `bedrock`, or `hybrid`: local first, Bedrock "
        "when unsure), then emits `dgb.news.enriched`.",
    ),
    StageDag(
        "embed_news",
        "embed",
        "* * * * *",
        "Embeds title + summary with the resident model service (DGB_EMBEDDING_MODEL), stores the "
        "vector with its model name, then emits `dgb.news.embedded`.",
        wake_subscriptions=(topology.SUB_ENRICHMENT,),
    ),
    StageDag(
        "index_news",
        "index",
        "* * * * *",
        "Builds each article's Typesense document whole from PostgreSQL and upserts it (removed "
        "articles are deleted from the index), recording the version it indexed.",
        wake_subscriptions=(topology.SUB_ENRICHMENT,),
    ),
)


def dag_ids(settings=None) -> list[str]:
    return [d.dag_id for d in STAGE_DAGS]
