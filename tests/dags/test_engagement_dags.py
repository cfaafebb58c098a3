"""The engagement DAGs (dags/engagement.py): trending_scores on its short interval, the optional
Umami import on its cron; both schedules are settings."""

from __future__ import annotations

import importlib
import sys
from datetime import timedelta
from pathlib import Path

import pytest

pytestmark = pytest.mark.airflow

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "engagement.py"


def _load(monkeypatch, **env):
    for key in ("DGB_TRENDING_MINUTES", "DGB_ENGAGEMENT_CRON"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    spec = importlib.util.spec_from_file_location("dgb_engagement_dags_under_test", DAG_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    from airflow.sdk import DAG

    return {v.dag_id: v for v in vars(module).values() if isinstance(v, DAG)}


def test_both_dags_with_their_operators_and_default_schedules(monkeypatch):
    from dgb.engagement.dags import dag_ids
    from dgb_airflow.operators.engagement import EngagementImportOperator, TrendingOperator

    dags = _load(monkeypatch)
    assert sorted(dags) == sorted(dag_ids()) == ["engagement_import", "trending_scores"]
    trending, views = dags["trending_scores"], dags["engagement_import"]
    assert trending.schedule == timedelta(minutes=10)
    assert isinstance(trending.get_task("trending"), TrendingOperator)
    assert views.schedule == "17 * * * *"
    task = views.get_task("import_views")
    assert isinstance(task, EngagementImportOperator) and task.umami_conn_id == "umami_db"
    assert "24 hours" in trending.doc_md and "umami_db" in views.doc_md


def test_schedules_follow_the_settings(monkeypatch):
    dags = _load(monkeypatch, DGB_TRENDING_MINUTES="3", DGB_ENGAGEMENT_CRON="5 4 * * *")
    assert dags["trending_scores"].schedule == timedelta(minutes=3)
    assert dags["engagement_import"].schedule == "5 4 * * *"
    with pytest.raises(ValueError, match="DGB_TRENDING_MINUTES"):
        _load(monkeypatch, DGB_TRENDING_MINUTES="0")
