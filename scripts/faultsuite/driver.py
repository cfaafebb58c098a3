"""The driver: one fault at a time, a batch published, its scrape triggered, the fault injected,
then watched until the batch is complete (reconciling, supervising, collecting dead letters); a
drain at the end, the report, and the stack restored whatever happened."""

from __future__ import annotations

import math
import time

from .articles import Articles
from .catalogue import FAULTS, RECOVERY_LIMIT_S, Batch
from .completion import Completion
from .components import Components
from .context import Context
from .deadletters import DeadLetterWatch
from .duplicator import Duplicator
from .injectors import Injector
from .outages import Outages
from .plumbing import log
from .reconciler import Reconciler
from .report import Report
from .scheduler_env import SchedulerEnv
from .takedown import Takedown
from .upgrade import Upgrade

# articles in all (--articles overrides), the cap of a short fault's phase, the final drain
ARTICLES = {"quick": 44, "full": 500}
PHASE_CAP_S = {"quick": 100, "full": 360}
DRAIN_S = {"quick": 240, "full": 900}
MONITOR_EVERY_S = 2  # the batches' completeness is checked this often
SUPERVISE_EVERY_S = 10  # dead letters collected and components supervised this often


class Run:
    def __init__(self, args):
        self.ctx = ctx = Context.create(args)
        self.mode = "quick" if ctx.quick else "full"
        self.articles = Articles(ctx)
        self.components = Components(ctx)
        self.completion = Completion(ctx, self.articles)
        self.dead_letters = DeadLetterWatch(ctx, self.articles)
        self.duplicator = Duplicator(ctx, self.articles)
        self.components.pubsub_callers.append(self.duplicator)
        self.reconciler = Reconciler(ctx)
        self.scheduler_env = SchedulerEnv(ctx)
        outages = Outages(ctx, self.components, self.articles, self.completion, self.dead_letters)
        self.upgrade = Upgrade(ctx, self.articles, self.completion, self.duplicator)
        self.injector = Injector(ctx, self.components, self.articles, self.completion, outages, self.upgrade)
        self.takedown = Takedown(ctx, self.articles)
        self.agencies: list[str] = []  # the agencies batches may go to, in order of preference
        self.unused: list[str] = []  # of those, the ones no batch used yet

    @property
    def batches(self) -> list[Batch]:
        return self.articles.batches

    def report(self) -> int:
        return Report(
            self.ctx, self.articles, self.completion, self.dead_letters, self.duplicator, self.reconciler
        ).write()

    # -- phases --------------------------------------------------------------------------

    def monitor_until(self, deadline: float, stop_when) -> None:
        next_dlq = 0.0
        while time.monotonic() < deadline and not stop_when():
            self.completion.check_batches()
            now = time.monotonic()
            if self.reconciler.due(self.batches, now):
                self.reconciler.reconcile_now()
            if now >= next_dlq:
                self.dead_letters.collect()
                self.dead_letters.observe()
                # a process supervisor's job (systemd, Kubernetes): a component that crashed
                # because of the fault (the triggerer exits when PostgreSQL restarts) is started
                fixed = self.components.supervise()
                if fixed and self.batches:
                    self.batches[-1].add_note("supervisor_restarted=" + ",".join(fixed))
                next_dlq = now + SUPERVISE_EVERY_S
            if self.components.stopped:
                for name in list(self.components.stopped):
                    log(f"{name} still stopped: starting it")
                    self.components.start_again(name)
            if stop_when():  # the batch just completed: no idle turn before the next phase
                break
            time.sleep(MONITOR_EVERY_S)

    def run(self) -> int:
        ctx = self.ctx
        faults = [f for f in FAULTS if not ctx.args.only or f in ctx.args.only]
        total = ctx.args.articles or ARTICLES[self.mode]
        per = [total // len(faults) + (1 if i < total % len(faults) else 0) for i in range(len(faults))]
        if "bedrock_throttle" in faults:
            from dgb_dev.bedrock_fake import FakeBedrockServer

            ctx.bedrock = FakeBedrockServer(0).start()
            log(f"bedrock fake on {ctx.bedrock.url} (DGB_CLASSIFIER={ctx.args.bedrock_classifier})")
        # the faults' settings for the whole run, before the stack starts if it is down (scheduler_env)
        env = self.scheduler_env.run_env(faults)
        self.scheduler_env.adopt(env, self.components.healthy("airflow-scheduler"))
        self.components.ensure_stack()
        self.takedown.purge_previous()
        self.agencies = self.articles.agencies()
        self.unused = list(self.agencies)
        log(
            f"run {ctx.run_id}: {total} articles over {len(faults)} faults {per}, each batch on an agency"
            f" of {self.agencies[: len(faults) + 2]}... (first one whose scheduled scrape is queued),"
            " poison ~5%, every event delivered 3x"
        )
        self.duplicator.start()
        start = 0
        for i, fault in enumerate(faults):
            batch = Batch(fault, "", [])  # its agency: next_agency, right before it is published
            self.inject_phase(batch, per[i], start)
            start += per[i]
            cap = RECOVERY_LIMIT_S + 30 if batch.long else PHASE_CAP_S[self.mode]
            self.monitor_until(time.monotonic() + cap, lambda b=batch: b.done_at is not None)
            if fault == "upgrade":
                self.upgrade.check(batch)
                self.upgrade.revert()
        drain = DRAIN_S[self.mode]
        log(f"all faults injected; waiting up to {drain}s for every batch")
        self.monitor_until(time.monotonic() + drain, lambda: all(b.done_at is not None for b in self.batches))
        self.dead_letters.await_poison(60)
        return self.report()

    def next_agency(self) -> str:
        """An agency no batch used yet (all used: start over): the first whose scheduled scrape run
        is queued and not started, else the first in :meth:`Articles.agencies`' order. A fresh
        stack queues one run per scrape DAG at once (:meth:`Articles.first_queued`), and a manual
        run waits behind its DAG's scheduled run, and then behind every scheduled run, for a
        slot of the scrape pool: on the agency whose run is next, the batch is scraped by that
        run as soon as its turn comes (the first batch of a fresh stack: in the first wave of
        them rather than after the whole wave)."""
        if not self.unused:
            self.unused = list(self.agencies)
        agency = self.articles.first_queued(self.unused) or self.unused[0]
        self.unused.remove(agency)
        return agency

    def inject_phase(self, batch: Batch, n: int, start: int) -> None:
        """The batch's articles published and scraped, its fault injected, the poison sent; whatever
        the fault stopped is started again (the faults' settings are the run's: :meth:`run`)."""
        fault = batch.fault
        if fault in ("restart_emulator", "emulator_down"):
            self.dead_letters.await_poison(60)  # dead-letter copies on the emulator would go with it
        batch.agency = self.next_agency()
        self.articles.publish(batch, n, start)
        self.batches.append(batch)
        log(f"{fault}: published {len(batch.titles)} articles on {batch.agency}; triggering its scrape")
        self.articles.trigger_scrape(batch)
        try:
            self.injector.inject(batch)
        except Exception as exc:
            batch.note = f"inject_error={type(exc).__name__}"
            batch.fault_end = batch.fault_end or time.monotonic()
            log(f"{fault}: injection failed: {exc}")
        for name in list(self.components.stopped):
            self.components.start_again(name)
        # ~5% poison (of the batch's 3 events per article), sent once the fault is over: the
        # emulator restart would otherwise swallow some of them before anyone saw them
        self.dead_letters.send_poison(max(1, math.ceil(0.05 * 3 * len(batch.titles))))
        fixed = self.components.supervise()
        if fixed:
            batch.add_note("supervisor_restarted=" + ",".join(fixed))

    # -- cleanup ---------------------------------------------------------------------------

    def cleanup(self) -> None:
        ctx = self.ctx
        self.duplicator.stop()
        self.components.holding = False
        try:
            self.upgrade.revert()
        except Exception as exc:
            log(f"cleanup: reverting the upgrade probe: {exc}")
        if ctx.bedrock is not None:
            ctx.bedrock.throttle(None)
        try:
            self.scheduler_env.apply({})  # the scheduler back on the stack's own settings
        except Exception as exc:
            log(f"cleanup: restoring the scheduler's settings: {exc}")
        for name in list(self.components.stopped):
            try:
                log(f"cleanup: starting {name} again")
                self.components.start_again(name)
            except Exception as exc:
                log(f"cleanup: {name}: {exc}")
        try:
            self.components.supervise()
        except Exception as exc:
            log(f"cleanup: supervisor: {exc}")
        if ctx.args.keep:
            log(f"--keep: the run's articles stay (titles contain {ctx.tag!r})")
        else:
            self.takedown.remove_articles()
        if ctx.bedrock is not None:
            ctx.bedrock.stop()
        ctx.db.close()
        ctx.af.close()
