"""What one fault run shares with all its parts: its options and id, the stack's settings, the
connections to PostgreSQL (pipeline and Airflow databases) and Typesense, the Bedrock fake."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from dgb.config import Settings
from dgb_dev import stack

from .plumbing import Db


@dataclass
class Context:
    args: Any  # the parsed command line (faults.py)
    run_id: str
    s: Settings
    db: Db  # the pipeline's database
    af: Db  # Airflow's metadata database
    ts: Any = None  # the Typesense client, once the stack is up (components.Components.ensure_stack)
    bedrock: Any = None  # the Bedrock fake (dgb_dev.bedrock_fake), started for bedrock_throttle

    @classmethod
    def create(cls, args) -> Context:
        settings = stack.ensure_secrets(Settings.from_env())
        os.environ["PUBSUB_EMULATOR_HOST"] = settings.pubsub_emulator_host
        return cls(
            args=args,
            run_id=uuid.uuid4().hex[:6],
            s=settings,
            db=Db(settings.pg_dsn()),
            af=Db(settings.pg_dsn(settings.pg_airflow_db)),
        )

    @classmethod
    def for_chaos(cls, settings: Settings, keep: bool = False) -> Context:
        """The context of a chaos run (bench_soak.py, bench_chaos.py) on a stack already up with
        ``settings``: the fault suite's options it reads, none of its batches."""
        return cls(
            args=SimpleNamespace(quick=False, only=None, outage_s=None, keep=keep),
            run_id=uuid.uuid4().hex[:6],
            s=settings,
            db=Db(settings.pg_dsn()),
            af=Db(settings.pg_dsn(settings.pg_airflow_db)),
        )

    @property
    def quick(self) -> bool:
        return self.args.quick

    @property
    def tag(self) -> str:
        """In every title and unique id of the run's articles (and poison ids)."""
        return f"falha-{self.run_id}"
