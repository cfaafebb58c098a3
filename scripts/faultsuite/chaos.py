"""The chaos soak's faults (scripts/bench_soak.py): drawn with a seeded random generator, one
every few minutes, each injected on the running stack and undone by itself.

Unlike the fault suite's batches, nothing waits for a batch here: the stack runs its real load
(every agency scraped, integrity checks, edits) while the faults come, and the history is checked
at the end. The primitives are the suite's own (:class:`faultsuite.components.Components`).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta

from dgb_dev import stack

from .airflow_tasks import running_task
from .catalogue import STAGE_DAGS
from .components import Components
from .context import Context
from .plumbing import log, wait_for

# fault -> (what it does, how long the fault lasts in seconds: a kill's dead time, an outage's length)
CHAOS = {
    "kill_scheduler": ("kill -9 of the scheduler's process group", 2),
    "kill_triggerer": ("kill -9 of the triggerer", 2),
    "kill_dag_processor": ("kill -9 of the DAG processor", 2),
    "kill_task": ("kill -9 of a running pipeline or scrape task", 0),
    "kill_model": ("kill -9 of the model service", 5),
    "restart_postgres": ("pg_ctlcluster restart", 0),
    "restart_typesense": ("Typesense stopped and started", 0),
    "restart_emulator": ("Pub/Sub emulator stopped and started (its messages are lost)", 0),
    "typesense_outage": ("Typesense down for 5 minutes", 300),
    "model_outage": ("the model service down for 5 minutes", 300),
    "site_503": ("the site answering 503 to everything for 3 minutes", 180),
}
KILL_TARGETS = {
    "kill_scheduler": "airflow-scheduler",
    "kill_triggerer": "airflow-triggerer",
    "kill_dag_processor": "airflow-dag-processor",
    "kill_model": "model",
}
OUTAGES = {"typesense_outage": "typesense", "model_outage": "model"}


@dataclass
class Injected:
    """One fault of the soak, as the history records it."""

    fault: str
    what: str
    started: str  # ISO 8601, UTC
    ended: str | None = None
    detail: str = ""
    recovery_s: float | None = None  # from its end until the pipeline had caught up again
    started_mono: float = field(default=0.0, repr=False)
    ended_mono: float = field(default=0.0, repr=False)

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("started_mono")
        d.pop("ended_mono")
        return d


class Chaos:
    """Draws and injects the soak's faults on the stack of ``ctx`` (its settings: the scratch
    names of bench_realtime)."""

    def __init__(self, ctx: Context, seed: int, site_base: str, scale: float = 1.0):
        self.ctx = ctx
        self.rng = random.Random(seed)
        self.components = Components(ctx)
        self.site = site_base
        self.scale = scale  # outage lengths times this (a short smoke run: < 1)

    def draw(self) -> str:
        return self.rng.choice(sorted(CHAOS))

    def next_gap_s(self, every_s: float) -> float:
        """Seconds until the next fault: ``every_s`` +- 20%, from the seeded generator."""
        return every_s * self.rng.uniform(0.8, 1.2)

    def inject(self, fault: str) -> Injected:
        what, hold = CHAOS[fault]
        hold *= self.scale if fault in OUTAGES or fault == "site_503" else 1
        rec = Injected(fault, what, datetime.now(UTC).isoformat(), started_mono=time.monotonic())
        log(f"chaos: {fault}: {what}")
        try:
            rec.detail = self._inject(fault, hold) or ""
        except Exception as exc:
            rec.detail = f"inject_error={type(exc).__name__}: {str(exc)[:200]}"
            log(f"chaos: {fault}: {rec.detail}")
        finally:
            for name in list(self.components.stopped):
                self.components.start_again(name)
            self.supervise()
        rec.ended = datetime.now(UTC).isoformat()
        rec.ended_mono = time.monotonic()
        return rec

    def _inject(self, fault: str, hold: float) -> str | None:
        c = self.components
        if fault in KILL_TARGETS:
            pid = c.kill9(KILL_TARGETS[fault])
            time.sleep(hold)
            c.start_again(KILL_TARGETS[fault])
            return f"pid={pid}"
        if fault == "kill_task":
            since = datetime.now(UTC) - timedelta(minutes=30)
            dags = (*STAGE_DAGS, *self._scrape_dags())
            victim = wait_for(
                lambda: running_task(self.ctx.af, dags, since), 120, "a running task", every=0.5
            )
            os.kill(victim[0], signal.SIGKILL)
            return f"killed={victim[1]}"
        if fault == "restart_postgres":
            ver, name = stack.Postgres(self.ctx.s)._cluster()
            c.stopped.add("postgres")
            try:
                subprocess.run(["pg_ctlcluster", ver, name, "restart"], capture_output=True, timeout=120)
            finally:
                wait_for(lambda: stack.component(self.ctx.s, "postgres").healthy(), 60, "postgres back")
                c.stopped.discard("postgres")
            return None
        if fault in ("restart_typesense", "restart_emulator"):
            name = "typesense" if fault == "restart_typesense" else "pubsub"
            c.stop(name)
            c.start_again(name)
            return None
        if fault in OUTAGES:
            name = OUTAGES[fault]
            c.holding = True
            try:
                c.stop(name)
                end = time.monotonic() + hold
                while time.monotonic() < end:
                    if c.healthy(name):  # something else started it: the outage goes on
                        c.stop(name)
                    time.sleep(2)
            finally:
                c.holding = False
                c.start_again(name)
            return f"held_s={hold:.0f}"
        if fault == "site_503":
            self._site_fault({"path_prefix": "/", "fault": "503", "retry_after": 30})
            try:
                time.sleep(hold)
            finally:
                self._site_fault({"clear": True})
            return f"held_s={hold:.0f}"
        raise ValueError(f"unknown chaos fault {fault!r}")

    def supervise(self) -> list[str]:
        """A process supervisor's turn (systemd, Kubernetes): start what is down."""
        try:
            return self.components.supervise()
        except Exception as exc:
            log(f"chaos: supervisor: {exc}")
            return []

    def _site_fault(self, body: dict) -> None:
        req = urllib.request.Request(
            f"{self.site}/_control/fault",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()

    def _scrape_dags(self) -> list[str]:
        rows = self.ctx.af.query("SELECT dag_id FROM dag WHERE dag_id LIKE 'scrape\\_%%' AND NOT is_paused")
        return [r[0] for r in rows]
