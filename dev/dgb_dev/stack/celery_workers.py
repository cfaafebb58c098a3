"""The Airflow Celery workers of ``DGB_EXECUTOR=celery`` (``make up EXECUTOR=celery``)."""

from __future__ import annotations

import time

from dgb.config import Settings
from dgb.config import dev as dev_settings
from dgb_dev.stack.airflow import AirflowPart, airflow_bin, airflow_env
from dgb_dev.stack.broker import celery_env
from dgb_dev.stack.component import ManagedProcess
from dgb_dev.stack.process import StackError, log


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
        return dev_settings.airflow_nice()

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
        return self.up_portless()

    def describe(self) -> str:
        return (
            f"celery worker {self.index} (CeleryExecutor, broker redis 127.0.0.1:{dev_settings.redis_port()})"
        )


def celery_workers(settings: Settings) -> list[CeleryWorker]:
    return [CeleryWorker(settings, i) for i in range(1, dev_settings.celery_workers() + 1)]


def check_executor_matches(settings: Settings) -> None:
    """A running scheduler keeps its executor: switching needs `make down` first."""
    if not AirflowPart(settings, "scheduler").proc.alive():
        return
    running = "celery" if any(w.proc.alive() for w in celery_workers(settings)) else "local"
    wanted = dev_settings.executor()
    if running != wanted:
        raise StackError(
            f"the running stack uses the {running} executor, {wanted} was asked: run `make down` first"
        )


def up_celery(settings: Settings) -> None:
    """The broker and the workers (after the Airflow components: workers talk to the api-server)."""
    for worker in celery_workers(settings):
        t1 = time.monotonic()
        log(f"{worker.name}: {worker.up()} in {time.monotonic() - t1:.1f}s")
