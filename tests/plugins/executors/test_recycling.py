"""RecyclingLocalExecutor (dgb_airflow.executors.recycling): real worker processes forked as
LocalExecutor forks them, each running one workload and ending; the executor forks fresh ones when
work is queued, and a shutdown still ends the waiting ones."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import pytest

from dgb_airflow.executors.recycling import OneWorkload, RecyclingLocalExecutor

pytestmark = pytest.mark.airflow


@dataclass(frozen=True)
class Workload:
    """What LocalExecutor's worker loop reads of a workload."""

    key: str
    display_name: str = "test"
    running_state: str | None = None
    success_state: str = "success"
    failure_state: str = "failed"


def test_one_workload_then_the_end():
    class Queue:
        items = ["first", "second"]

        def get(self):
            return self.items.pop(0)

    q = Queue()
    one = OneWorkload(q)
    assert one.get() == "first" and one.get() is None and one.get() is None
    assert q.items == ["second"]  # the next item is left to another worker
    shutdown = OneWorkload(type("Q", (), {"get": lambda self: None})())
    assert shutdown.get() is None


def _result(executor, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while executor.result_queue.empty():
        assert time.monotonic() < deadline, "no result from the worker"
        time.sleep(0.05)
    return executor.result_queue.get()


def _ended(executor, pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while executor.workers[pid].is_alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _submit(executor, workload: Workload) -> None:
    executor.activity_queue.put(workload)
    with executor._unread_messages:
        executor._unread_messages.value += 1
    executor._check_workers()  # what LocalExecutor does after queueing


def test_each_worker_runs_one_workload_and_is_replaced(monkeypatch, tmp_path):
    from airflow.executors.base_executor import BaseExecutor

    ran = tmp_path / "ran"

    def run_workload(workload, **kwargs):  # in the worker: which process ran what
        with open(ran, "a") as f:
            f.write(f"{workload.key} {os.getpid()}\n")

    monkeypatch.setattr(BaseExecutor, "run_workload", staticmethod(run_workload))
    executor = RecyclingLocalExecutor(parallelism=2)
    executor.start()
    try:
        assert len(executor.workers) == 2
        pids = []
        for key in ("a", "b", "c"):  # c finds the first two workers ended: fresh ones are forked
            _submit(executor, Workload(key))
            assert _result(executor) == (key, "success", None)
            runs = dict(line.split() for line in ran.read_text().splitlines())
            pid = int(runs[key])
            assert _ended(executor, pid)  # ended after its one workload
            pids.append(pid)
        assert len(set(pids)) == 3  # a fresh process for each workload
    finally:
        waiting = list(executor.workers)
        executor.end()  # the shutdown's poison pills end the workers still waiting (and joins them)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in waiting)
