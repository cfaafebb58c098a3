"""Model calls started ahead of the chunks that need them (:meth:`dgb.pipeline.stage.Stage.prefetch`).

The runner offers the rows of the next chunks (``DGB_STAGE_PREFETCH_CHUNKS``, 2) before it
processes the current one, so the model service already has the next requests queued while the
task does everything that is not the model: the current chunk's article features, its database
writes, the relay. On a 2-core machine the model service then works through a backlog without
waiting for the task between chunks. One request queued was not always enough: when another task
starts (the every-minute dispatcher, a relay, a stage's cold start), the stage task, at the same
low CPU priority, falls behind for a second or so. With two waiting, the model service's idle time
in a 2,000-article backlog fell from 7-15% of the pipeline's time to 3-6% (docs/benchmarks.md).

The calls run in up to ``depth`` background threads, so a call started while the previous one is
still running is sent at once: the local classifier's call does Python work after the model
answers (its heads, the sentiment inputs), and with one thread the next chunk's request reached
the service only after that, leaving the model idle between chunks. A stage's ``process`` takes
an answer when it is given exactly the rows a call was started for, else it calls the model
itself. The calls must be safe to run side by side (the stages' are: the HTTP client is shared
under a lock, the classifier's state is read-only).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from dgb.config import pipeline as config

_MISSING = object()


class Ahead:
    """At most ``depth`` calls started and not yet taken, keyed by what each was started for
    (the oldest is dropped, its answer never used, when a further one starts)."""

    def __init__(self, depth: int | None = None) -> None:
        """``depth``: calls kept at once; default the chunks the runner starts ahead
        (``DGB_STAGE_PREFETCH_CHUNKS``, 2) and the one being processed."""
        if depth is None:
            depth = config.stage_prefetch_chunks() + 1
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self.depth = depth
        self._pool: ThreadPoolExecutor | None = None
        self._calls: OrderedDict[Hashable, Future] = OrderedDict()

    def start(self, key: Hashable, fn: Callable[..., Any], *args: Any) -> None:
        """Start ``fn(*args)`` in the background for ``key``, unless a call for ``key`` is
        already pending."""
        if key in self._calls:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.depth, thread_name_prefix="dgb-prefetch")
        while len(self._calls) >= self.depth:
            _key, dropped = self._calls.popitem(last=False)
            dropped.cancel()  # not started yet: never runs
        self._calls[key] = self._pool.submit(fn, *args)

    def take(self, key: Hashable) -> Any:
        """The answer of the call started for ``key`` (its exception re-raised), or
        :data:`MISSING` when none was (the caller then makes the call itself). Calls started
        for other keys stay pending (a bisected chunk does not cost the next chunk its call)."""
        future = self._calls.pop(key, None)
        if future is None:
            return _MISSING
        return future.result()

    def clear(self) -> None:
        """Forget every call started (one not started yet never runs; a running one ends unused):
        an answer is used only within the run that started it, never, say, an outage's failure
        taken for a later run's half-open probe."""
        while self._calls:
            _key, future = self._calls.popitem(last=False)
            future.cancel()

    def pending(self) -> int:
        """Calls started and not taken yet."""
        return len(self._calls)


MISSING = _MISSING
