"""The project's own HTTP services in the local stack, each run as ``dgb ... serve``: the local
gov.br-like site (:class:`Mirror`) and the embedding model service (:class:`ModelService`)."""

from __future__ import annotations

import sys

from dgb.config import dev as dev_settings
from dgb_dev.stack.component import ManagedProcess
from dgb_dev.stack.process import http_ok


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
        tick = dev_settings.mirror_tick()
        if tick:
            argv += ["--tick", tick]
        if dev_settings.mirror_journal_base():
            argv.append("--journal-base")
        newest_age = dev_settings.mirror_base_newest_age()
        if newest_age:
            argv += ["--base-newest-age", newest_age]
        # production scale (scripts/bench_realtime.py): N synthetic articles, see dgb_dev.mirror.synthetic
        synthetic = dev_settings.mirror_synthetic()
        if synthetic and synthetic != "0":
            argv += ["--synthetic", synthetic]
            for value, flag in (
                (dev_settings.mirror_synthetic_end(), "--synthetic-end"),
                (dev_settings.mirror_synthetic_extra_days(), "--synthetic-extra-days"),
                (dev_settings.mirror_synthetic_office(), "--synthetic-office"),
            ):
                if value:
                    argv += [flag, value]
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
        return {
            **super().env(),
            "DGB_MODEL_THREADS": dev_settings.model_service_threads(),
            # its bearer token is the one in this stack's secrets.env (dgb.embed.auth)
            "DGB_STATE_DIR": str(self.s.state_dir),
        }

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
