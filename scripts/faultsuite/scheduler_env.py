"""The faults' settings for the stage tasks (model_down: ``DGB_EMBEDDER=service``; bedrock_throttle:
the Bedrock fake as ``DGB_CLASSIFIER``'s backend). The tasks inherit the scheduler's environment.

The run's faults' settings together are applied once, before the first batch (:meth:`run_env`,
:meth:`adopt`): a scheduler that is not running yet is started with them by the stack's start, a
running one is restarted with them once no stage task runs. Every batch then runs on the same
settings, which are what production runs (the stages on the model service, Bedrock behind the
classifier). Restarting the scheduler between faults instead cost a wait each time for the stage
tasks still warm (``DGB_STAGE_LINGER_S``, 60 s): three waits, about 3.5 minutes of CI. The stack's
own settings come back at the end (cleanup)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

from dgb_dev import stack

from .airflow_tasks import running_task
from .catalogue import BEDROCK_CONN_ID, STAGE_DAGS
from .context import Context
from .plumbing import Timeout, log, wait_for


class SchedulerEnv:
    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.saved: dict[str, str | None] = {}  # os.environ values a fault's settings replaced
        self.applied: dict[str, str] = {}  # the settings the scheduler runs with now

    def fault_env(self, fault: str | None) -> dict[str, str]:
        """Settings the stage tasks need for a fault (they inherit the scheduler's environment)."""
        if fault == "model_down":
            # what production runs: the stages use the model service and never load the model
            # themselves (DGB_EMBEDDER=auto would load it in every task while the service is down)
            return {"DGB_EMBEDDER": "service"}
        if fault == "bedrock_throttle":
            env = {
                "DGB_CLASSIFIER": self.ctx.args.bedrock_classifier,
                "DGB_AWS_CONN_ID": BEDROCK_CONN_ID,
                f"AIRFLOW_CONN_{BEDROCK_CONN_ID.upper()}": json.dumps(self.ctx.bedrock.aws_conn()),
                "DGB_BEDROCK_CONCURRENCY": "4",
            }
            if self.ctx.args.bedrock_classifier == "hybrid":
                env["DGB_HYBRID_THRESHOLD"] = "1.0"  # every article goes on to Bedrock
            return env
        return {}

    def run_env(self, faults: list[str]) -> dict[str, str]:
        """The settings of all ``faults`` together (they never set one name two ways)."""
        env: dict[str, str] = {}
        for fault in faults:
            for k, v in self.fault_env(fault).items():
                if env.get(k, v) != v:
                    raise ValueError(f"faults set {k} two ways: {env[k]!r} and {v!r}")
                env[k] = v
        return env

    def adopt(self, env: dict[str, str], scheduler_running: bool) -> None:
        """Run the scheduler with ``env`` from now on: a scheduler not running yet just inherits it
        when the stack starts it (no restart, no wait); a running one is restarted (:meth:`apply`)."""
        if scheduler_running:
            self.apply(env)
            return
        self.saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        self.applied = dict(env)

    def apply(self, env: dict[str, str]) -> None:
        """Run the scheduler (and so every task) with ``env`` on top of the stack's own settings;
        {} restores them. A restart, once no stage task runs (bounded wait)."""
        if env == self.applied:
            return
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self.saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        self.applied = dict(env)
        try:
            wait_for(
                lambda: not running_task(self.ctx.af, STAGE_DAGS, datetime.now(UTC) - timedelta(hours=1)),
                90,
                "no stage task running",
                every=1,
            )
        except Timeout as exc:
            log(f"{exc}; restarting the scheduler anyway")
        what = ", ".join(f"{k}={v}" for k, v in env.items() if not k.startswith("AIRFLOW_CONN"))
        log(f"restarting the scheduler with {what or 'the stack defaults'}")
        comp = stack.component(self.ctx.s, "airflow-scheduler")
        comp.down()
        comp.up()
