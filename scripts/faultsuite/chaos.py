"""The chaos runs' faults (scripts/bench_soak.py, scripts/bench_chaos.py): drawn with a seeded random
generator, one every few minutes, each injected on the running stack, undone by itself, and
CONFIRMED: each record says whether the fault was seen to happen (a killed pid gone and its port
refusing, a paused process in state ``T``, the site's probe answered 503 or slowly, ...) and what
was seen. A fault that could not be injected or confirmed is ``confirmed=False``: it did not count.

Unlike the fault suite's batches, nothing waits for a batch here: the stack runs its real load
while the faults come, and the history is checked at the end. The primitives are the suite's own
(:class:`faultsuite.components.Components`); a crash's evidence is :mod:`.crash`, a pause is
:mod:`.pause`, the upgrade :mod:`.chaos_upgrade`. ``overlap`` runs two other faults at once.
"""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

from dgb_dev import stack
from dgb_dev.mirror.server import PROBE_HEADER

from . import chaos_upgrade, crash, pause
from .airflow_tasks import running_task
from .catalogue import STAGE_DAGS
from .chaos_catalogue import (
    CHAOS,
    KILL_TARGETS,
    NOT_OVERLAPPED,
    OUTAGES,
    PAUSE_S,
    PAUSE_TARGETS,
    PORTS,
    PROBE_PATH,
    SITE_FAULTS,
    SOAK_FAULTS,
    TARGET,
    Injected,
    Outcome,
)
from .components import Components
from .context import Context
from .plumbing import log, wait_for

__all__ = ["CHAOS", "KILL_TARGETS", "SOAK_FAULTS", "Chaos", "Injected"]


class Chaos:
    """Draws and injects the faults on the stack of ``ctx`` (its settings: the scratch names of
    bench_realtime). ``faults``: the kinds drawn (default every one of CHAOS); ``deck``: each kind
    once, in a seeded order, before any comes again (a run of n faults meets n kinds, up to all)."""

    def __init__(
        self,
        ctx: Context,
        seed: int,
        site_base: str,
        scale: float = 1.0,
        faults: tuple[str, ...] = (),
        deck: bool = False,
    ):
        self.ctx = ctx
        self.rng = random.Random(seed)
        self.components = Components(ctx)
        self.site = site_base
        self.scale = scale  # outage and pause lengths times this (a short smoke run: < 1)
        self.faults = sorted(faults or CHAOS)
        unknown = set(self.faults) - set(CHAOS)
        if unknown:
            raise ValueError(f"unknown chaos faults {sorted(unknown)}")
        self.deck = deck
        self._hand: list[str] = []  # the deck's kinds not drawn yet

    def draw(self) -> str:
        if not self.deck:
            return self.rng.choice(self.faults)
        if not self._hand:
            self._hand = self.rng.sample(self.faults, len(self.faults))
        return self._hand.pop()

    def next_gap_s(self, every_s: float) -> float:
        """Seconds until the next fault: ``every_s`` +- 20%, from the seeded generator."""
        return every_s * self.rng.uniform(0.8, 1.2)

    def plan(self, fault: str) -> dict:
        """What a fault draws before it starts (the overlap's two faults, a pause's length), all
        from the seeded generator and in this thread, so a seed replays the same run."""
        if fault in PAUSE_TARGETS:
            return {"hold_s": self.rng.uniform(*PAUSE_S) * self.scale}
        if fault == "overlap":
            pool = [f for f in self.faults if f not in NOT_OVERLAPPED]
            if len({TARGET[f] for f in pool}) < 2:
                pool = sorted(f for f in CHAOS if f not in NOT_OVERLAPPED)
            first = self.rng.choice(pool)
            second = self.rng.choice([f for f in pool if TARGET[f] != TARGET[first]])
            return {"parts": [(first, self.plan(first)), (second, self.plan(second))]}
        return {}

    def inject(self, fault: str) -> Injected:
        plan = self.plan(fault)
        with pause.thaw_on_exit():  # no process is left frozen, whatever happens
            try:
                rec = self._overlap(plan["parts"]) if fault == "overlap" else self._run(fault, plan)
            finally:
                for name in list(self.components.stopped):
                    self.components.start_again(name)
                self.supervise()
        rec.ended = datetime.now(UTC).isoformat()
        rec.ended_mono = time.monotonic()
        return rec

    def _run(self, fault: str, plan: dict) -> Injected:
        """One fault, recorded with its confirmation (an error is recorded, never raised)."""
        what, hold = CHAOS[fault]
        hold *= self.scale if fault in OUTAGES or fault in SITE_FAULTS else 1
        rec = Injected(fault, what, datetime.now(UTC).isoformat(), started_mono=time.monotonic())
        log(f"chaos: {fault}: {what}")
        try:
            out = self._inject(fault, hold, plan)
            rec.detail, rec.confirmed, rec.confirmation = out.detail, out.confirmed, out.confirmation
        except Exception as exc:
            rec.detail = f"inject_error={type(exc).__name__}: {str(exc)[:200]}"
            rec.confirmed = False
            rec.confirmation = rec.confirmation or "not confirmed: the injection failed"
            log(f"chaos: {fault}: {rec.detail}")
        rec.ended = datetime.now(UTC).isoformat()
        rec.ended_mono = time.monotonic()
        log(f"chaos: {fault}: {'confirmed' if rec.confirmed else 'NOT confirmed'}: {rec.confirmation}")
        return rec

    def _overlap(self, parts: list[tuple[str, dict]]) -> Injected:
        """Both faults started together (a barrier), each in its own thread and record; the overlap
        is confirmed when both are and their spans overlapped."""
        names = " + ".join(f for f, _ in parts)
        rec = Injected("overlap", f"{CHAOS['overlap'][0]}: {names}", datetime.now(UTC).isoformat())
        rec.started_mono = time.monotonic()
        barrier = threading.Barrier(len(parts))
        recs: list[Injected | None] = [None] * len(parts)

        def one(i: int, fault: str, plan: dict) -> None:
            try:
                barrier.wait(timeout=30)
            except threading.BrokenBarrierError:
                pass
            recs[i] = self._run(fault, plan)

        threads = [
            threading.Thread(target=one, args=(i, f, p), name=f"chaos-{f}", daemon=True)
            for i, (f, p) in enumerate(parts)
        ]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(timeout=1.0)  # a short join: Ctrl-C reaches this thread
        rec.parts = [r for r in recs if r is not None]
        both = len(rec.parts) == len(parts)
        overlap_s = (
            min(r.ended_mono for r in rec.parts) - max(r.started_mono for r in rec.parts) if both else 0.0
        )
        rec.detail = names
        rec.confirmed = both and all(r.confirmed for r in rec.parts) and overlap_s > 0
        rec.confirmation = (
            "; ".join(f"{r.fault}: {'confirmed' if r.confirmed else 'NOT confirmed'}" for r in rec.parts)
            + f"; together for {overlap_s:.1f}s"
        )
        return rec

    def _inject(self, fault: str, hold: float, plan: dict) -> Outcome:
        c, s = self.components, self.ctx.s
        if fault in KILL_TARGETS:
            name = KILL_TARGETS[fault]
            pid = c.kill9(name)
            if pid is None:
                return Outcome("not running", False, f"{name} was not running: nothing killed")
            try:
                ok, seen = crash.confirm_dead(pid, self._port(name))
                time.sleep(hold)
            finally:
                c.start_again(name)
            return Outcome(f"pid={pid}", ok, seen)
        if fault in PAUSE_TARGETS:
            return self._pause(fault, plan["hold_s"])
        if fault == "kill_task":
            pid, task = self._running_task()
            crash.kill9(pid)
            ok, seen = crash.confirm_dead(pid, None, within_s=10)
            return Outcome(f"killed={task}", ok, f"{task}: {seen}")
        if fault in ("kill_postgres", "restart_postgres"):
            return self._postgres(fault == "kill_postgres")
        if fault in ("restart_typesense", "restart_emulator"):
            name = "typesense" if fault == "restart_typesense" else "pubsub"
            pid = stack.Proc(name, s).pid()
            try:
                c.stop(name)
                ok, seen = crash.confirm_dead(pid, self._port(name))
            finally:
                c.start_again(name)
            return Outcome(f"pid={pid} new={stack.Proc(name, s).pid()}", ok and pid is not None, seen)
        if fault in OUTAGES:
            return self._outage(OUTAGES[fault], hold)
        if fault in SITE_FAULTS:
            return self._site(fault, hold)
        if fault == "upgrade":
            ok, seen = chaos_upgrade.run(self.ctx)
            return Outcome("", ok, seen)
        raise ValueError(f"unknown chaos fault {fault!r}")

    def _port(self, name: str) -> int | None:
        return getattr(self.ctx.s, PORTS[name]) if name in PORTS else None

    def _running_task(self) -> tuple[int, str]:
        since = datetime.now(UTC) - timedelta(minutes=30)
        dags = (*STAGE_DAGS, *self._scrape_dags())
        return wait_for(lambda: running_task(self.ctx.af, dags, since), 120, "a running task", every=0.5)

    def _pause(self, fault: str, hold_s: float) -> Outcome:
        name = PAUSE_TARGETS[fault]
        if name is None:
            pid, what = self._running_task()
        else:
            pid, what = stack.Proc(name, self.ctx.s).pid(), name
        if pid is None:
            return Outcome("not running", False, f"{what} was not running: nothing paused")
        ok, seen = pause.freeze(
            pid, hold_s, group=name is not None, on_stopped=lambda ok, seen: log(f"chaos: {fault}: {seen}")
        )
        return Outcome(f"{what} pid={pid} held_s={hold_s:.0f}", ok, seen)

    def _postgres(self, crashed: bool) -> Outcome:
        """kill -9 of the postmaster (its backends notice and exit; the next start recovers from
        the WAL), or a clean ``pg_ctlcluster restart``; either way started again by the stack."""
        c, s = self.components, self.ctx.s
        pg = stack.component(s, "postgres")
        ver, name = stack.Postgres(s)._cluster()
        data = crash.cluster_data_dir(ver, name)
        pid = crash.postmaster_pid(data)
        if pid is None and crashed:
            return Outcome("", False, f"no live postmaster in {data}/postmaster.pid: nothing killed")
        c.stopped.add("postgres")
        ok, seen = True, ""
        try:
            if crashed and pid is not None:
                crash.kill9(pid)
                ok, seen = crash.confirm_dead(pid, s.pg_port)
            else:
                subprocess.run(["pg_ctlcluster", ver, name, "restart"], capture_output=True, timeout=120)
        finally:
            # orphaned backends hold the shared memory until each notices: the start is retried
            wait_for(pg.up, 120, "postgres started again", every=2)
            c.stopped.discard("postgres")
        new = crash.postmaster_pid(data)
        if not crashed:
            ok = pid is not None and new is not None and new != pid
            seen = f"postmaster pid {pid} -> {new}"
        return Outcome(f"postmaster={pid} new={new}", ok, f"{seen}; started again as pid {new}")

    def _outage(self, name: str, hold: float) -> Outcome:
        c = self.components
        pid = stack.Proc(name, self.ctx.s).pid()
        c.holding = True
        reopened = 0
        try:
            c.stop(name)
            ok, seen = (
                crash.confirm_dead(pid, self._port(name)) if pid else (False, f"{name} was not running")
            )
            end = time.monotonic() + hold
            while time.monotonic() < end:
                if c.healthy(name):  # something else started it: the outage goes on
                    reopened += 1
                    c.stop(name)
                time.sleep(2)
        finally:
            c.holding = False
            c.start_again(name)
        return Outcome(f"held_s={hold:.0f}", ok, f"{seen}; found up and stopped again {reopened}x meanwhile")

    def _site(self, fault: str, hold: float) -> Outcome:
        rule = SITE_FAULTS[fault]
        end = time.monotonic() + hold
        self._site_fault(rule)
        try:
            try:
                status, took = self._probe()
            except OSError as exc:  # the fault is held all the same
                status, took = f"{type(exc).__name__}: {str(exc)[:100]}", 0.0
            # slow: the server sleeps delay/chunks before each of the chunks pieces of a page
            slow_enough = isinstance(status, int) and took >= rule.get("delay", 0) * 0.95
            ok = status == 503 if fault == "site_503" else slow_enough
            seen = f"probe GET {PROBE_PATH}: {status} in {took:.1f}s"
            time.sleep(max(0.0, end - time.monotonic()))
        finally:
            self._site_fault({"clear": True})
        return Outcome(f"held_s={hold:.0f}", ok, seen)

    def _probe(self) -> tuple[int, float]:
        """One page of the site (loopback), marked as a probe (not counted in its request budget)."""
        req = urllib.request.Request(self.site + PROBE_PATH, headers={PROBE_HEADER: "1"})
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=90) as resp:
                resp.read()
                status = resp.status
        except urllib.error.HTTPError as exc:
            exc.read()
            status = exc.code
        return status, time.monotonic() - t0

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
