"""Settings of the local stack (``dgb_dev``: ``make up`` and the local gov.br-like site): read here
and nowhere else.

Each function reads the environment when called (the stack, the tests and the benchmarks change it
between calls). Standard library only; ``dgb`` never imports the dev package, the dev package reads
its settings here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from dgb.config import env_flag, env_number, env_str, read_env_file

EXECUTORS = ("local", "celery")


# -- PostgreSQL and the Pub/Sub emulator ---------------------------------------------------------


def pg_cluster() -> tuple[str, str]:
    """``DGB_PG_CLUSTER_VERSION`` / ``DGB_PG_CLUSTER_NAME`` (default ``15`` / ``main``): the
    Debian cluster ``make up`` starts with pg_ctlcluster."""
    return env_str("DGB_PG_CLUSTER_VERSION", "15"), env_str("DGB_PG_CLUSTER_NAME", "main")


def pg_server_options() -> list[str]:
    """``DGB_PG_SHARED_BUFFERS`` (default ``32MB``; ``none``: the cluster's own setting): PostgreSQL's
    shared buffers when ``make up`` starts the cluster (``pg_ctlcluster ... start -- -o "-c
    shared_buffers=..."``; the cluster's configuration files are left alone). Debian's 128 MB fill
    up over a day of use and stay resident whatever the stack is doing; the local stack's working
    set is a fraction of that, and a page evicted from them is still in the kernel's page cache,
    which gives memory back under pressure. The server options as ``pg_ctl`` arguments; a value
    that is not a PostgreSQL size is a ``ValueError``."""
    value = env_str("DGB_PG_SHARED_BUFFERS", "32MB").strip()
    if value.lower() == "none":
        return []
    if not re.fullmatch(r"[0-9]+(kB|MB|GB)", value):
        raise ValueError(f"DGB_PG_SHARED_BUFFERS={value!r}: expected a PostgreSQL size such as 32MB")
    return ["-o", f"-c shared_buffers={value}"]


def pubsub_emulator_bin() -> str:
    """``DGB_PUBSUB_EMULATOR_BIN`` (default empty: found through gcloud or the Cloud SDK): the
    emulator launcher."""
    return env_str("DGB_PUBSUB_EMULATOR_BIN", "")


# -- the local site and the model service ---------------------------------------------------------


def mirror_extra_dir() -> str:
    """``DGB_MIRROR_EXTRA`` (default empty: none): folder of extra articles the local site serves."""
    return env_str("DGB_MIRROR_EXTRA", "")


def mirror_tick() -> str:
    """``DGB_MIRROR_TICK`` (default empty: off): seconds between the local site publishing or
    editing an article by itself (passed to ``dgb mirror serve --tick``)."""
    return env_str("DGB_MIRROR_TICK", "")


def mirror_journal_base() -> bool:
    """``DGB_MIRROR_JOURNAL_BASE`` (default off): the local site journals its corpus at start, not
    only its changes (``--journal-base``: the chaos oracle's truth, :mod:`dgb_dev.mirror.journal`)."""
    return env_flag("DGB_MIRROR_JOURNAL_BASE", False)


def mirror_base_newest_age() -> str:
    """``DGB_MIRROR_BASE_NEWEST_AGE`` (default empty: the corpus's own dates): seconds; each agency's
    corpus is moved in time so its newest article is this old when the local site starts
    (``--base-newest-age``; ``scripts/bench_chaos.py`` sets it)."""
    return env_str("DGB_MIRROR_BASE_NEWEST_AGE", "").strip()


def mirror_synthetic() -> str:
    """``DGB_MIRROR_SYNTHETIC`` (default empty or ``0``: off): N synthetic articles the local site
    also serves (``--synthetic``)."""
    return env_str("DGB_MIRROR_SYNTHETIC", "").strip()


def mirror_synthetic_end() -> str:
    """``DGB_MIRROR_SYNTHETIC_END`` (default empty: the site's start): end of the synthetic
    corpus's 5 years (``--synthetic-end``)."""
    return env_str("DGB_MIRROR_SYNTHETIC_END", "").strip()


def mirror_synthetic_extra_days() -> str:
    """``DGB_MIRROR_SYNTHETIC_EXTRA_DAYS`` (default empty: 0): days the synthetic corpus goes on
    publishing after its end (``--synthetic-extra-days``)."""
    return env_str("DGB_MIRROR_SYNTHETIC_EXTRA_DAYS", "").strip()


def mirror_synthetic_office() -> str:
    """``DGB_MIRROR_SYNTHETIC_OFFICE`` (default empty or ``0``: off): the synthetic corpus's extra
    days publish as a busy office day, at least N new articles in any 60 minutes
    (``--synthetic-office``; ``scripts/bench_realtime.py --profile office`` sets it)."""
    return env_str("DGB_MIRROR_SYNTHETIC_OFFICE", "").strip()


def model_service_threads() -> str:
    """The ``DGB_MODEL_THREADS`` the local stack gives its model service: as set, else one BLAS
    thread fewer than the machine has cores (at least 1), since the service shares them with
    Airflow, PostgreSQL and the tasks."""
    raw = env_str("DGB_MODEL_THREADS", "")
    return raw if raw.strip() else str(max(1, (os.cpu_count() or 1) - 1))


# -- Memory and start-up of the stack's processes -----------------------------------------------


def malloc_arena_max() -> str:
    """``DGB_MALLOC_ARENA_MAX`` (default 2; 0: glibc's own, eight per core): ``MALLOC_ARENA_MAX``
    of the stack's processes. Threaded Python servers (the api-server, the triggerer, the model
    service) otherwise keep an allocation arena per thread, memory they rarely give back."""
    value = env_number("DGB_MALLOC_ARENA_MAX", 2, integer=True, minimum=0, maximum=64)
    return "" if value == 0 else str(value)


def pubsub_java_options() -> str:
    """``DGB_PUBSUB_JAVA_OPTS``: the JVM options of the local Pub/Sub emulator (default: at most 160
    MiB of heap given back when unused, the serial collector, the quick compiler only: the emulator
    of one checkout holds a few thousand messages; its default JVM sizes itself for the machine).
    ``none``: no options."""
    default = (
        "-Xms16m -Xmx160m -XX:+UseSerialGC -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30"
        " -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=32m -Xss512k"
    )
    value = env_str("DGB_PUBSUB_JAVA_OPTS", default).strip()
    return "" if value.lower() == "none" else value


def airflow_serve_logs() -> bool:
    """``DGB_AIRFLOW_SERVE_LOGS`` (default off): the scheduler and the triggerer also start Airflow's
    log server (one more process each). The local stack's api-server reads the task and trigger
    logs from the shared log folder, so it is not needed on one machine."""
    return env_flag("DGB_AIRFLOW_SERVE_LOGS", False)


# -- Airflow and Celery -------------------------------------------------------------------------


def airflow_nice() -> int:
    """``DGB_AIRFLOW_NICE`` (default 10, 0-19): the CPU priority the local stack gives Airflow's
    processes (their tasks included), below the model service's, which a backlog waits on."""
    return env_number("DGB_AIRFLOW_NICE", 10, integer=True, minimum=0, maximum=19)


def dag_processor_nice() -> int:
    """``DGB_AIRFLOW_DAG_PROCESSOR_NICE`` (default 19, 0-19): the CPU priority of the local stack's
    DAG processor, which re-parses unchanged DAG files every 30 s; at the lowest priority its
    parsing waits while the pipeline's work keeps both cores busy (never below
    ``DGB_AIRFLOW_NICE``'s)."""
    own = env_number("DGB_AIRFLOW_DAG_PROCESSOR_NICE", 19, integer=True, minimum=0, maximum=19)
    return max(airflow_nice(), own)


def executor() -> str:
    """``DGB_EXECUTOR`` (default ``local``; ``celery``): the Airflow executor the stack runs on."""
    value = env_str("DGB_EXECUTOR", "").strip().lower() or "local"
    if value not in EXECUTORS:
        raise ValueError(f"DGB_EXECUTOR must be one of {', '.join(EXECUTORS)}, got {value!r}")
    return value


def executor_recycle() -> bool:
    """``DGB_EXECUTOR_RECYCLE`` (default on): the local stack's LocalExecutor forks worker processes
    from the scheduler only for queued tasks and ends each after its one task
    (:mod:`dgb_airflow.executors.recycling`), so no idle worker holds memory."""
    return env_flag("DGB_EXECUTOR_RECYCLE", True)


def redis_port() -> int:
    """``DGB_REDIS_PORT`` (default 6379 + ``DGB_PORT_BASE``): the Celery broker's port."""
    return env_number("DGB_REDIS_PORT", 6379 + env_number("DGB_PORT_BASE", 0, integer=True), integer=True)


def redis_password(state_dir: Path) -> str:
    """``DGB_REDIS_PASSWORD`` (default: the one generated into ``<state_dir>/secrets.env``)."""
    return env_str(
        "DGB_REDIS_PASSWORD", read_env_file(state_dir / "secrets.env").get("DGB_REDIS_PASSWORD", "")
    )


def celery_workers() -> int:
    """``DGB_CELERY_WORKERS`` (default 2, at least 1): Celery workers ``make up EXECUTOR=celery`` starts."""
    return env_number("DGB_CELERY_WORKERS", 2, integer=True, minimum=1)


def celery_concurrency() -> str:
    """``DGB_CELERY_CONCURRENCY`` (default 4): task processes per Celery worker."""
    return env_str("DGB_CELERY_CONCURRENCY", "4")
