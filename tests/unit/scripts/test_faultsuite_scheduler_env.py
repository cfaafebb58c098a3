"""The faults' settings are the run's: their union, applied once (faultsuite.scheduler_env). A
stopped scheduler inherits them without a restart; conflicting settings are refused."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))  # scripts/ is not a package: its faultsuite is

from faultsuite import scheduler_env  # noqa: E402
from faultsuite.scheduler_env import SchedulerEnv  # noqa: E402


class Bedrock:
    def aws_conn(self) -> dict:
        return {"conn_type": "aws", "extra": {"endpoint_url": "http://127.0.0.1:1"}}


def env_of(classifier: str = "bedrock") -> SchedulerEnv:
    return SchedulerEnv(
        SimpleNamespace(args=SimpleNamespace(bedrock_classifier=classifier), bedrock=Bedrock())
    )


def test_run_env_is_the_union_of_the_faults_settings():
    env = env_of().run_env(["kill_triggerer", "model_down", "bedrock_throttle", "emulator_down"])
    assert env["DGB_EMBEDDER"] == "service"
    assert env["DGB_CLASSIFIER"] == "bedrock"
    assert env["DGB_AWS_CONN_ID"] == "dgb_bedrock_fake"
    assert env_of().run_env(["kill_triggerer", "typesense_down"]) == {}


def test_conflicting_settings_are_refused(monkeypatch):
    se = env_of()
    monkeypatch.setattr(se, "fault_env", lambda f: {"DGB_EMBEDDER": "service" if f == "a" else "local"})
    with pytest.raises(ValueError, match="DGB_EMBEDDER two ways"):
        se.run_env(["a", "b"])


def test_adopt_without_a_running_scheduler_sets_the_environment_and_restarts_nothing(monkeypatch):
    monkeypatch.setenv("DGB_EMBEDDER", "auto")
    restarted = []
    monkeypatch.setattr(scheduler_env.stack, "component", lambda s, name: restarted.append(name))
    se = env_of()
    se.adopt({"DGB_EMBEDDER": "service"}, scheduler_running=False)
    assert os.environ["DGB_EMBEDDER"] == "service"
    assert restarted == []
    assert se.applied == {"DGB_EMBEDDER": "service"}
    # the stack's own value comes back when {} is applied (cleanup): a restart then
    monkeypatch.setattr(scheduler_env, "running_task", lambda *a: None)
    monkeypatch.setattr(scheduler_env, "log", lambda msg: None)
    comp = SimpleNamespace(down=lambda: restarted.append("down"), up=lambda: restarted.append("up"))
    monkeypatch.setattr(scheduler_env.stack, "component", lambda s, name: comp)
    se.ctx.af = None
    se.ctx.s = None
    se.apply({})
    assert os.environ["DGB_EMBEDDER"] == "auto"
    assert restarted == ["down", "up"]
