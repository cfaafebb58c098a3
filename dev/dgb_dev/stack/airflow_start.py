"""Airflow's start-up in the local stack: the metadata database (migrations, pools, triggers another
checkout's key encrypted), the component processes in order, then the pipeline's DAGs unpaused."""

from __future__ import annotations

import json
import os
import re
import time

from dgb.config import Settings, read_env_file
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
