"""The scrape DAGs (dags/scrape_agencies.py) and their dispatcher (dags/scrape_dispatcher.py): each
scrape DAG scheduled on its own due asset, the dispatcher every minute with the alias it adds the
due assets through; ``DGB_SCRAPE_CADENCE=fixed`` brings back the 10-minute crons."""

from __future__ import annotations

import importlib
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from dgb import topology

pytestmark = pytest.mark.airflow

DAGS = Path(__file__).resolve().parents[2] / "dags"


def _load(monkeypatch, name: str, mode: str | None) -> dict:
    monkeypatch.setenv("DGB_SCRAPE_AGENCIES", "mec,saude")
    if mode is None:
        monkeypatch.delenv("DGB_SCRAPE_CADENCE", raising=False)
    else:
        monkeypatch.setenv("DGB_SCRAPE_CADENCE", mode)
    spec = importlib.util.spec_from_file_location(f"dgb_{name}_under_test", DAGS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    from airflow.sdk import DAG

    return {v.dag_id: v for v in vars(module).values() if isinstance(v, DAG)}


def test_scrape_dags_run_on_their_due_asset_and_the_dispatcher_emits_them(monkeypatch):
    from airflow.sdk import Asset, AssetAlias
    from airflow.serialization.serialized_objects import DagSerialization

    from dgb_airflow.operators.scrape import ScrapeDispatchOperator

    scrapes = _load(monkeypatch, "scrape_agencies", None)
    assert sorted(scrapes) == ["scrape_mec", "scrape_saude"]
    mec = scrapes["scrape_mec"]
    assert mec.timetable.asset_condition == Asset(name="scrape_mec_due", uri="x-dgb://scrape/due/scrape_mec")
    assert "scrape_dispatcher" in mec.doc_md and mec.params["start_date"] is None  # manual backfill stays
    dispatcher = _load(monkeypatch, "scrape_dispatcher", None)["scrape_dispatcher"]
    assert dispatcher.schedule == timedelta(minutes=1) and dispatcher.max_active_runs == 1
    task = dispatcher.get_task("dispatch")
    assert isinstance(task, ScrapeDispatchOperator) and task.outlets == [AssetAlias("dgb_scrape_due")]
    for dag in (mec, dispatcher):  # what the dag-processor stores for the scheduler
        assert DagSerialization.to_dict(dag)["dag"]["dag_id"] == dag.dag_id


def test_fixed_cadence_is_every_ten_minutes_without_a_dispatcher(monkeypatch):
    scrapes = _load(monkeypatch, "scrape_agencies", "fixed")
    assert scrapes["scrape_mec"].schedule.endswith("/10 * * * *")
    assert _load(monkeypatch, "scrape_dispatcher", "fixed") == {}


def test_a_waiting_scrape_task_of_an_older_run_starts_first(monkeypatch):
    """Airflow orders the task instances waiting for a pool by weight, then by logical date, which
    asset-triggered runs lack: with equal weights the DAG id decided (scrape_turismo waited 1,041 s
    behind agencies triggered after it). The weights the scheduler stores, from the serialized DAG as
    the dag-processor writes it: an older run weighs more, and both stay under a stage task's."""
    from types import SimpleNamespace

    from airflow.models.taskinstance import TaskInstance
    from airflow.serialization.serialized_objects import DagSerialization

    def weight(dag, task_id: str, run_id: str) -> int:
        task = DagSerialization.from_dict(DagSerialization.to_dict(dag)).get_task(task_id)
        row = TaskInstance.insert_mapping(
            run_id, task, -1, dag_version_id=None, dag_run=SimpleNamespace(context_carrier={})
        )
        return row["priority_weight"]

    scrapes = _load(monkeypatch, "scrape_agencies", None)
    older = "asset_triggered__2026-12-05T05:22:06.697244+00:00_QbGiLTNQ"
    newer = "asset_triggered__2026-12-05T05:29:06.550221+00:00_0S2ko7sL"
    # saude before mec in no DAG-id order: only the runs' age can put it first
    assert weight(scrapes["scrape_saude"], "scrape", older) > weight(scrapes["scrape_mec"], "scrape", newer)
    assert weight(scrapes["scrape_mec"], "scrape", older) > weight(scrapes["scrape_saude"], "scrape", newer)
    stages = _load(monkeypatch, "pipeline_stages", None)
    stage = next(iter(stages.values()))
    stage_weight = weight(stage, stage.task_ids[0], newer)
    assert weight(scrapes["scrape_mec"], "scrape", older) < stage_weight == 1


def test_later_stages_are_woken_by_the_scraped_event_unless_switched_off(monkeypatch):
    """embed_news and index_news run on their own input OR the enrichment subscription's asset (the
    same Asset, one watcher, as enrich_news's), so their task start overlaps the enrichment;
    ``DGB_STAGE_EARLY_WAKE=0`` leaves each stage on its own input."""
    from airflow.sdk.definitions.asset import AssetAny

    def inputs(dag) -> list[str]:
        condition = dag.timetable.asset_condition
        objects = condition.objects if isinstance(condition, AssetAny) else [condition]
        return [a.name for a in objects]

    monkeypatch.delenv("DGB_STAGE_EARLY_WAKE", raising=False)
    stages = _load(monkeypatch, "pipeline_stages", None)
    assert inputs(stages["enrich_news"]) == [topology.SUB_ENRICHMENT]
    assert inputs(stages["embed_news"]) == [topology.SUB_EMBEDDINGS, topology.SUB_ENRICHMENT]
    assert inputs(stages["index_news"]) == [
        topology.SUB_TYPESENSE,
        topology.SUB_TYPESENSE_UPDATE,
        topology.SUB_ENRICHMENT,
    ]
    first = stages["enrich_news"].timetable.asset_condition
    woken_by = stages["embed_news"].timetable.asset_condition.objects[-1]
    assert woken_by is first and len(first.watchers) == 1
    assert "woken by `dgb.news.scraped--enrichment`" in stages["embed_news"].doc_md

    monkeypatch.setenv("DGB_STAGE_EARLY_WAKE", "0")
    stages = _load(monkeypatch, "pipeline_stages", None)
    assert inputs(stages["embed_news"]) == [topology.SUB_EMBEDDINGS]
    assert inputs(stages["index_news"]) == [topology.SUB_TYPESENSE, topology.SUB_TYPESENSE_UPDATE]
