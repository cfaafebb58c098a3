"""The fault catalogue: which faults run, in which order, how long the outages last, and the
record of one fault's batch of articles (:class:`Batch`)."""

from __future__ import annotations

from dataclasses import dataclass, field

FAULTS = (
    "kill_triggerer",
    "kill_scheduler",
    "kill_task",
    "kill_model",
    "stop_typesense",
    "restart_emulator",
    "restart_postgres",
    "upgrade",
    "typesense_down",
    "model_down",
    "bedrock_throttle",
    "emulator_down",
)
# long outages: the dependency stays unavailable for OUTAGE_S (--quick: longer than every stage
# task's Airflow retry budget, see budget.RetryBudget.outage_s); recovery is measured from its end
LONG_OUTAGES = ("typesense_down", "model_down", "bedrock_throttle", "emulator_down")
OUTAGE_S = 600.0
QUICK_OUTAGE_CAP_S = 300.0  # --quick: the outage ends by then even if the retries are not spent
# --quick, emulator_down: no stage task fails on it (a stage commits its events to the outbox and
# relays them after the commit; a failed relay leaves them for the next), so no retry budget sizes
# it. 90 s is three times the Pub/Sub trigger's pull backoff cap (30 s): every watcher has backed
# off to its cap and retried there, and the relays' publish deadline (20 s) has passed many times.
EMULATOR_QUICK_OUTAGE_S = 90.0
# --quick: faults whose batch must have spent a stage task's Airflow retries before recovery
SPENDS_RETRIES = ("typesense_down", "model_down", "bedrock_throttle")
# kill -9 faults: the component, what the log calls it, how long it stays dead before its restart
KILLS = {
    "kill_triggerer": ("airflow-triggerer", "triggerer", 2),
    "kill_scheduler": ("airflow-scheduler", "scheduler process group", 2),
    "kill_model": ("model", "model service", 5),
}
RECOVERY_LIMIT_S = 300.0  # every batch indexed within 5 min of its dependency's recovery
BEDROCK_CONN_ID = "dgb_bedrock_fake"
STAGE_DAGS = ("enrich_news", "embed_news", "index_news")


@dataclass
class Batch:
    fault: str
    agency: str
    titles: list[str]
    slugs: list[str] = field(default_factory=list)
    published_at: float = 0.0
    fault_at: float | None = None
    fault_end: float | None = None
    done_at: float | None = None
    note: str = ""
    failed_for_good: int = 0  # task instances that failed with no retry left (upgrade: checked)
    uids: dict[str, str] = field(default_factory=dict)  # title -> unique_id, once scraped

    @property
    def long(self) -> bool:
        return self.fault in LONG_OUTAGES

    @property
    def recovery_s(self) -> float | None:
        """Short faults: from the injection; long outages: from the dependency's recovery."""
        if self.done_at is None:
            return None
        start = self.fault_end if self.long and self.fault_end else (self.fault_at or self.published_at)
        return self.done_at - start

    def add_note(self, text: str) -> None:
        """Append ``text`` to the note, space-separated."""
        self.note = (self.note + " " if self.note else "") + text
