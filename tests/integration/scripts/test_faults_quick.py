"""The reduced fault-injection run (`make faults QUICK=1`) on the real local stack.

It kills and restarts stack components (triggerer, scheduler, a task, the model service,
Typesense, the Pub/Sub emulator, PostgreSQL), then keeps Typesense, the model service and the
emulator down and the Bedrock fake throttling for minutes each, so it runs only when asked:
DGB_RUN_FAULTS=1 (CI runs the same command from .ci/run).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))  # scripts/ is not a package: its faultsuite is

from faultsuite.catalogue import FAULTS  # noqa: E402
from faultsuite.report import LAST_LINE  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.stack,
    pytest.mark.skipif(
        os.environ.get("DGB_RUN_FAULTS") != "1",
        reason="fault injection restarts the local stack's components (PostgreSQL, Pub/Sub "
        "emulator, Typesense, Airflow, model service); set DGB_RUN_FAULTS=1 to run it",
    ),
]


@pytest.mark.timeout(3600)
def test_quick_fault_injection_loses_duplicates_and_dead_letters_nothing():
    # the run works on the local stack's own settings, not the test suite's isolated ones
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            (
                "AIRFLOW",
                "DGB_PG_DB",
                "DGB_PG_AIRFLOW_DB",
                "DGB_GCP_PROJECT",
                "DGB_TYPESENSE_COLLECTION",
                "PUBSUB_EMULATOR_HOST",
            )
        )
    }
    res = subprocess.run(
        ["make", "faults", "QUICK=1"], cwd=REPO, env=env, capture_output=True, text=True, timeout=3500
    )
    lines = [line for line in res.stdout.splitlines() if line.strip()]
    assert lines, f"no output; stderr tail:\n{res.stderr[-3000:]}"
    last = lines[-1]
    m = re.fullmatch(LAST_LINE, last)
    assert m, f"unexpected last line {last!r}; stderr tail:\n{res.stderr[-3000:]}"
    per_fault = [line for line in lines if line.startswith("fault=")]
    assert [line.split()[0].removeprefix("fault=") for line in per_fault] == list(FAULTS), per_fault
    counts = (int(m["lost"]), int(m["duplicated"]), int(m["dead_lettered_healthy"]))
    assert counts == (0, 0, 0), "\n".join(lines) + "\n" + res.stderr[-3000:]
    assert res.returncode == 0, "\n".join(lines)
