"""Injecting a batch's fault once the batch is in flight: the short faults (kill -9 of the
triggerer, the scheduler, a running task, the model service; Typesense stopped briefly; the
emulator and PostgreSQL restarted), the long outages through :mod:`faultsuite.outages`."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dgb_dev import stack

from .airflow_tasks import running_task
from .articles import Articles
from .catalogue import KILLS, LONG_OUTAGES, STAGE_DAGS, Batch
from .completion import Completion
from .components import Components
from .context import Context
from .outages import Outages
from .plumbing import log, wait_for
from .upgrade import Upgrade


@dataclass
class Injector:
    ctx: Context
    components: Components
    articles: Articles
    completion: Completion
    outages: Outages
    upgrade: Upgrade

    def inject(self, batch: Batch) -> None:
        f = batch.fault
        if f == "kill_task":
            return self.kill_task(batch)
        if f == "upgrade":
            self.upgrade.deploy(batch)
            log(f"{f}: the next version deployed in {batch.fault_end - batch.fault_at:.1f}s")
            return
        if f in LONG_OUTAGES:
            self.outages.long_outage(batch)
            batch.fault_end = time.monotonic()
            log(f"{f}: restored after {batch.fault_end - batch.fault_at:.1f}s")
            return
        self.articles.await_in_flight(batch)
        self.completion.note_pending(batch)
        batch.fault_at = time.monotonic()
        if f in KILLS:
            name, what, down_s = KILLS[f]
            pid = self.components.kill9(name)
            log(f"kill -9 {what} (pid {pid})")
            time.sleep(down_s)
            self.components.start_again(name)
        elif f == "stop_typesense":
            seconds = 15 if self.ctx.quick else 60
            self.components.stop("typesense")
            log(f"typesense stopped for {seconds}s")
            time.sleep(seconds)
            self.components.start_again("typesense")
        elif f == "restart_emulator":
            self.components.stop("pubsub")
            log("pubsub emulator stopped (its messages are gone); starting it, re-applying the topology")
            self.components.start_again("pubsub")
        elif f == "restart_postgres":
            ver, name = stack.Postgres(self.ctx.s)._cluster()
            self.components.stopped.add("postgres")
            log(f"pg_ctlcluster {ver} {name} restart")
            try:
                subprocess.run(
                    ["pg_ctlcluster", ver, name, "restart"], capture_output=True, text=True, timeout=120
                )
            finally:
                wait_for(lambda: stack.component(self.ctx.s, "postgres").healthy(), 60, "postgres back")
                self.components.stopped.discard("postgres")
        batch.fault_end = time.monotonic()
        log(f"{f}: restored after {batch.fault_end - batch.fault_at:.1f}s")

    def kill_task(self, batch: Batch) -> None:
        since = datetime.now(UTC) - timedelta(seconds=5)
        scrape_dag = "scrape_" + batch.agency.replace("-", "_")
        deadline = time.monotonic() + (120 if self.ctx.quick else 400)
        victim = None
        while time.monotonic() < deadline and victim is None:
            try:
                victim = running_task(self.ctx.af, STAGE_DAGS, since)
                if victim is None and time.monotonic() > deadline - 60:
                    victim = running_task(self.ctx.af, (scrape_dag,), since)
            except Exception as exc:
                log(f"kill_task: {exc}")
            if victim is None:
                time.sleep(0.2)
        batch.fault_at = time.monotonic()
        if victim is not None:
            try:
                os.kill(victim[0], signal.SIGKILL)
            except ProcessLookupError:
                victim = (None, victim[1])
        self.completion.note_pending(batch)
        if victim is None:
            batch.note += " no_running_task_found"
            log("kill_task: no running task found to kill")
        else:
            pid, what = victim
            if pid is None:
                batch.note += f" finished_before_kill={what}"
            else:
                batch.note += f" killed={what}"
                log(f"kill -9 running task {what} (pid {pid})")
        batch.fault_end = time.monotonic()
