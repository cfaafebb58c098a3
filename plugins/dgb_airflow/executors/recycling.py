"""RecyclingLocalExecutor: Airflow's LocalExecutor whose worker processes run one workload each.

LocalExecutor forks its worker processes from the scheduler (the collector frozen around the
fork, so they share the scheduler's pages) and keeps each for the scheduler's whole life. A worker
supervises one task at a time, and every task it supervises leaves pages of its own behind: the
supervisor's imports and buffers, the inherited objects whose reference counts it touched, and the
scheduler's pages the scheduler itself has rewritten since the fork, which the worker now holds
alone. On the local stack an idle worker held 20-23 MiB of its own after a day's tasks, five of
them ~110 MiB.

Here a worker ends after its first workload, and LocalExecutor's own bookkeeping replaces it: when
the next workload is queued it reaps the ended workers and forks as many fresh ones (all at once,
the collector frozen) as the pool lacks. A task starts on a worker that was waiting for it, or,
when every worker has ended, on one forked for it (a fork of the scheduler: milliseconds); the
idle pool is made of workers that have run nothing yet. A shutdown's poison pill still ends a
waiting worker, and a worker killed with the scheduler is replaced the same way.

Select it with ``AIRFLOW__CORE__EXECUTOR=dgb_airflow.executors.recycling.RecyclingLocalExecutor``
(the local stack does unless ``DGB_EXECUTOR_RECYCLE=0``).
"""

from __future__ import annotations

from typing import Any

from airflow.executors.local_executor import LocalExecutor


class OneWorkload:
    """The executor's activity queue as one worker reads it: its first item (a workload, or a
    shutdown's ``None``), then ``None``, which ends LocalExecutor's worker loop."""

    def __init__(self, queue: Any):
        self._queue = queue
        self._taken = False

    def get(self) -> Any:
        if self._taken:
            return None
        self._taken = True
        return self._queue.get()


class RecyclingLocalExecutor(LocalExecutor):
    """LocalExecutor whose workers each take one workload from the queue and then end (module doc)."""

    def _spawn_worker(self) -> None:
        # LocalExecutor hands each worker ``self.activity_queue``: this worker gets it wrapped
        queue = self.activity_queue
        self.activity_queue = OneWorkload(queue)
        try:
            super()._spawn_worker()
        finally:
            self.activity_queue = queue
