"""dgb.pipeline.threads: inside blas_threads numpy's BLAS runs at the stage setting's number of
threads (DGB_STAGE_BLAS_THREADS, 1 by default), and at the number it had before once outside."""

from __future__ import annotations

import numpy as np
import pytest

from dgb.config.pipeline import stage_blas_threads
from dgb.pipeline.threads import blas_threads

threadpoolctl = pytest.importorskip("threadpoolctl")


def numpy_blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]


def test_a_stage_runs_numpy_on_the_settings_blas_threads_and_puts_them_back(monkeypatch):
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
