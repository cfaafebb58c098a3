"""Airflow's start-up in the local stack: the metadata database (migrations, triggers another
checkout's key encrypted), the component processes side by side, the pools, then the pipeline's
DAGs unpaused (pools and DAGs through the REST API, :mod:`.airflow_rest`)."""

from __future__ import annotations

import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor

from dgb.config import Settings, read_env_file
from dgb_dev.stack import airflow_rest
from dgb_dev.stack.airflow import AIRFLOW_PARTS, AirflowPart, airflow_cli
from dgb_dev.stack.process import StackError, log


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
    """Migrate the metadata database, then start the four parts side by side (one thread each:
    spawn, then wait until healthy; started one after the other they took ~40 s on 2 cores, each
    waiting for the previous one's health), and set the pools as soon as the api-server answers.
    A task of a pool not created yet stays scheduled until it is (Airflow skips unknown pools)."""
    t0 = time.monotonic()
    airflow_cli(settings, ["db", "migrate"], capture=True)
    log(f"airflow db migrate: {time.monotonic() - t0:.1f}s")
    release_foreign_triggers(settings)
    home = settings.state_dir / "airflow"
    home.mkdir(parents=True, exist_ok=True)

    def start(part: str) -> None:
        t1 = time.monotonic()
        status = AirflowPart(settings, part).up()
        log(f"airflow {part}: {status} in {time.monotonic() - t1:.1f}s")
        if part == "api-server":
            set_pools(settings)

    with ThreadPoolExecutor(len(AIRFLOW_PARTS)) as pool:
        for future in [pool.submit(start, part) for part in AIRFLOW_PARTS]:
            future.result()  # the first failure, once every part has had its try


def set_pools(settings: Settings) -> None:
    """The pipeline's pools (:data:`dgb.dags_meta.POOLS`), through the REST API (the CLI, one call
    per pool, if the API cannot be reached)."""
    from dgb.dags_meta import POOLS

    try:
        airflow_rest.set_pools(settings, POOLS)
        return
    except airflow_rest.ApiUnreachable as exc:
        log(f"airflow pools: REST API unreachable ({exc}); using the CLI")
    for pool, (slots, description) in POOLS.items():
        airflow_cli(settings, ["pools", "set", pool, str(slots), description], capture=True)


def unpause_pipeline(settings: Settings, timeout: float = 240.0) -> list[str]:
    """Wait until the DAG processor has parsed our DAGs, then unpause them all (through the REST
    API, checked every second; the CLI, ~5-10 s a call, if the API cannot be reached)."""
    from dgb import dags_meta

    wanted = set(dags_meta.pipeline_dag_ids(settings))
    try:
        return _unpause_rest(settings, wanted, timeout)
    except airflow_rest.ApiUnreachable as exc:
        log(f"airflow: REST API unreachable ({exc}); unpausing through the CLI")
    return _unpause_cli(settings, wanted, timeout)


def _unpause_rest(settings: Settings, wanted: set[str], timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    seen = airflow_rest.dag_ids(settings)
    while not wanted <= seen and time.monotonic() < deadline:
        time.sleep(1.0)
        seen = airflow_rest.dag_ids(settings)
    _check_parsed(wanted, seen, timeout, airflow_rest.import_errors(settings))
    airflow_rest.unpause(settings, sorted(wanted))
    return sorted(wanted)


def _unpause_cli(settings: Settings, wanted: set[str], timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    seen: set[str] = set()
    while time.monotonic() < deadline:
        res = airflow_cli(settings, ["dags", "list", "-o", "json"], check=False, capture=True)
        seen = {d["dag_id"] for d in _cli_json(res.stdout)}
        if wanted <= seen:
            break
        time.sleep(3)
    errors = airflow_cli(settings, ["dags", "list-import-errors", "-o", "json"], check=False, capture=True)
    _check_parsed(wanted, seen, timeout, _cli_json(errors.stdout))
    pattern = "^(" + "|".join(re.escape(d) for d in sorted(wanted)) + ")$"
    airflow_cli(settings, ["dags", "unpause", "--treat-dag-id-as-regex", "-y", pattern], capture=True)
    return sorted(wanted)


def _check_parsed(wanted: set[str], seen: set[str], timeout: float, errors: list) -> None:
    missing = wanted - seen
    if missing:
        raise StackError(
            f"airflow: DAGs not parsed after {timeout:.0f}s: {sorted(missing)[:10]} "
            f"(see `make airflow ARGS='dags list-import-errors'`)"
        )
    if errors:
        raise StackError(f"airflow: DAG import errors: {json.dumps(errors)[:2000]}")


def _cli_json(stdout: str) -> list:
    """The JSON list an Airflow CLI command printed (it may print warnings before it)."""
    for line in (stdout or "").splitlines():
        if line.startswith("["):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return []
