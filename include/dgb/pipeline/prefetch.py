"""Model calls started ahead of the chunks that need them (:meth:`dgb.pipeline.stage.Stage.prefetch`).

The runner offers the next chunk's rows before it processes the current one, so the model
service already has the next request queued while the task does everything that is not the model:
the current chunk's article features, its database writes, the relay. On a 2-core machine the
model service then works through a backlog without waiting for the task between chunks (one model
call queued behind the running one is enough: the service answers one request at a time).

The calls run in one background thread, in the order they were started; a stage's ``process``
takes an answer when it is given exactly the rows a call was started for, else it calls the model
itself.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

_MISSING = object()


class Ahead:
    """At most ``depth`` calls started and not yet taken, keyed by what each was started for
    (the oldest is dropped, its answer never used, when a further one starts)."""

    def __init__(self, depth: int = 2) -> None:
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
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dgb-prefetch")
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

    def pending(self) -> int:
        """Calls started and not taken yet."""
        return len(self._calls)


MISSING = _MISSING
