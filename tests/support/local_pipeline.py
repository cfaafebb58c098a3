"""The whole pipeline run in process, without Airflow, on the local gov.br site: the scrape, the
integrity checks that bring edits and removals in, the outbox relay to the Pub/Sub emulator and
the three stages on what their subscriptions hold, each as its DAG run calls it (the real
``run_stage``, the index stage's ``start_run`` as the operator calls it).

Sweeps: enrich and embed run on their messages alone (``sweep_limit=0``: a run its events
triggered, between two of the timer's sweeps, which would later repair a lost message); the index
stage sweeps too, the only way production's removals reach it (an integrity removal sends no
event)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from dgb import outbox
from dgb.fetch import Fetcher
from dgb.integrity.article_check import check_article
from dgb.pipeline import definitions, stages
from dgb.pipeline.messages import InMessage
from dgb.pipeline.report import StageReport
from dgb.pipeline.runner import RunOptions, run_stage
from dgb.scraper.run import scrape_agency

from .articles import mirrored_agency
from .fetch import FAST
from .integrity import checker, uid_of
from .pubsub import drain


@dataclass
class LocalPipeline:
    pg: Any
    project: str
    classifier: Any
    embedder: Any
    ts: Any
    alias: str
    site: Any
    base: str
    agency: str = "mec"
    reports: list[StageReport] = field(default_factory=list)

    def __post_init__(self) -> None:
        from google.cloud import pubsub_v1

        self.publisher = pubsub_v1.PublisherClient()

    # -- what the site changed reaches PostgreSQL

    def scrape(self):
        with Fetcher(FAST) as f:
            report = scrape_agency(self.pg, mirrored_agency(self.base, self.agency), f)
        assert report.status == "success", report
        return report

    def uid(self, slug: str) -> str:
        return uid_of(self.pg, slug)

    def edit(self, slug: str, **changes) -> None:
        """Edit on the site, and the integrity check that finds the change (a new event)."""
        self.site.edit(self.agency, slug, **changes)
        with checker(self.base) as f:
            result = check_article(self.pg, f, self.uid(slug))
        assert result.outcome == "modified", result.as_dict()

    def remove(self, slug: str, *, on_site: bool = True) -> None:
        """Take down on the site (410; ``on_site`` False: the site already did); two integrity
        checks 16 min apart confirm the removal."""
        if on_site:
            self.site.remove(self.agency, slug, 410)
        t0 = datetime.now(UTC)
        with checker(self.base) as f:
            check_article(self.pg, f, self.uid(slug), now=t0)
            result = check_article(self.pg, f, self.uid(slug), now=t0 + timedelta(minutes=16))
        assert result.outcome == "removed", result.as_dict()

    # -- the pipeline

    def relay(self) -> None:
        outbox.relay(self.pg, self.publisher, self.project)

    def deliver(self, definition: definitions.StageDefinition) -> list[InMessage]:
        """What the stage's subscriptions hold, pulled and acked (the trigger's part)."""
        return [m for sub in definition.subscriptions for m in drain(self.project, sub)]

    def stage(self, name: str):
        if name == "enrich":
            return stages.EnrichStage(self.classifier, self.pg)
        if name == "embed":
            return stages.EmbedStage(self.embedder, self.embedder.name)
        index = stages.IndexStage(self.ts, self.alias, self.pg, self.embedder.dim)
        index.start_run()
        return index

    def run_stage(self, name: str, messages: list[InMessage], **options) -> StageReport:
        sweep = 200 if name == "index" else 0
        report = run_stage(self.stage(name), self.pg, messages, RunOptions(sweep_limit=sweep, **options))
        self.reports.append(report)
        return report

    def run(self, start: str = "enrich") -> None:
        """One pass: relay, then each stage from ``start`` on its messages (relaying after each)."""
        names = list(definitions.DEFINITIONS)
        for name in names[names.index(start) :]:
            self.relay()
            self.run_stage(name, self.deliver(definitions.definition(name)))
