"""The integrity DAGs' load sensor (dgb_airflow.sensors.load) against the real PostgreSQL: it goes
ahead at once when the system is idle, defers to the load trigger while it is loaded (shown as
deferred), and skips the run (not a success) when the load outlasts its wait."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowSkipException, TaskDeferred

from dgb import db
from dgb_airflow.sensors.load import PipelineLoadSensor
from dgb_airflow.triggers.load import PipelineLoadTrigger
from tests.support.airflow_context import task_context

THRESHOLDS = {"outbox_max_age_s": 60, "backlog_threshold": 0, "max_active": 0, "max_lock_waits": 0}


def _sensor(**kw) -> PipelineLoadSensor:
    return PipelineLoadSensor(task_id="wait_for_capacity", thresholds=THRESHOLDS, poll_interval=1, **kw)


def test_idle_system_goes_ahead_without_deferring(pg):
    with db.transaction(pg) as cur:
        cur.execute("UPDATE outbox SET published_at = now()")
    out = _sensor().execute(task_context())
    assert out["status"] == "clear" and out["polls"] == 1


def test_loaded_system_defers_to_the_load_trigger_then_completes(pg):
    with db.transaction(pg) as cur:
        cur.execute(
            "INSERT INTO outbox (topic, aggregate_id, payload, created_at) VALUES"
            " ('dgb.news.scraped', 'sensor-test', '{}', now() - interval '5 minutes')"
        )
    try:
        with pytest.raises(TaskDeferred) as deferred:
            _sensor(max_wait_s=120).execute(task_context())
        trigger = deferred.value.trigger
        assert isinstance(trigger, PipelineLoadTrigger) and deferred.value.method_name == "execute_complete"
        assert trigger.max_wait_s == 120 and trigger.thresholds == THRESHOLDS
        assert not _sensor(deferrable=False).poke(task_context())  # the same decision in poke mode
    finally:
        with db.transaction(pg) as cur:
            cur.execute("UPDATE outbox SET published_at = now() WHERE published_at IS NULL")
    sensor = _sensor()
    done = sensor.execute_complete(task_context(), {"status": "clear", "polls": 4, "waited_s": 3.0})
    assert done["status"] == "clear"
    with pytest.raises(AirflowSkipException, match="still loaded"):
        sensor.execute_complete(
            task_context(), {"status": "timeout", "polls": 9, "waited_s": 540.0, "last_reason": "outbox"}
        )
