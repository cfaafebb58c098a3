"""The whole stack's verbs: ensure (start or reuse some services), bootstrap (the data plane's
setup), up, down and status."""

from __future__ import annotations

import time

from dgb.config import Settings
from dgb.config import dev as dev_settings
from dgb_dev.stack.airflow import AIRFLOW_PARTS
from dgb_dev.stack.airflow_start import unpause_pipeline, up_airflow
from dgb_dev.stack.broker import Redis
from dgb_dev.stack.celery_workers import celery_workers, check_executor_matches, up_celery
from dgb_dev.stack.component import ManagedProcess
from dgb_dev.stack.components import SERVICES, available, component
from dgb_dev.stack.local_secrets import ensure_secrets
from dgb_dev.stack.process import log
from dgb_dev.stack.watchdog import print_watchdog_status, start_watchdog, stop_watchdog


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


def up(with_airflow: bool = True) -> Settings:
    t0 = time.monotonic()
    celery = with_airflow and dev_settings.executor() == "celery"
    if with_airflow:
        check_executor_matches(ensure_secrets(Settings.from_env()))
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
    if with_airflow and dev_settings.executor() == "celery":
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
        optional = name in ["redis", *celery] and dev_settings.executor() != "celery"
        if optional and not component(settings, name).proc.alive():
            continue  # the Celery parts are shown when they run or were asked for
        comp = component(settings, name)
        ok = comp.healthy()
        pid = comp.proc.pid() if isinstance(comp, ManagedProcess) else None
        bad += 0 if ok else 1
        print(f"{name:22s} {'healthy' if ok else 'DOWN':8s} {('pid ' + str(pid)) if pid else ''}")
    print_watchdog_status(settings)
    return 1 if bad else 0
