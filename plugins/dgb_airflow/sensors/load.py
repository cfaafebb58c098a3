"""The integrity DAGs' load sensor: integrity checks wait while the system is loaded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowSkipException

from dgb_airflow.metrics import incr as _incr
from dgb_airflow.triggers.load import PipelineLoadTrigger, check_load


class PipelineLoadSensor(BaseSensorOperator):
    """Wait while the event pipeline has a backlog or the database is loaded
    (:func:`dgb.integrity.backpressure.system_load`), then let the integrity checks run.

    Deferrable (the default): when the system is loaded the task defers to
    :class:`dgb_airflow.triggers.load.PipelineLoadTrigger` and shows as *deferred* in the Airflow
    UI while the triggerer polls asynchronously; no worker slot is held. When the system is idle
    it succeeds at once. After ``max_wait_s`` of waiting the run is skipped (shown as *skipped*,
    with the reason in the log; StatsD ``dgb.integrity.load_skipped``): the next run tries again.
    ``deferrable=False`` pokes in the worker instead (``mode``/``poke_interval`` as usual).

    :param postgres_conn_id: Airflow connection of the news database.
    :param poll_interval: seconds between two load checks.
    :param max_wait_s: longest wait before skipping the run (default 540 s: within a 10-min slot).
    :param thresholds: ``system_load`` thresholds (default: the ``DGB_INTEGRITY_*`` / ``DGB_LOAD_*``
        environment).
    """

    template_fields: Sequence[str] = ()
    ui_color = "#e8f4fa"

    def __init__(
        self,
        *,
        postgres_conn_id: str = "dgb_db",
        poll_interval: float = 30.0,
        max_wait_s: float = 540.0,
        thresholds: dict[str, Any] | None = None,
        deferrable: bool = True,
        **kwargs,
    ) -> None:
        kwargs.setdefault("poke_interval", poll_interval)
        kwargs.setdefault("timeout", max_wait_s)
        kwargs.setdefault("soft_fail", True)  # a poke-mode timeout skips, as the deferred path does
        super().__init__(**kwargs)
        self.postgres_conn_id = postgres_conn_id
        self.poll_interval = poll_interval
        self.max_wait_s = max_wait_s
        self.thresholds = dict(thresholds or {})
        self.deferrable = deferrable

    def poke(self, context: Any) -> bool:
        reason = check_load(self.postgres_conn_id, self.thresholds)
        if reason:
            self.log.info("system loaded, integrity checks wait: %s", reason)
        return reason is None

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        reason = check_load(self.postgres_conn_id, self.thresholds)
        if reason is None:
            self.log.info("system not loaded: integrity checks go ahead")
            return {"status": "clear", "polls": 1, "waited_s": 0.0, "last_reason": None}
        self.log.info("system loaded (%s): deferring until it clears", reason)
        self.defer(
            trigger=PipelineLoadTrigger(
                postgres_conn_id=self.postgres_conn_id,
                poll_interval=self.poll_interval,
                max_wait_s=self.max_wait_s,
                thresholds=self.thresholds,
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Any, event: dict[str, Any] | None = None) -> dict[str, Any]:
        event = event or {}
        if event.get("status") != "clear":
            _incr("dgb.integrity.load_skipped", 1, {"dag": getattr(self, "dag_id", "")})
            raise AirflowSkipException(
                f"system still loaded after {event.get('waited_s')} s: {event.get('last_reason')}"
            )
        self.log.info("system load cleared after %s s (%s polls)", event.get("waited_s"), event.get("polls"))
        return event
