"""An ASGI app that builds the real one on its first request.

Airflow loads every plugin module in every process that reads plugins, not only in the API server
that serves the pages: the scheduler, the triggerer and the DAG processor do, and so does each task
process (for macros and listeners; in the local stack's LocalExecutor it inherits them from the
scheduler, which forks its workers). Building the FastAPI app of the DGB pages at import pulled
FastAPI, Airflow's API auth and their dependencies (~390 modules, ~0.5 s of CPU in a fresh
interpreter) into each of them: the idle scheduler's process tree held ~55 MiB for them (idle stack
PSS, docs/benchmarks.md). :class:`LazyApp` keeps the import of the plugin light; the API server,
the one process that routes requests to the mount, builds the app on the first one.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class LazyApp:
    """An ASGI callable standing for ``factory()``, built once, on the first call.

    A factory that raises is called again on the next request (the error reaches the server as
    any request error does, so a transient failure does not disable the pages until a restart).
    """

    def __init__(self, factory: Callable[[], ASGIApp]):
        self._factory = factory
        self._app: ASGIApp | None = None
        self._lock = threading.Lock()

    @property
    def built(self) -> bool:
        return self._app is not None

    def app(self) -> ASGIApp:
        """The real app, built now if it was not yet."""
        if self._app is None:
            with self._lock:  # the API server may run several event loops in threads
                if self._app is None:
                    self._app = self._factory()
        return self._app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app()(scope, receive, send)
