"""Every DAG imports cleanly and follows the project's conventions."""

from pathlib import Path

import pytest

pytestmark = pytest.mark.airflow

DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS_DIR))


def test_no_import_errors(dagbag):
    assert dagbag.import_errors == {}


def test_registry_matches_dag_files(dagbag):
    from dgb.dags_meta import pipeline_dag_ids

    assert set(pipeline_dag_ids()) == set(dagbag.dag_ids)


@pytest.mark.parametrize("check", ["tags", "owner", "retries", "catchup", "doc_md"])
def test_dag_conventions(dagbag, check):
    assert dagbag.dags, "no DAGs found"
    bad = []
    for dag_id, dag in dagbag.dags.items():
        if (
            (check == "tags" and not dag.tags)
            or (check == "owner" and any(t.owner in (None, "", "airflow") for t in dag.tasks))
            or (check == "retries" and any((t.retries or 0) < 2 for t in dag.tasks))
            or (check == "catchup" and dag.catchup)
            or (check == "doc_md" and not (dag.doc_md or "").strip())
        ):
            bad.append(dag_id)
    assert bad == [], f"DAGs failing the {check} convention: {bad}"


def test_every_task_has_an_execution_timeout_inside_its_run_timeout(dagbag):
    """A hung task (a server that never answers) is killed and retried instead of holding a slot
    forever, and its timeout leaves room inside the DAG's run timeout for that retry to start."""
    assert dagbag.dags, "no DAGs found"
    missing, too_long = [], []
    for dag_id, dag in dagbag.dags.items():
        for t in dag.tasks:
            if t.execution_timeout is None:
                missing.append(f"{dag_id}.{t.task_id}")
            elif dag.dagrun_timeout is not None and t.execution_timeout >= dag.dagrun_timeout:
                too_long.append(f"{dag_id}.{t.task_id}: {t.execution_timeout} >= {dag.dagrun_timeout}")
    assert missing == [], f"tasks without execution_timeout: {missing}"
    assert too_long == [], f"execution_timeout not below the DAG's dagrun_timeout: {too_long}"


def test_task_ids_are_the_names_of_their_functions(dagbag):
    """A task(...) decorator object reused for several functions names them all after the first
    (migrate, migrate__1, ...): the bootstrap DAG did that until this test; operators see the ids."""
    for dag_id, dag in dagbag.dags.items():
        for t in dag.tasks:
            fn = getattr(t, "python_callable", None)
            if fn is not None and getattr(t, "_task_type", "") != "PythonOperator":
                assert t.task_id == fn.__name__, (dag_id, t.task_id, fn.__name__)
    assert set(dagbag.dags["dgb_bootstrap"].task_ids) == {
        "migrate",
        "load_reference",
        "pubsub_topology",
        "typesense_collection",
    }
