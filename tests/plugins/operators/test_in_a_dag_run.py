"""The safety-net operators in a real Airflow DAG run (``dag.test()``: the scheduler's own code
creates the run, the task SDK builds the real task context - params, dag_run.conf, run_id, ti -
and runs the task in-process), on the test metadata database and the real PostgreSQL and Pub/Sub
emulator. The other operator tests call ``execute`` with the part of the context they read."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from dgb import db, topology

pytestmark = [pytest.mark.stack, pytest.mark.airflow, pytest.mark.slow]

DAGS = Path(__file__).resolve().parents[3] / "dags"


@pytest.fixture
def project(pubsub_server, monkeypatch):
    name = f"dgb-run-{uuid.uuid4().hex[:8]}"
    topology.apply(name)
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT",
        json.dumps({"conn_type": "google_cloud_platform", "extra": {"is_anonymous": True, "project": name}}),
    )
    return name


def _dag(dag_id: str):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS / "reconcile.py"))
    assert bag.import_errors == {}
    return bag.get_dag(dag_id)


def test_redrive_dag_run_commits_once_and_reports(airflow_db, pg, project):
    with db.transaction(pg) as cur:
        cur.execute(
            "INSERT INTO news (unique_id, agency_key, title, url, published_at, scraped_at)"
            " VALUES ('art-1', 'mec', 't', 'https://www.gov.br/mec/art-1', now(), now())"
        )
        cur.execute(
            "INSERT INTO dead_letters (subscription, message_key, unique_id, reason)"
            " VALUES (%s, 'art-1', 'art-1', 'retries_exhausted')",
            (topology.SUB_ENRICHMENT,),
        )
    run = _dag("redrive_dead_letters").test(run_conf={"reason": "retries_exhausted", "limit": 10})
    assert str(run.state) == "success"
    out = run.get_task_instance("redrive").xcom_pull(task_ids="redrive")
    assert out["selected"] == 1 and [r["unique_id"] for r in out["redriven"]] == ["art-1"]
    assert out["relay"] == {"published": 1, "failed": 0} and not out["already_done"]
    with pg.cursor() as cur:
        cur.execute("SELECT status, resolution FROM dead_letters")
        status, resolution = cur.fetchone()
        cur.execute("SELECT detail->>'once_key' FROM reconcile_runs WHERE mode = 'redrive'")
        keys = [r[0] for r in cur.fetchall()]
    pg.commit()
    assert status == "redriven" and resolution.startswith(f"redriven by airflow {run.run_id}")
    assert keys == [f"redrive_dead_letters/{run.run_id}"]  # the run's key, from the real context
