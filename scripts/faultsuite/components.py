"""The outage helpers: the stack's components as the run stops, kills and starts them, and the
process supervisor that starts any component found down (unless an outage is being held). The
suite's own Pub/Sub callers are paused while it has the emulator stopped (see
:meth:`faultsuite.duplicator.Duplicator.pause`)."""

from __future__ import annotations

import os
import signal
import time
from typing import Protocol

from dgb import topology
from dgb_dev import stack

from .context import Context
from .plumbing import log, wait_for


class Pausable(Protocol):
    def pause(self) -> bool: ...

    def resume(self) -> None: ...


def process_alive(comp) -> bool:
    """Whether the component's own process is alive (False when it has no process of ours to
    look at, as for PostgreSQL's cluster: then only its health counts)."""
    proc = getattr(comp, "proc", None)
    try:
        return bool(proc is not None and proc.alive())
    except Exception:
        return False


class Components:
    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.stopped: set[str] = set()  # components we stopped and must start again
        self.restarted_by_supervisor: list[str] = []
        self.holding = False  # during a long outage: the supervisor must not "repair" it
        self.pubsub_callers: list[Pausable] = []  # paused while the suite has the emulator stopped

    def names(self) -> list[str]:
        return [n for n in stack.SERVICES if stack.available(n)] + [
            f"airflow-{p}" for p in stack.AIRFLOW_PARTS
        ]

    def ensure_stack(self) -> None:
        s = self.ctx.s
        down = [n for n in self.names() if not stack.component(s, n).healthy()]
        if down:
            log(f"stack components down: {down}; starting the stack (python -m dgb_dev.stack up)")
            stack.up(with_airflow=True)
        else:
            log("reusing the running stack; bootstrap (idempotent: migrations, topology, collection)")
            stack.bootstrap(s)
        from dgb.search import schema

        self.ctx.ts = schema.client(s, timeout=10.0)

    def supervise(self) -> list[str]:
        """Like a process supervisor: start any component that is down (PostgreSQL first).

        A component whose process is alive but does not report healthy (a scheduler whose
        heartbeat is late, a triggerer just continued after a pause) is waited for, not started:
        it is not counted as restarted. Returns the components it started."""
        fixed = []
        if self.holding:
            return fixed
        for name in self.names():
            comp = stack.component(self.ctx.s, name)
            try:
                healthy = comp.healthy()
            except Exception:
                healthy = False
            if healthy:
                continue
            alive = process_alive(comp)
            if alive:
                log(f"supervisor: {name} runs but does not report healthy; waiting for it")
            else:
                log(f"supervisor: {name} is down; starting it")
            try:
                comp.up()
                if name == "pubsub":
                    topology.apply_to_emulator(self.ctx.s)
                if not alive:
                    fixed.append(name)
            except Exception as exc:
                log(f"supervisor: {name} failed to {'become healthy' if alive else 'start'}: {exc}")
        self.restarted_by_supervisor += fixed
        return fixed

    def healthy(self, name: str) -> bool:
        try:
            return bool(stack.component(self.ctx.s, name).healthy())
        except Exception:
            return False

    def stop(self, name: str) -> None:
        """Stop a component; it is started again by :meth:`start_again` (also on failure)."""
        self.stopped.add(name)
        if name == "pubsub":
            for caller in self.pubsub_callers:
                if not caller.pause():
                    log(f"{type(caller).__name__} still publishing when the emulator stops")
        stack.component(self.ctx.s, name).down()

    def start_again(self, name: str) -> None:
        comp = stack.component(self.ctx.s, name)
        try:
            t0 = time.monotonic()
            comp.up()
            if name == "pubsub":
                topology.apply_to_emulator(self.ctx.s)
                log(f"pubsub emulator up, topology applied, in {time.monotonic() - t0:.1f}s")
        finally:
            self.stopped.discard(name)
            if name == "pubsub":
                for caller in self.pubsub_callers:
                    caller.resume()

    def kill9(self, name: str) -> int | None:
        proc = stack.Proc(name, self.ctx.s)
        pid = proc.pid()
        if pid is None:
            return None
        self.stopped.add(name)
        try:
            os.killpg(pid, signal.SIGKILL)  # started with start_new_session: pgid == pid
        except ProcessLookupError:
            pass
        wait_for(lambda: not stack.group_alive(pid), 20, f"{name} gone", every=0.2)
        return pid
