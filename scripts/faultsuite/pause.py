"""A process frozen (SIGSTOP) for a while, then continued (SIGCONT): a GC pause, a VM or container
frozen by its host. Unlike a crash, the frozen process keeps its connections, locks and leases,
and everyone talking to it waits.

A frozen process must never be left behind: every freeze is registered until its SIGCONT, which is
sent in a ``finally`` (an exception during the hold, Ctrl-C), by :func:`thaw_all` (another thread
giving up, SIGTERM of the run: :func:`thaw_on_exit`), and at interpreter exit (``atexit``).
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .crash import proc_state

_lock = threading.Lock()
_frozen: dict[tuple[int, bool], threading.Event] = {}  # (pid, group) -> its early release


def _signal(pid: int, group: bool, sig: int) -> None:
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def freeze(
    pid: int,
    hold_s: float,
    *,
    group: bool = False,
    on_stopped: Callable[[bool, str], None] | None = None,
    confirm_within_s: float = 2.0,
) -> tuple[bool, str]:
    """SIGSTOP ``pid`` (``group``: its process group, as a frozen container is), hold ``hold_s``
    seconds, SIGCONT. Confirmed when ``/proc/<pid>/stat`` shows ``T`` (stopped) right after the
    stop. ``on_stopped(confirmed, seen)`` is called once the stop was looked at, before the hold.
    Returns (confirmed, what was seen)."""
    key = (pid, group)
    release = threading.Event()
    with _lock:
        _frozen[key] = release
    t0 = time.monotonic()
    state = None
    try:
        _signal(pid, group, signal.SIGSTOP)
        deadline = time.monotonic() + confirm_within_s
        while True:  # the stop is delivered asynchronously
            state = proc_state(pid)
            if state in ("T", "t", None, "Z") or time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        confirmed = state == "T"
        seen = f"pid {pid}{' (group)' if group else ''} state {state or 'gone'} after SIGSTOP"
        if on_stopped is not None:
            on_stopped(confirmed, seen)
        cut = release.wait(hold_s)
    finally:
        _signal(pid, group, signal.SIGCONT)
        with _lock:
            _frozen.pop(key, None)
    held = time.monotonic() - t0
    seen += f", held {held:.0f}s{' (cut short)' if cut else ''}"
    seen += f", state {proc_state(pid) or 'gone'} after SIGCONT"
    return confirmed, seen


def frozen() -> list[tuple[int, bool]]:
    """The (pid, group) frozen right now."""
    with _lock:
        return list(_frozen)


def thaw_all() -> list[tuple[int, bool]]:
    """SIGCONT every frozen process now and end its hold (its ``freeze`` returns). Idempotent."""
    with _lock:
        items = list(_frozen.items())
    for (pid, group), release in items:
        _signal(pid, group, signal.SIGCONT)
        release.set()
    return [key for key, _ in items]


atexit.register(thaw_all)


@contextmanager
def thaw_on_exit() -> Iterator[None]:
    """Continue every frozen process when the block ends, normally or not; in the main thread,
    SIGTERM meanwhile ends the block with SystemExit (Python's default would end the process
    without running a ``finally``). The earlier SIGTERM handler is put back."""
    previous = None
    main = threading.current_thread() is threading.main_thread()
    if main:

        def _terminate(signum, frame):
            raise SystemExit(128 + signum)

        previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        thaw_all()
        if main:
            signal.signal(signal.SIGTERM, previous)
