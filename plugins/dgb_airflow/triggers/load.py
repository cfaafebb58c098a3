"""A trigger that waits, asynchronously in the triggerer, until the system has capacity for
integrity checks: no event-pipeline backlog and no database overload.

The decision is :func:`dgb.integrity.backpressure.system_load` (one home): outbox events unpublished
for too long, too many articles pending enrichment, too many active database sessions or waiting
locks. Each poll opens a short connection in a worker thread (the triggerer's event loop is never
blocked) and closes it; between polls the trigger sleeps ``poll_interval`` seconds. It fires once:
``{"status": "clear", ...}`` when the load is gone, or ``{"status": "timeout", ...}`` after
``max_wait_s`` of waiting (the sensor then skips the run, visibly).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

log = logging.getLogger(__name__)

TRIGGER_PATH = "dgb_airflow.triggers.load.PipelineLoadTrigger"


def check_load(postgres_conn_id: str, thresholds: dict[str, Any]) -> str | None:
    """One poll: why checks must wait now, or None (blocking; run it in a thread). The connection
    comes from the Airflow connection, as the operators' do (never stored in the trigger's
    serialized kwargs), and is closed after the poll."""
    from airflow.providers.postgres.hooks.postgres import PostgresHook

    from dgb.integrity.backpressure import system_load

    conn = PostgresHook(postgres_conn_id=postgres_conn_id).get_conn()
    try:
        return system_load(conn, **thresholds)
    finally:
        conn.close()


class PipelineLoadTrigger(BaseTrigger):
    """Fire when :func:`dgb.integrity.backpressure.system_load` finds no load.

    :param postgres_conn_id: Airflow connection of the news database.
    :param poll_interval: seconds between two polls.
    :param max_wait_s: give up (``status: timeout``) after waiting this long; None: wait on.
    :param thresholds: passed to ``system_load`` (``backlog_threshold``, ``outbox_max_age_s``,
        ``max_active``, ``max_lock_waits``); missing ones come from the environment.
    """

    def __init__(
        self,
        postgres_conn_id: str = "dgb_db",
        poll_interval: float = 30.0,
        max_wait_s: float | None = None,
        thresholds: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.postgres_conn_id = postgres_conn_id
        self.poll_interval = float(poll_interval)
        self.max_wait_s = None if max_wait_s is None else float(max_wait_s)
        self.thresholds = dict(thresholds or {})
        self.polls = 0  # polls made so far (read by tests and logs)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            TRIGGER_PATH,
            {
                "postgres_conn_id": self.postgres_conn_id,
                "poll_interval": self.poll_interval,
                "max_wait_s": self.max_wait_s,
                "thresholds": self.thresholds,
            },
        )

    def _event(self, status: str, waited: float, reason: str | None) -> dict[str, Any]:
        return {"status": status, "polls": self.polls, "waited_s": round(waited, 1), "last_reason": reason}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        started = time.monotonic()
        reason: str | None = None
        while True:
            try:
                now_reason = await asyncio.to_thread(check_load, self.postgres_conn_id, self.thresholds)
            except Exception as exc:  # the database itself unreachable is load too: keep waiting
                now_reason = f"load check failed: {exc!r}"
            self.polls += 1
            waited = time.monotonic() - started
            if now_reason is None:
                yield TriggerEvent(self._event("clear", waited, reason))
                return
            reason = now_reason
            log.info("integrity load: waiting (%s), poll %d, %.0f s so far", reason, self.polls, waited)
            if self.max_wait_s is not None and waited >= self.max_wait_s:
                yield TriggerEvent(self._event("timeout", waited, reason))
                return
            await asyncio.sleep(self.poll_interval)
