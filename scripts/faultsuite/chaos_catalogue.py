"""The chaos runs' catalogue (:mod:`faultsuite.chaos` injects them): every fault with what it does
and how long it lasts, what each acts on (two faults of an ``overlap`` never share a target), the
soak's subset, and the record of one injected fault with its confirmation."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# fault -> (what it does, how long the fault lasts in seconds: a kill's dead time, an outage's length)
CHAOS = {
    "kill_scheduler": ("kill -9 of the scheduler's process group", 2),
    "kill_triggerer": ("kill -9 of the triggerer", 2),
    "kill_dag_processor": ("kill -9 of the DAG processor", 2),
    "kill_api_server": ("kill -9 of the api-server", 2),
    "kill_task": ("kill -9 of a running pipeline or scrape task", 0),
    "kill_model": ("kill -9 of the model service", 5),
    "kill_postgres": ("kill -9 of the PostgreSQL postmaster (crash recovery at the next start)", 0),
    "kill_typesense": ("kill -9 of the Typesense server", 0),
    "restart_postgres": ("pg_ctlcluster restart", 0),
    "restart_typesense": ("Typesense stopped and started", 0),
    "restart_emulator": ("Pub/Sub emulator stopped and started (its messages are lost)", 0),
    "typesense_outage": ("Typesense down for 5 minutes", 300),
    "model_outage": ("the model service down for 5 minutes", 300),
    "site_503": ("the site answering 503 to everything for 3 minutes", 180),
    "site_slow": ("the site trickling every answer over 20 s for 3 minutes", 180),
    "pause_scheduler": ("SIGSTOP of the scheduler's process group for 30-120 s, then SIGCONT", 0),
    "pause_triggerer": ("SIGSTOP of the triggerer for 30-120 s, then SIGCONT", 0),
    "pause_typesense": ("SIGSTOP of Typesense for 30-120 s, then SIGCONT", 0),
    "pause_model": ("SIGSTOP of the model service for 30-120 s, then SIGCONT", 0),
    "pause_task": ("SIGSTOP of a running task's process for 30-120 s, then SIGCONT", 0),
    "overlap": ("two other faults drawn and started together", 0),
    "upgrade": ("the next version deployed: new DAG version, a rewrite of news.content, events 1.1", 0),
}
# what bench_soak.py draws from (its documented faults; a seed draws what it drew before)
SOAK_FAULTS = (
    "kill_scheduler",
    "kill_triggerer",
    "kill_dag_processor",
    "kill_task",
    "kill_model",
    "restart_postgres",
    "restart_typesense",
    "restart_emulator",
    "typesense_outage",
    "model_outage",
    "site_503",
)
KILL_TARGETS = {
    "kill_scheduler": "airflow-scheduler",
    "kill_triggerer": "airflow-triggerer",
    "kill_dag_processor": "airflow-dag-processor",
    "kill_api_server": "airflow-api-server",
    "kill_model": "model",
    "kill_typesense": "typesense",
}
PAUSE_TARGETS = {
    "pause_scheduler": "airflow-scheduler",
    "pause_triggerer": "airflow-triggerer",
    "pause_typesense": "typesense",
    "pause_model": "model",
    "pause_task": None,  # a running task's own process, not a group
}
PAUSE_S = (30.0, 120.0)
OUTAGES = {"typesense_outage": "typesense", "model_outage": "model"}
SITE_FAULTS = {
    "site_503": {"path_prefix": "/", "fault": "503", "retry_after": 30},
    # 2 s between pieces: under the fetcher's 10 s read timeout, so pages arrive, slowly
    "site_slow": {"path_prefix": "/", "fault": "slow", "delay": 20, "chunks": 10},
}
PROBE_PATH = "/www.gov.br/"  # any page: every answer under path_prefix "/" gets the fault
# what a fault acts on: the two faults of an overlap never share one
TARGET = {
    **{f: n.removeprefix("airflow-") for f, n in KILL_TARGETS.items()},
    **{f: (n or "task").removeprefix("airflow-") for f, n in PAUSE_TARGETS.items()},
    **OUTAGES,
    "kill_task": "task",
    "kill_postgres": "postgres",
    "restart_postgres": "postgres",
    "restart_typesense": "typesense",
    "restart_emulator": "pubsub",
    "site_503": "site",
    "site_slow": "site",
}
NOT_OVERLAPPED = ("overlap", "upgrade")  # the upgrade restarts every Airflow component itself
PORTS = {"typesense": "typesense_port", "pubsub": "pubsub_port", "model": "model_port"}


@dataclass
class Injected:
    """One fault of a chaos run, as the history records it."""

    fault: str
    what: str
    started: str  # ISO 8601, UTC
    ended: str | None = None
    detail: str = ""
    recovery_s: float | None = None  # from its end until the pipeline had caught up again
    started_mono: float = field(default=0.0, repr=False)
    ended_mono: float = field(default=0.0, repr=False)
    confirmed: bool = False  # seen to happen (see confirmation); False: it does not count
    confirmation: str = ""  # what was observed
    parts: list[Injected] = field(default_factory=list)  # overlap: the two faults, each its own record

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("started_mono")
        d.pop("ended_mono")
        d["parts"] = [p.as_dict() for p in self.parts]
        return d


@dataclass
class Outcome:
    detail: str = ""
    confirmed: bool = False
    confirmation: str = ""
