"""RecyclingLocalExecutor (dgb_airflow.executors.recycling): real worker processes forked as
LocalExecutor forks them, each running one workload and ending; the executor forks workers only for
queued workloads no idle worker will take, and a shutdown still ends the waiting ones."""

from __future__ import annotations

import ctypes
import multiprocessing
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
    taken = multiprocessing.RawValue(ctypes.c_bool, False)
    one = OneWorkload(q, taken)
    assert not taken.value
    assert one.get() == "first" and taken.value
    assert one.get() is None and one.get() is None
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
        assert executor.workers == {}  # nothing queued: no worker forked, none waiting
        pids = []
        for key in ("a", "b", "c"):  # each finds the last worker ended: one is forked for it
            _submit(executor, Workload(key))
            assert len(executor.workers) <= 2
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


def test_workers_are_forked_only_for_queued_workloads(monkeypatch):
    from airflow.executors.base_executor import BaseExecutor

    release = multiprocessing.Event()

    def run_workload(workload, **kwargs):  # in the worker: hold the workload until released
        release.wait(60)

    monkeypatch.setattr(BaseExecutor, "run_workload", staticmethod(run_workload))
    executor = RecyclingLocalExecutor(parallelism=5)
    executor.start()
    try:
        for key in ("a", "b"):  # two workloads queued: two workers, not five
            executor.activity_queue.put(Workload(key))
        with executor._unread_messages:
            executor._unread_messages.value += 2
        executor._check_workers()
        assert len(executor.workers) == 2
        deadline = time.monotonic() + 30
        while executor.idle_workers():  # both read their workload
            assert time.monotonic() < deadline, "the workers did not take their workloads"
            time.sleep(0.05)
        executor._check_workers()  # nothing waiting in the queue: nothing forked
        assert len(executor.workers) == 2
        _submit(executor, Workload("c"))  # both busy: one more for c
        assert len(executor.workers) == 3
    finally:
        release.set()
        results = sorted(_result(executor)[0] for _ in range(3))
        pids = list(executor.workers)
        executor.end()
    assert results == ["a", "b", "c"]
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)


def test_an_idle_worker_is_given_the_next_workload_no_new_fork(monkeypatch, tmp_path):
    from airflow.executors.base_executor import BaseExecutor

    monkeypatch.setattr(BaseExecutor, "run_workload", staticmethod(lambda workload, **kwargs: None))
    executor = RecyclingLocalExecutor(parallelism=3)
    executor.start()
    try:
        executor._spawn_worker()  # a worker waiting (as after a shutdown pill was not needed)
        (idle,) = executor.workers
        assert executor.idle_workers() == 1
        _submit(executor, Workload("a"))
        assert list(executor.workers) == [idle]  # the waiting worker takes it
        assert _result(executor) == ("a", "success", None)
        assert _ended(executor, idle)
        assert executor.idle_workers() == 0
    finally:
        executor.end()
