"""The stack runner: reuse of running servers, clear errors on taken ports, clean stop."""

import os
import socket
from dataclasses import replace

import pytest

from dgb_dev.stack.airflow_start import release_foreign_triggers
from dgb_dev.stack.local_services import ModelService
from dgb_dev.stack.process import StackError, group_alive
from dgb_dev.stack.typesense import Typesense

pytestmark = pytest.mark.stack


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_running_component_is_reused(typesense_server):
    comp = Typesense(typesense_server)
    pid = comp.proc.pid()
    assert comp.up().startswith("already running")
    assert comp.proc.pid() == pid


def test_port_taken_by_another_program_is_a_clear_error(typesense_server, tmp_path):
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        s = replace(typesense_server, state_dir=tmp_path, typesense_port=port)
        comp = Typesense(s)
        with pytest.raises(StackError, match=f"port 127.0.0.1:{port} is taken by another program"):
            comp.up()
        # refused before starting anything: no process, no pid file, no log
        assert comp.proc.pid() is None
        assert not comp.proc.pid_file.exists() and not comp.proc.log_file.exists()


def test_same_service_started_elsewhere_is_named(typesense_server, tmp_path):
    # the shared Typesense answers on its port but this state dir holds no pid for it
    s = replace(typesense_server, state_dir=tmp_path)
    with pytest.raises(StackError, match="not started by this checkout"):
        Typesense(s).up()


def test_start_and_stop_own_instance_leaves_nothing(typesense_server, tmp_path):
    s = replace(
        typesense_server, state_dir=tmp_path, typesense_port=_free_port(), typesense_peering_port=_free_port()
    )
    comp = Typesense(s)
    assert comp.up().startswith("started")
    pid = comp.proc.pid()
    assert comp.healthy()
    assert comp.down() is True
    assert not group_alive(pid)
    assert not comp.healthy()
    assert comp.down() is False  # stopping twice is harmless


def test_triggers_under_another_fernet_key_are_released_before_the_triggerer_starts(airflow_db):
    """The cluster outlives a checkout: a trigger encrypted with another clone's key would make
    Airflow's trigger runner exit at start (CI met it). Only those go; a deferred task waiting on one
    is cleared to run again; triggers this key reads, or plain-JSON ones, stay."""
    import uuid

    from cryptography.fernet import Fernet

    from dgb import db

    ours = Fernet(os.environ["AIRFLOW__CORE__FERNET_KEY"].split(",")[0].encode())
    theirs = Fernet(Fernet.generate_key())
    dag_id, run_id = f"t_{uuid.uuid4().hex[:8]}", "manual__1"
    with db.connect(airflow_db.pg_dsn(airflow_db.pg_airflow_db)) as conn, db.transaction(conn) as cur:
        ids = {}
        for name, kwargs in (
            ("ours", ours.encrypt(b'{"a": 1}').decode()),
            ("theirs", theirs.encrypt(b'{"a": 2}').decode()),
            ("plain", '{"a": 3}'),
        ):
            cur.execute(
                "INSERT INTO trigger (classpath, kwargs, created_date) VALUES (%s, %s, now()) RETURNING id",
                (f"tests.{name}", kwargs),
            )
            ids[name] = cur.fetchone()[0]
        cur.execute(
            "INSERT INTO dag_run (dag_id, run_id, run_type, run_after, state)"
            " VALUES (%s, %s, 'manual', now(), 'running')",
            (dag_id, run_id),
        )
        cur.execute(
            "INSERT INTO task_instance (id, task_id, dag_id, run_id, try_number, pool, pool_slots, state,"
            " trigger_id, next_method) VALUES (%s, 'wait', %s, %s, 1, 'default_pool', 1, 'deferred', %s,"
            " 'execute_complete')",
            (uuid.uuid4(), dag_id, run_id, ids["theirs"]),
        )

    try:
        assert release_foreign_triggers(airflow_db) == 1
        assert release_foreign_triggers(airflow_db) == 0  # nothing left to release
        with db.connect(airflow_db.pg_dsn(airflow_db.pg_airflow_db)) as conn, db.transaction(conn) as cur:
            cur.execute("SELECT id FROM trigger WHERE id = ANY(%s)", (list(ids.values()),))
            assert {r[0] for r in cur.fetchall()} == {ids["ours"], ids["plain"]}
            cur.execute(
                "SELECT state, trigger_id, next_method FROM task_instance WHERE dag_id = %s", (dag_id,)
            )
            assert cur.fetchall() == [(None, None, None)]  # kept, cleared: the scheduler runs it again
    finally:
        with db.connect(airflow_db.pg_dsn(airflow_db.pg_airflow_db)) as conn, db.transaction(conn) as cur:
            cur.execute("DELETE FROM dag_run WHERE dag_id = %s", (dag_id,))
            cur.execute("DELETE FROM trigger WHERE id = ANY(%s)", (list(ids.values()),))


@pytest.mark.parametrize(
    ("cores", "setting", "threads"), [(2, None, "1"), (8, None, "7"), (1, None, "1"), (2, "2", "2")]
)
def test_model_service_leaves_a_core_to_airflow_unless_told(monkeypatch, cores, setting, threads):
    from dgb.config import settings

    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    if setting is None:
        monkeypatch.delenv("DGB_MODEL_THREADS", raising=False)
    else:
        monkeypatch.setenv("DGB_MODEL_THREADS", setting)
    assert ModelService(settings()).env()["DGB_MODEL_THREADS"] == threads


def test_the_stack_generates_the_model_token_and_every_side_gets_it(monkeypatch, tmp_path):
    """`make up`: one DGB_MODEL_TOKEN in secrets.env (kept across runs); the model service reads
    it from that state folder, and the dgb_model_service connection carries it as its password."""
    import json

    from dgb.config import Settings
    from dgb.embed.auth import ServiceAuth
    from dgb_dev.stack.airflow import airflow_env
    from dgb_dev.stack.local_secrets import ensure_secrets

    monkeypatch.setenv("DGB_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("DGB_MODEL_TOKEN", raising=False)
    monkeypatch.delenv("DGB_MODEL_AUTH", raising=False)
    s = ensure_secrets(Settings.from_env())
    lines = (tmp_path / "secrets.env").read_text().splitlines()
    [token] = [line.split("=", 1)[1] for line in lines if line.startswith("DGB_MODEL_TOKEN=")]
    assert len(token) >= 40
    assert ensure_secrets(s) == s and (tmp_path / "secrets.env").read_text().splitlines() == lines  # kept
    assert ModelService(s).env()["DGB_STATE_DIR"] == str(tmp_path)
    assert ServiceAuth.from_env().refusal(f"Bearer {token}") is None  # what `dgb model serve` checks
    conn = json.loads(airflow_env(s)["AIRFLOW_CONN_DGB_MODEL_SERVICE"])
    assert conn["password"] == token and conn["port"] == s.model_port


def test_service_processes_write_bytecode_and_keep_few_malloc_arenas(monkeypatch):
    """A shell's PYTHONDONTWRITEBYTECODE does not reach the stack's processes (the venv has no
    .pyc: every task would compile every module it imports); MALLOC_ARENA_MAX is set unless the
    caller set one or DGB_MALLOC_ARENA_MAX=0."""
    from dgb_dev.stack.process import service_env

    monkeypatch.delenv("DGB_MALLOC_ARENA_MAX", raising=False)
    env = service_env({"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/bin"})
    assert "PYTHONDONTWRITEBYTECODE" not in env and env["MALLOC_ARENA_MAX"] == "2" and env["PATH"] == "/bin"
    assert service_env({"MALLOC_ARENA_MAX": "4"})["MALLOC_ARENA_MAX"] == "4"
    monkeypatch.setenv("DGB_MALLOC_ARENA_MAX", "0")
    assert "MALLOC_ARENA_MAX" not in service_env({})


def test_airflow_parts_skip_the_log_server_and_the_emulator_is_sized(monkeypatch):
    from dgb.config import settings
    from dgb_dev.stack.airflow import AirflowPart
    from dgb_dev.stack.pubsub import PubSubEmulator

    monkeypatch.delenv("DGB_AIRFLOW_SERVE_LOGS", raising=False)
    monkeypatch.delenv("DGB_PUBSUB_JAVA_OPTS", raising=False)
    s = settings()
    assert AirflowPart(s, "scheduler").argv()[1:] == ["scheduler", "--skip-serve-logs"]
    assert AirflowPart(s, "triggerer").argv()[1:] == ["triggerer", "--skip-serve-logs"]
    assert AirflowPart(s, "api-server").argv()[1:] == ["api-server"]
    assert "-Xmx160m" in PubSubEmulator(s).env()["JAVA_TOOL_OPTIONS"]
    monkeypatch.setenv("DGB_AIRFLOW_SERVE_LOGS", "1")
    monkeypatch.setenv("DGB_PUBSUB_JAVA_OPTS", "none")
    assert AirflowPart(s, "scheduler").argv()[1:] == ["scheduler"]
    assert (
        "JAVA_TOOL_OPTIONS" not in PubSubEmulator(s).env()
        or "-Xmx" not in PubSubEmulator(s).env()["JAVA_TOOL_OPTIONS"]
    )


def test_airflow_runs_the_recycling_local_executor_unless_told(monkeypatch):
    """The stack's Airflow runs the LocalExecutor whose workers run one task each (an importable
    class path, as Airflow loads it); DGB_EXECUTOR_RECYCLE=0 gives Airflow's own."""
    import importlib

    from airflow.executors.local_executor import LocalExecutor

    from dgb.config import settings
    from dgb_dev.stack.airflow import airflow_env

    monkeypatch.delenv("DGB_EXECUTOR", raising=False)
    monkeypatch.delenv("DGB_EXECUTOR_RECYCLE", raising=False)
    path = airflow_env(settings())["AIRFLOW__CORE__EXECUTOR"]
    module, _, name = path.rpartition(".")
    assert issubclass(getattr(importlib.import_module(module), name), LocalExecutor)
    assert name == "RecyclingLocalExecutor"
    monkeypatch.setenv("DGB_EXECUTOR_RECYCLE", "0")
    assert airflow_env(settings())["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"


def test_postgres_is_started_with_small_shared_buffers_unless_told(monkeypatch, tmp_path):
    """``make up`` starts the machine's cluster with ``shared_buffers`` from DGB_PG_SHARED_BUFFERS
    (32MB) as a server option of that start (pg_ctlcluster's ``-- -o``), the cluster's files
    untouched; ``none``: no option; a value that is not a size is refused before anything starts."""
    from dgb.config import settings
    from dgb_dev.stack.postgres import Postgres

    calls = tmp_path / "calls"
    fake = tmp_path / "bin" / "pg_ctlcluster"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\nprintf "%s|" "$@" >> {calls}\necho >> {calls}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DGB_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("DGB_PG_MANAGE_CLUSTER", "1")
    # not running before the start, running once pg_ctlcluster was called
    monkeypatch.setattr(Postgres, "healthy", lambda self: calls.exists())
    monkeypatch.setattr(Postgres, "ensure_roles", lambda self: None)

    def up() -> list[str]:
        calls.unlink(missing_ok=True)
        Postgres(settings()).up()
        return calls.read_text().strip().rstrip("|").split("|")

    monkeypatch.delenv("DGB_PG_SHARED_BUFFERS", raising=False)
    assert up() == ["15", "main", "start", "--", "-o", "-c shared_buffers=32MB"]
    monkeypatch.setenv("DGB_PG_SHARED_BUFFERS", "none")
    assert up() == ["15", "main", "start"]
    monkeypatch.setenv("DGB_PG_SHARED_BUFFERS", "32MB; DROP")
    calls.unlink(missing_ok=True)
    with pytest.raises(ValueError, match="DGB_PG_SHARED_BUFFERS"):
        Postgres(settings()).up()
    assert not calls.exists()


def test_an_airflow_session_left_idle_in_a_transaction_is_ended_by_the_server(pg_server, monkeypatch):
    """Seed 28's chaos run: the scheduler, killed mid-transaction, left its socket open in the task
    processes it had forked; the server kept its transaction (and row locks) and the next scheduler
    and the DAG processor waited 9 minutes. Through the URL Airflow is given (read back through
    Airflow's own configuration), a transaction left idle past the limit is ended by PostgreSQL."""
    import time

    import sqlalchemy
    from sqlalchemy.exc import DBAPIError

    from dgb_dev.stack.airflow import airflow_db_url, airflow_env

    monkeypatch.setenv("DGB_AIRFLOW_DB_IDLE_TX_TIMEOUT_S", "1")
    monkeypatch.setenv(
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", airflow_env(pg_server)["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    )
    from airflow.configuration import conf

    url = conf.get("database", "sql_alchemy_conn")
    assert url == airflow_db_url(pg_server) and "idle_in_transaction_session_timeout%3D1000" in url
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT 1"))  # a transaction begun, then the client goes quiet
            time.sleep(2.5)
            with pytest.raises(DBAPIError, match="idle-in-transaction timeout"):
                conn.execute(sqlalchemy.text("SELECT 1"))
        monkeypatch.setenv("DGB_AIRFLOW_DB_IDLE_TX_TIMEOUT_S", "0")  # no limit: the plain URL
        assert "options" not in airflow_db_url(pg_server)
    finally:
        engine.dispose()
