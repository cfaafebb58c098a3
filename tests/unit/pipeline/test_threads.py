"""dgb.pipeline.threads: inside blas_threads numpy's BLAS runs at the stage setting's number of
threads (DGB_STAGE_BLAS_THREADS, 1 by default), and at the number it had before once outside;
at_lower_priority runs a function in a thread of lower CPU priority, the caller's untouched."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

from dgb.config.pipeline import stage_blas_threads, stage_woken_nice
from dgb.pipeline.threads import at_lower_priority, blas_threads, lower_thread_priority


def thread_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def numpy_blas_threads() -> list[int]:
    import threadpoolctl

    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]


def test_a_stage_runs_numpy_on_the_settings_blas_threads_and_puts_them_back(monkeypatch):
    pytest.importorskip("threadpoolctl")
    np.ones((2, 2)) @ np.ones((2, 2))  # numpy's BLAS loaded
    before = numpy_blas_threads()
    assert before
    monkeypatch.delenv("DGB_STAGE_BLAS_THREADS", raising=False)
    assert stage_blas_threads() == 1
    with blas_threads(stage_blas_threads()):
        assert set(numpy_blas_threads()) == {1}
    assert numpy_blas_threads() == before
    monkeypatch.setenv("DGB_STAGE_BLAS_THREADS", "3")
    with blas_threads(stage_blas_threads()):
        assert set(numpy_blas_threads()) == {3}
    assert numpy_blas_threads() == before


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")


@linux_only
def test_work_at_lower_priority_runs_in_a_thread_of_its_own_and_leaves_the_callers_priority():
    base = thread_nice()
    seen = {}

    def work():
        seen["thread"], seen["nice"] = threading.get_native_id(), thread_nice()
        child = threading.Thread(target=lambda: seen.setdefault("child", thread_nice()))
        child.start()
        child.join()
        return "built"

    assert at_lower_priority(work, 5) == "built"
    assert seen["thread"] != threading.get_native_id()
    assert seen["nice"] == seen["child"] == min(base + 5, 19)  # and what it starts inherits it
    assert thread_nice() == base
    # 0: in the caller's own thread, at its priority
    assert at_lower_priority(work, 0) == "built"
    assert seen["thread"] == threading.get_native_id() and seen["nice"] == base


@linux_only
def test_an_error_of_the_work_is_raised_to_the_caller():
    def fails():
        raise ConnectionError("model service down")

    with pytest.raises(ConnectionError, match="model service down"):
        at_lower_priority(fails, 10)
    assert lower_thread_priority(0) is False


def test_the_woken_runs_nice_is_a_checked_setting(monkeypatch):
    monkeypatch.delenv("DGB_STAGE_WOKEN_NICE", raising=False)
    assert stage_woken_nice() == 10
    monkeypatch.setenv("DGB_STAGE_WOKEN_NICE", "0")
    assert stage_woken_nice() == 0
    for bad in ("20", "-1", "low"):
        monkeypatch.setenv("DGB_STAGE_WOKEN_NICE", bad)
        with pytest.raises(ValueError, match="DGB_STAGE_WOKEN_NICE"):
            stage_woken_nice()
