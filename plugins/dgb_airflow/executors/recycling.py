"""RecyclingLocalExecutor: Airflow's LocalExecutor whose worker processes run one workload each,
forked when a workload is queued.

LocalExecutor forks its worker processes from the scheduler (the collector frozen around the
fork, so they share the scheduler's pages), as many as ``parallelism`` at once, and keeps each for
the scheduler's whole life. Two things make that pool cost memory while it waits:

* every task a worker supervises leaves pages of its own behind (the supervisor's imports and
  buffers, the inherited objects whose reference counts it touched): an idle worker held 20-23 MiB
  of its own after a day's tasks on the local stack;
* a waiting worker still holds the scheduler's pages as they were at the fork. Each page the
  scheduler rewrites afterwards (its loop, its collector once unfrozen) is copied for the
  scheduler, and the old one is left to the workers: a worker that has run nothing yet grows from
  ~5 MiB of its own to ~25 MiB within minutes, more as it waits.

Here a worker ends after its first workload, and the executor forks workers only for workloads
waiting in the queue that no idle worker will take: with nothing queued no worker is alive, and a
task starts on a worker forked for it (a fork of the scheduler: milliseconds) in the scheduler
loop turn that queued it. A shutdown's poison pill still ends a waiting worker, and a worker
killed with the scheduler is replaced the same way.

Select it with ``AIRFLOW__CORE__EXECUTOR=dgb_airflow.executors.recycling.RecyclingLocalExecutor``
(the local stack does unless ``DGB_EXECUTOR_RECYCLE=0``).
"""

from __future__ import annotations

import ctypes
import multiprocessing
from typing import Any

from airflow.executors.local_executor import LocalExecutor


class OneWorkload:
    """The executor's activity queue as one worker reads it: its first item (a workload, or a
    shutdown's ``None``), then ``None``, which ends LocalExecutor's worker loop. ``taken`` (shared
    memory) is set once the first item is read, so the executor knows the worker is no longer idle."""

    def __init__(self, queue: Any, taken: Any = None):
        self._queue = queue
        self._taken = taken
        self._read = False

    def get(self) -> Any:
        if self._read:
            return None
        self._read = True
        item = self._queue.get()
        if self._taken is not None:
            self._taken.value = True
        return item


class RecyclingLocalExecutor(LocalExecutor):
    """LocalExecutor whose workers each take one workload from the queue and then end, forked only
    for queued workloads (module doc)."""

    def start(self) -> None:
        self._taken: dict[int, Any] = {}  # worker pid -> its "has read its workload" flag
        super().start()  # LocalExecutor forks `parallelism` workers here: none are wanted yet

    def _spawn_worker(self) -> None:
        # LocalExecutor hands each worker ``self.activity_queue``: this worker gets it wrapped
        taken = multiprocessing.RawValue(ctypes.c_bool, False)
        queue = self.activity_queue
        self.activity_queue = OneWorkload(queue, taken)
        try:
            super()._spawn_worker()
        finally:
            self.activity_queue = queue
        self._taken[next(reversed(self.workers))] = taken

    def _spawn_workers_with_gc_freeze(self, spawn_number: int) -> None:
        # LocalExecutor asks for every free slot (parallelism - alive workers); fork only what the
        # queue needs. Read before the idle count: a worker taking its workload between the two
        # reads makes one spare worker at worst, never a workload left without one.
        wanted = self._unread_messages.value - self.idle_workers()
        if wanted > 0:
            super()._spawn_workers_with_gc_freeze(min(spawn_number, wanted))

    def idle_workers(self) -> int:
        """Alive workers that have not read a workload yet (the ended ones are forgotten)."""
        for pid in [pid for pid in self._taken if pid not in self.workers]:
            del self._taken[pid]
        return sum(1 for pid, proc in self.workers.items() if not self._taken[pid].value and proc.is_alive())
