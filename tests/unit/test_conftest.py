"""The root conftest: importing it sets the isolated test names and the Airflow environment and
writes nothing; pytest's start creates the local secrets when the checkout has none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_importing_the_root_conftest_writes_no_secrets(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DGB_", "AIRFLOW"))}
    env.update(
        DGB_STATE_DIR=str(tmp_path / "state"),
        PYTHONPATH=os.pathsep.join([str(REPO / p) for p in ("include", "plugins", "dev")] + [str(REPO)]),
    )
    code = (
        "import tests.conftest as c, os; "
        "print(os.environ['DGB_PG_DB'], os.environ['AIRFLOW_HOME'], c.TEST_PROFILE)"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr[-2000:]
    db, airflow_home, _profile = res.stdout.split()
    assert db == "dgb_test" and airflow_home == str(tmp_path / "state" / "airflow-test")
    assert not (tmp_path / "state").exists()  # no secrets file, no folder: nothing written


def test_a_fresh_checkout_gets_its_secrets_when_pytest_starts(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DGB_", "AIRFLOW"))}
    env.update(
        DGB_STATE_DIR=str(tmp_path / "state"),
        PYTHONPATH=os.pathsep.join([str(REPO / p) for p in ("include", "plugins", "dev")]),
    )
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/unit/reference/test_taxonomy.py",
            "-k",
            "nothing_matches_this",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 5, res.stdout[-2000:] + res.stderr[-2000:]  # 5: no test selected
    secrets = (tmp_path / "state" / "secrets.env").read_text()
    assert "DGB_PG_PASSWORD=" in secrets and "AIRFLOW__CORE__FERNET_KEY=" in secrets


def test_the_session_runs_with_the_test_names_and_its_own_airflow_home():
    state = Path(os.environ["DGB_STATE_DIR"]) if os.environ.get("DGB_STATE_DIR") else None
    assert os.environ["DGB_PG_DB"] == os.environ.get("DGB_TEST_PG_DB", "dgb_test")
    assert os.environ["DGB_TYPESENSE_COLLECTION"] == os.environ.get(
        "DGB_TEST_TYPESENSE_COLLECTION", "test_news"
    )
    assert os.environ["AIRFLOW_HOME"].endswith("airflow-test")
    assert os.environ["AIRFLOW__CORE__FERNET_KEY"]
    if state is not None:
        assert (state / "secrets.env").is_file()
        assert Path(os.environ["AIRFLOW_HOME"]) == state / "airflow-test"
