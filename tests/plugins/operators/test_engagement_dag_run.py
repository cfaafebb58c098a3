"""The engagement DAGs in a real Airflow DAG run (``dag.test()``, on the test metadata database and
the real PostgreSQL and Typesense): trending_scores scores and pushes; engagement_import, without
the umami_db connection, ends skipped, not failed."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.support.engagement import add_article, document, ensure_themes, index, make_index

pytestmark = [pytest.mark.stack, pytest.mark.airflow, pytest.mark.slow]

DAG_FILE = Path(__file__).resolve().parents[3] / "dags" / "engagement.py"


@pytest.fixture
def idx(pg, typesense_server, monkeypatch):
    ensure_themes(pg)
    ts, alias, cleanup = make_index(typesense_server)
    monkeypatch.setenv("DGB_TYPESENSE_COLLECTION", alias)
    yield ts, alias
    cleanup()


def _dag(dag_id: str):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAG_FILE))
    assert bag.import_errors == {}
    return bag.get_dag(dag_id)


@pytest.mark.usefixtures("production_trending_formula")  # a theme of two articles
def test_trending_dag_run_scores_and_pushes(airflow_db, pg, idx):
    ts, alias = idx
    with pg.cursor() as cur:
        cur.execute("SELECT now()")
        now = cur.fetchone()[0]
    pg.rollback()
    add_article(pg, "run-a", now - timedelta(hours=5), "06")
    add_article(pg, "run-b", now - timedelta(hours=1), "06")
    index(pg, ts, alias, ["run-a", "run-b"])
    run = _dag("trending_scores").test()
    assert str(run.state) == "success"
    out = run.get_task_instance("trending").xcom_pull(task_ids="trending")
    assert (out["live"], out["changed"], out["updated"]) == (2, 2, 2)
    assert document(ts, alias, "run-b")["trending_score"] == 7.0


def test_import_dag_run_is_skipped_without_the_umami_connection(airflow_db, pg, idx, monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_UMAMI_DB", raising=False)
    run = _dag("engagement_import").test()
    assert str(run.state) == "success"
    assert str(run.get_task_instance("import_views").state) == "skipped"
