"""One model call started ahead of the chunk that needs it (:meth:`dgb.pipeline.stage.Stage.prefetch`).

While the runner commits a chunk (features, database writes, the relay: the model idle), the
next chunk's model call runs in a background thread; the stage's ``process`` takes its answer when
it is given exactly the rows the call was started for. On a 2-core machine the model service
then stays busy through a backlog instead of waiting for each commit.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

_MISSING = object()


class Ahead:
    """At most one call in flight, keyed by what it was started for."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._key: Hashable | None = None
        self._future: Future | None = None

    def start(self, key: Hashable, fn: Callable[..., Any], *args: Any) -> None:
        """Start ``fn(*args)`` in the background for ``key`` (a call still pending is dropped)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dgb-prefetch")
        self._key, self._future = key, self._pool.submit(fn, *args)

    def take(self, key: Hashable) -> Any:
        """The answer of the call started for ``key`` (its exception re-raised), or
        :data:`MISSING` when none was (the caller then makes the call itself)."""
        if self._future is None or self._key != key:
            self._key, self._future = None, None
            return _MISSING
        future, self._key, self._future = self._future, None, None
        return future.result()


MISSING = _MISSING
