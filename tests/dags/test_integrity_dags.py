"""The integrity DAGs (dags/integrity.py): the budget scheduler's DAG by default, one per tier on
request, each gated by the deferrable load sensor."""

from __future__ import annotations

import importlib
import sys
from datetime import timedelta
from pathlib import Path

import pytest

pytestmark = pytest.mark.airflow

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "integrity.py"


def _load(monkeypatch, mode: str | None):
    if mode is None:
        monkeypatch.delenv("DGB_INTEGRITY_SCHEDULE", raising=False)
    else:
        monkeypatch.setenv("DGB_INTEGRITY_SCHEDULE", mode)
    spec = importlib.util.spec_from_file_location("dgb_integrity_dags_under_test", DAG_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    from airflow.sdk import DAG

    return {v.dag_id: v for v in vars(module).values() if isinstance(v, DAG)}


def test_default_is_one_budget_dag_gated_by_the_deferrable_load_sensor(monkeypatch):
    from dgb.integrity.dags import dag_ids
    from dgb_airflow.operators.integrity import IntegrityBudgetOperator
    from dgb_airflow.sensors.load import PipelineLoadSensor

    dags = _load(monkeypatch, None)
    assert sorted(dags) == ["integrity_budget"] == dag_ids()
    dag = next(iter(dags.values()))
    sensor, check = dag.get_task("wait_for_capacity"), dag.get_task("check_budget")
    assert isinstance(sensor, PipelineLoadSensor) and sensor.deferrable
    assert isinstance(check, IntegrityBudgetOperator) and check.upstream_task_ids == {"wait_for_capacity"}
    assert dag.schedule == timedelta(minutes=10)


def test_tier_mode_keeps_one_dag_per_tier_each_with_the_sensor(monkeypatch):
    dags = _load(monkeypatch, "tiers")
    ids = sorted(dags)
    assert ids == sorted(
        [
            "integrity_tier_0_2d",
            "integrity_tier_3_7d",
            "integrity_tier_8_30d",
            "integrity_tier_31_90d",
            "integrity_tier_gt90d",
        ]
    )
    for dag in dags.values():
        assert dag.get_task("check_tier").upstream_task_ids == {"wait_for_capacity"}
