"""Airflow 3 in the local stack: the environment of every Airflow process and CLI call, the
component processes (api-server, scheduler, triggerer, dag-processor) and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

from dgb.config import REPO_ROOT, Settings, read_env_file
from dgb.config import database as config_database
from dgb.config import dev as dev_settings
from dgb.config import embed as embed_settings
from dgb_dev.stack.broker import celery_env
from dgb_dev.stack.component import ManagedProcess
from dgb_dev.stack.process import StackError, http_ok

AIRFLOW_PARTS = ("api-server", "scheduler", "triggerer", "dag-processor")


def airflow_db_url(s: Settings) -> str:
    """Airflow's metadata database URL; its sessions end when left idle in a transaction
    (:func:`dgb.config.database.airflow_idle_tx_timeout_s`: a killed scheduler's locks go with it)."""
    url = f"postgresql+psycopg://{s.pg_user}:{s.pg_password}@{s.pg_host}:{s.pg_port}/{s.pg_airflow_db}"
    timeout_s = config_database.airflow_idle_tx_timeout_s()
    if timeout_s:
        url += "?options=" + quote(f"-c idle_in_transaction_session_timeout={timeout_s * 1000}")
    return url


def airflow_env(settings: Settings) -> dict[str, str]:
    """Environment for every Airflow process and CLI call of the local stack."""
    s = settings
    home = s.state_dir / "airflow"
    secret = read_env_file(s.state_dir / "secrets.env")
    pg_conn = {
        "conn_type": "postgres",
        "host": s.pg_host,
        "port": s.pg_port,
        "login": s.pg_user,
        "password": s.pg_password,
        "schema": s.pg_db,
    }
    env = dict(os.environ)
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO_ROOT / "plugins"),
            # LocalExecutor; by default the variant whose workers each run one task
            # (DGB_EXECUTOR_RECYCLE; celery_env below replaces it with the CeleryExecutor)
            "AIRFLOW__CORE__EXECUTOR": (
                "dgb_airflow.executors.recycling.RecyclingLocalExecutor"
                if dev_settings.executor_recycle()
                else "LocalExecutor"
            ),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            # task processes at once = LocalExecutor worker processes: the three warm stage runs,
            # the dispatcher or a scrape, and an integrity run fit in 5
            "AIRFLOW__CORE__PARALLELISM": os.environ.get("AIRFLOW__CORE__PARALLELISM", "5"),
            # a component's idle database connections are PostgreSQL backends (~5 MiB each); bursts
            # still open up to pool + overflow
            "AIRFLOW__DATABASE__SQL_ALCHEMY_POOL_SIZE": os.environ.get(
                "AIRFLOW__DATABASE__SQL_ALCHEMY_POOL_SIZE", "2"
            ),
            # local stack: a DAG that appears later (an agency added to the mirror) runs at once
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{s.airflow_port}/execution/",
            "AIRFLOW__CORE__AUTH_MANAGER": (
                "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
            ),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "simple_auth_passwords.json"),
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(s.airflow_port),
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{s.airflow_port}",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": airflow_db_url(s),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
            # no health server process in the scheduler (~40 MiB): the stack reads every component's
            # health from the api-server (/api/v2/monitor/health)
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
            # a task whose process died is failed (and retried) after 60 s without heartbeat, not 5 min
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": os.environ.get(
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT", "60"
            ),
            # a task that was running when its scheduler died (kill -9 takes the LocalExecutor's
            # workers with it) belongs to the dead scheduler's job, which heartbeat-timeout
            # detection never looks at: it is reset by the orphaned-task check, every 300 s by
            # default, and meanwhile holds its DAG's only active run (max_active_runs=1)
            "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": os.environ.get(
                "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL", "30"
            ),
            # event-driven stages: an idle scheduler looks for new asset-triggered runs 4x a second
            "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": os.environ.get(
                "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME", "0.25"
            ),
            "AIRFLOW__METRICS__STATSD_ON": os.environ.get("AIRFLOW__METRICS__STATSD_ON", "False"),
            "PUBSUB_EMULATOR_HOST": s.pubsub_emulator_host,
            "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT": json.dumps(
                {
                    "conn_type": "google_cloud_platform",
                    "extra": {"is_anonymous": True, "project": s.gcp_project},
                }
            ),
            "AIRFLOW_CONN_POSTGRES_DEFAULT": json.dumps(pg_conn),
            "AIRFLOW_CONN_DGB_DB": json.dumps(pg_conn),
            "AIRFLOW_CONN_TYPESENSE_DEFAULT": json.dumps(
                {
                    "conn_type": "http",
                    "host": s.typesense_host,
                    "port": s.typesense_port,
                    "schema": "http",
                    "password": s.typesense_api_key,
                }
            ),
            "AIRFLOW_CONN_DGB_MODEL_SERVICE": json.dumps(
                {
                    "conn_type": "http",
                    "host": "127.0.0.1",
                    "port": s.model_port,
                    "schema": "http",
                    "password": embed_settings.model_token(s.state_dir),  # the service's bearer token
                }
            ),
            "DGB_STATE_DIR": str(s.state_dir),
            "DGB_GCP_PROJECT": s.gcp_project,
        }
    )
    for key in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__CORE__FERNET_KEY"):
        if key in secret and key not in os.environ:
            env[key] = secret[key]
    if dev_settings.executor() == "celery":
        env.update(celery_env(s))
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    return env


def airflow_bin() -> str:
    path = Path(sys.executable).parent / "airflow"
    if not path.exists():
        raise StackError("airflow: not installed in this virtualenv (run `make venv`)")
    return str(path)


class AirflowPart(ManagedProcess):
    """One Airflow 3 component process."""

    start_timeout = 120.0

    def __init__(self, settings: Settings, sub: str):
        super().__init__(settings)
        self.sub = sub
        self.name = f"airflow-{sub}"

    @property
    def port(self) -> int:
        return self.s.airflow_port

    def env(self) -> dict[str, str]:
        return airflow_env(self.s)

    def nice(self) -> int:
        if self.sub == "dag-processor":
            return dev_settings.dag_processor_nice()
        return dev_settings.airflow_nice()

    def argv(self) -> list[str]:
        serve_logs = self.sub in ("scheduler", "triggerer") and not dev_settings.airflow_serve_logs()
        return [airflow_bin(), self.sub, *(["--skip-serve-logs"] if serve_logs else [])]

    def healthy(self) -> bool:
        if self.sub == "api-server":
            return http_ok(f"http://127.0.0.1:{self.port}/api/v2/version")
        return self.proc.alive() and self._reported_healthy()

    def _reported_healthy(self) -> bool:
        key = {"scheduler": "scheduler", "triggerer": "triggerer", "dag-processor": "dag_processor"}[self.sub]
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.port}/api/v2/monitor/health", timeout=2
            ) as r:
                data = json.loads(r.read())
        except (urllib.error.URLError, OSError, ValueError):
            return False
        return (data.get(key) or {}).get("status") == "healthy"

    def up(self) -> str:
        if self.sub != "api-server":
            # only the api-server owns a port; the others are checked through its health API
            return self.up_portless()
        return super().up()


def airflow_cli(settings: Settings, args: list[str], check: bool = True, capture: bool = False):
    res = subprocess.run([airflow_bin(), *args], env=airflow_env(settings), text=True, capture_output=capture)
    if check and res.returncode != 0:
        detail = (res.stderr or "").strip()[-2000:] if capture else ""
        raise StackError(f"airflow {' '.join(args)} failed (exit {res.returncode}) {detail}")
    return res
