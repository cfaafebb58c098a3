"""The event-driven stage DAGs (no Airflow import; dags/pipeline_stages.py builds them).

Each DAG is scheduled by its subscriptions' assets (one AssetWatcher each, on the ack-mode
Pub/Sub trigger) OR a short timer that sweeps pending work the events missed.
"""

from __future__ import annotations

from dataclasses import dataclass

from dgb.pipeline.definitions import definition


@dataclass(frozen=True)
class StageDag:
    dag_id: str
    stage: str
    sweep_cron: str
    doc: str

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
    ),
    StageDag(
        "index_news",
        "index",
        "* * * * *",
        "Builds each article's Typesense document whole from PostgreSQL and upserts it (removed "
        "articles are deleted from the index), recording the version it indexed.",
    ),
)


def dag_ids(settings=None) -> list[str]:
    return [d.dag_id for d in STAGE_DAGS]
