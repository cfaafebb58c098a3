"""The watchdog: a process of its own (``python -m dgb_dev.stack watchdog``, started by `up`,
stopped first by `down`) that restarts the Airflow components that exit."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from dgb.config import Settings
from dgb_dev.stack.airflow import AIRFLOW_PARTS, AirflowPart
from dgb_dev.stack.component import ManagedProcess
from dgb_dev.stack.process import Proc, StackError, log


@dataclass
class _Watched:
    """What the watchdog knows of one component: restarts so far, the current streak of quick
    exits (the backoff), when it may restart next."""

    restarts: int = 0
    streak: int = 0
    last_restart: float | None = None  # monotonic
    due: float | None = None  # monotonic time of the next restart, while it is down
    last_exit_at: str | None = None  # wall clock, for `status`
    last_restart_at: str | None = None
    delays: list[float] | None = None  # the backoff delays used, in order


class Watchdog:
    """Restart the Airflow components of this checkout that exit (the triggerer exits when
    PostgreSQL restarts; nothing else would bring it back locally), with exponential backoff.

    A component is watched when its pid file exists (it was started by this checkout and not
    stopped by `down`, which removes the pid file after stopping it) and its process is gone.
    The first restart waits ``initial`` seconds, each quick exit after it doubles the wait up to
    ``maximum``; a component that stayed up ``stable_after`` seconds starts over at ``initial``.
    Each exit and restart is one log line; restart counts go to ``<state>/run/watchdog.json``,
    which `status` shows.
    """

    def __init__(
        self,
        settings: Settings,
        components: list[ManagedProcess] | None = None,
        *,
        poll: float = 2.0,
        initial: float = 2.0,
        maximum: float = 60.0,
        stable_after: float = 120.0,
    ):
        self.s = settings
        self.components = components if components is not None else watched_components(settings)
        self.poll, self.initial, self.maximum, self.stable_after = poll, initial, maximum, stable_after
        self.state = {c.name: _Watched() for c in self.components}

    @property
    def state_file(self) -> Path:
        return watchdog_state_file(self.s)

    def delay(self, streak: int) -> float:
        return min(self.initial * (2 ** max(streak, 0)), self.maximum)

    def check_once(self, now: float | None = None) -> list[str]:
        """One pass: schedule a restart for each watched component that exited, restart those
        that are due. Returns the names restarted in this pass."""
        now = time.monotonic() if now is None else now
        restarted = []
        for comp in self.components:
            w = self.state[comp.name]
            proc = comp.proc
            if proc.alive():
                if w.last_restart is not None and now - w.last_restart >= self.stable_after:
                    w.streak = 0
                w.due = None
                continue
            if not proc.pid_file.exists():  # stopped on purpose (`down`), or never ours
                w.due = None
                continue
            if w.due is None:
                wait = self.delay(w.streak)
                w.due = now + wait
                w.last_exit_at = time.strftime("%Y-%m-%dT%H:%M:%S")
                w.delays = [*(w.delays or []), wait]
                log(f"watchdog: {comp.name} exited; restarting in {wait:.0f}s (restart {w.restarts + 1})")
            if now >= w.due:
                try:
                    pid = proc.spawn(comp.argv(), comp.env(), nice=comp.nice())
                except (OSError, StackError) as exc:
                    w.due, w.streak = None, w.streak + 1
                    log(f"watchdog: {comp.name} could not be started: {exc}")
                    continue
                w.restarts, w.streak, w.due = w.restarts + 1, w.streak + 1, None
                w.last_restart = now
                w.last_restart_at = time.strftime("%Y-%m-%dT%H:%M:%S")
                restarted.append(comp.name)
                log(f"watchdog: {comp.name} restarted (pid {pid}, restart {w.restarts})")
        self._write()
        return restarted

    def _write(self) -> None:
        data = {
            name: {
                "restarts": w.restarts,
                "last_exit": w.last_exit_at,
                "last_restart": w.last_restart_at,
                "waiting": w.due is not None,
            }
            for name, w in self.state.items()
        }
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        tmp.replace(self.state_file)

    def run(self, stop: threading.Event | None = None) -> None:
        stop = stop or threading.Event()
        log(f"watchdog: watching {', '.join(c.name for c in self.components)} every {self.poll:g}s")
        while not stop.is_set():
            self.check_once()
            stop.wait(self.poll)
        log("watchdog: stopped")


def watched_components(settings: Settings) -> list[ManagedProcess]:
    """The Airflow components `up` starts (every part in AIRFLOW_PARTS, workers included)."""
    return [AirflowPart(settings, part) for part in AIRFLOW_PARTS]


def watchdog_state_file(settings: Settings) -> Path:
    return settings.state_dir / "run" / "watchdog.json"


def watchdog_proc(settings: Settings) -> Proc:
    return Proc("watchdog", settings)


def start_watchdog(settings: Settings) -> str:
    """The watchdog process (`python -m dgb_dev.stack watchdog`), reused when it runs."""
    proc = watchdog_proc(settings)
    if proc.alive():
        return f"already running (pid {proc.pid()})"
    env = dict(os.environ, DGB_STATE_DIR=str(settings.state_dir))
    pid = proc.spawn([sys.executable, "-m", "dgb_dev.stack", "watchdog"], env)
    return f"started (pid {pid})"


def stop_watchdog(settings: Settings) -> bool:
    """Stop it before the components it watches (or it would restart them)."""
    return watchdog_proc(settings).stop()


def run_watchdog(settings: Settings) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    Watchdog(settings).run(stop)
    return 0


def watchdog_restarts(settings: Settings) -> dict[str, dict]:
    """name -> {restarts, last_exit, last_restart, waiting} as the watchdog last wrote it."""
    try:
        return json.loads(watchdog_state_file(settings).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def print_watchdog_status(settings: Settings) -> None:
    """The watchdog's line and the restarts it made (`make status`)."""
    pid = watchdog_proc(settings).pid()
    print(f"{'watchdog':22s} {'running' if pid else 'stopped':8s} {('pid ' + str(pid)) if pid else ''}")
    for name, info in sorted(watchdog_restarts(settings).items()):
        if info.get("restarts") or info.get("waiting"):
            pending = " (restart pending)" if info.get("waiting") else ""
            print(
                f"  {name}: {info.get('restarts', 0)} restart(s), last exit {info.get('last_exit')}, "
                f"last restart {info.get('last_restart')}{pending}"
            )
