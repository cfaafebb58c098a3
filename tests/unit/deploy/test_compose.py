"""docker-compose.yaml, parsed (the project's machines have no `docker compose`): the settings the
local stack gets right must hold in the compose stack too: the local site on a host its CLI
accepts, required secrets (no empty Fernet key), the 60 s task heartbeat timeout, and services
that come back when they exit."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from dgb_dev.mirror.cli import _loopback, register

REPO = Path(__file__).resolve().parents[3]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yaml").read_text())
SERVICES = COMPOSE["services"]
LONG_RUNNING = ("airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")


def _commands() -> dict[str, str]:
    out = {}
    for name, svc in SERVICES.items():
        cmd = svc.get("command")
        out[name] = " ".join(cmd) if isinstance(cmd, list) else (cmd or "")
    return out


def _mirror_invocations(command: str) -> list[list[str]]:
    """Each `dgb.cli mirror serve ...` in a service command, as argv after `mirror`."""
    found = []
    for m in re.finditer(r"dgb\.cli (mirror serve[^;&|]*)", command.replace("$$", "$")):
        found.append(shlex.split(m.group(1)))
    return found


def test_the_local_site_binds_a_host_its_cli_accepts_and_the_tasks_reach_it_there():
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    runs = {name: _mirror_invocations(cmd) for name, cmd in _commands().items()}
    runs = {name: found for name, found in runs.items() if found}
    # beside the tasks: the scheduler (LocalExecutor) and every Celery worker
    assert set(runs) == {"airflow-scheduler", "airflow-worker"}
    for name, found in runs.items():
        for argv in found:
            args = parser.parse_args(argv)
            assert _loopback(args.host), f"{name}: mirror on {args.host}, which `dgb mirror serve` refuses"
    url = SERVICES["airflow-scheduler"]["environment"]["DGB_MIRROR_URL"]
    assert re.fullmatch(r"http://127\.0\.0\.1:8090", url)
    assert "mirror" not in SERVICES  # no separate container: it would have to bind a non-loopback host


def test_secrets_are_required_never_empty():
    env = SERVICES["airflow-scheduler"]["environment"]
    for key in ("AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__API_AUTH__JWT_SECRET"):
        assert re.fullmatch(rf"\$\{{{key}:\?[^}}]+\}}", env[key]), f"{key} must be required: {env[key]}"


def test_heartbeat_timeout_and_restarts():
    env = SERVICES["airflow-scheduler"]["environment"]
    assert env["AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT"].endswith(":-60}")
    assert env["AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL"].endswith(":-30}")
    for name in (*LONG_RUNNING, "airflow-worker"):
        assert SERVICES[name]["restart"] == "unless-stopped", name
    assert SERVICES["airflow-init"]["restart"] == "no"


@pytest.mark.skipif(
    shutil.which("docker") is None
    or subprocess.run(["docker", "compose", "version"], capture_output=True).returncode != 0,
    reason="no `docker compose` on this machine",
)
def test_docker_compose_config_refuses_a_missing_fernet_key(tmp_path):
    env = {"DGB_PG_PASSWORD": "p", "DGB_TYPESENSE_API_KEY": "k", "AIRFLOW__API_AUTH__JWT_SECRET": "j"}
    (tmp_path / ".env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    base = [
        "docker",
        "compose",
        "-f",
        str(REPO / "docker-compose.yaml"),
        "--env-file",
        str(tmp_path / ".env"),
    ]
    res = subprocess.run([*base, "config", "-q"], capture_output=True, text=True)
    assert res.returncode != 0 and "AIRFLOW__CORE__FERNET_KEY" in res.stderr
    with open(tmp_path / ".env", "a") as f:
        f.write("AIRFLOW__CORE__FERNET_KEY=x\n")
    assert subprocess.run([*base, "config", "-q"], capture_output=True).returncode == 0
