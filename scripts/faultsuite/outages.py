"""The long outages: a dependency (Typesense, the model service, the Pub/Sub emulator) stopped, or
the Bedrock fake throttling every call, while a batch is in flight, and held down for the outage's
length (``--quick``: and until the batch spent a stage task's retries), watching for healthy
articles dead-lettered meanwhile."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from .articles import Articles
from .budget import RetryBudget
from .catalogue import QUICK_OUTAGE_CAP_S, SPENDS_RETRIES, Batch
from .completion import Completion
from .components import Components
from .context import Context
from .deadletters import DeadLetterWatch
from .plumbing import log

SPENT_POLL_S = 2.0  # --quick, past an outage's floor: how often the retries-spent check runs
# --quick, faults of SPENDS_RETRIES: the outage ends once the batch has spent a stage task's retries
# or the breaker holds its work (the evidence, checked from this floor on), not at the planned
# length: that is only how long the retry budget would take at ~20 s a try
ADAPTIVE_FLOOR_S = 60.0
DOWN_POLL_S = 2.0  # how often a held outage checks that its component is still down
OBSERVE_EVERY_S = 10.0  # how often a held outage looks for healthy articles dead-lettered


@dataclass
class Outages:
    ctx: Context
    components: Components
    articles: Articles
    completion: Completion
    dead_letters: DeadLetterWatch
    budget: RetryBudget = field(init=False)

    def __post_init__(self):
        self.budget = RetryBudget(self.ctx)

    def hold(self, batch: Batch, seconds: float, component: str | None = None) -> None:
        """Keep the dependency down for ``seconds`` (--quick, faults of SPENDS_RETRIES: at least
        ADAPTIVE_FLOOR_S and then until the batch spent a stage task's retries or the breaker holds
        its work, at most QUICK_OUTAGE_CAP_S in all), watching
        for healthy articles dead-lettered. ``component``: the stopped one, checked every
        DOWN_POLL_S and stopped again if something else started it meanwhile (on a shared machine,
        a test session's fixtures start Typesense or the emulator when they find it down: the
        outage then ended unseen, the batch went through, and no retry was ever spent)."""
        self.components.holding = True
        adaptive = self.ctx.quick and not self.ctx.args.outage_s and batch.fault in SPENDS_RETRIES
        restarted_elsewhere = 0
        try:
            t0 = time.monotonic()
            since = datetime.now(UTC)
            end = t0 + (min(seconds, ADAPTIVE_FLOOR_S) if adaptive else seconds)
            cap = t0 + max(seconds, QUICK_OUTAGE_CAP_S)
            last_log = next_observe = 0.0
            while True:
                now = time.monotonic()
                if now >= next_observe or now >= end:
                    self.dead_letters.observe()
                    next_observe = now + OBSERVE_EVERY_S
                if component and self.components.healthy(component):
                    restarted_elsewhere += 1
                    log(f"{batch.fault}: {component} was started by something else; stopping it again")
                    self.components.stop(component)
                if now >= cap:
                    if adaptive:
                        batch.note += " retries_not_spent_by_cap"
                    break
                if now >= end:
                    try:
                        spent = not adaptive or self.budget.retries_spent(batch, since)
                    except Exception as exc:
                        log(f"{batch.fault}: retries spent? {exc}")
                        spent = False
                    if spent:
                        break
                if now - last_log >= 60:
                    left = max(0.0, end - now)
                    more = " (then until the batch spent its stage retries)" if adaptive else ""
                    log(f"{batch.fault}: {left:.0f}s of outage left{more}")
                    last_log = now
                # until the floor: the component checked every DOWN_POLL_S (dead letters every
                # OBSERVE_EVERY_S), else every OBSERVE_EVERY_S; past it (adaptive: the only way to
                # be still here) whether the retries are spent, and dead letters, every SPENT_POLL_S
                poll = (DOWN_POLL_S if component else OBSERVE_EVERY_S) if now < end else SPENT_POLL_S
                time.sleep(min(poll, max(1.0, (end if now < end else cap) - now)))
        finally:
            self.components.holding = False
            batch.note = batch.note.replace(
                f"outage_s={seconds:.0f}", f"outage_s={time.monotonic() - t0:.0f}"
            )
            if restarted_elsewhere:
                batch.add_note(f"restarted_elsewhere={restarted_elsewhere}")

    def long_outage(self, batch: Batch) -> None:
        f = batch.fault
        seconds = self.budget.outage_s(batch)
        batch.add_note(f"outage_s={seconds:.0f}")
        if f == "bedrock_throttle":
            # throttled from the moment the batch is on its way (scrape -> enrich), so no article
            # is classified before the outage starts
            self.completion.note_pending(batch)
            batch.fault_at = time.monotonic()
            self.ctx.bedrock.throttle(max(seconds, QUICK_OUTAGE_CAP_S) + 60)  # switched off below
            log(f"bedrock fake throttling every call (429 ThrottlingException) for {seconds:.0f}s")
            try:
                self.hold(batch, seconds)
            finally:
                self.ctx.bedrock.throttle(None)
            log(f"bedrock fake answering again ({self.ctx.bedrock.throttled} calls throttled)")
            return
        name = {"typesense_down": "typesense", "model_down": "model", "emulator_down": "pubsub"}[f]
        if name == "typesense":
            # Typesense goes down before the batch's events are out: a small batch on an idle
            # stack is otherwise through the index stage within seconds of its scrape, before the
            # outage begins, and the outage tests nothing (seen in CI: a batch of 4 complete while
            # the outage ran to its 300 s cap, no try ever failed). Only the index stage calls it.
            batch.fault_at = time.monotonic()
            self.components.stop(name)
            self.articles.await_in_flight(batch)
            self.completion.note_pending(batch)
        else:
            # the model service and the emulator go down once the batch's events are out, so the
            # outage meets them between the stages (the model service stopped earlier would fail
            # the enrich stage's whole tries, each minutes long, instead of the embed stage's)
            self.articles.await_in_flight(batch)
            self.completion.note_pending(batch)
            batch.fault_at = time.monotonic()
            self.components.stop(name)
        adaptive = self.ctx.quick and not self.ctx.args.outage_s and f in SPENDS_RETRIES
        log(
            f"{name} stopped until the batch spent its stage retries or the breaker holds it"
            f" (at least {min(seconds, ADAPTIVE_FLOOR_S):.0f}s)"
            if adaptive
            else f"{name} stopped for {seconds:.0f}s"
        )
        self.hold(batch, seconds, component=name)
        self.components.start_again(name)
