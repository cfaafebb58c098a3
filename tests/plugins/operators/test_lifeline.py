"""Task processes end with their supervisor (dgb_airflow.operators.lifeline): real processes, a
"supervisor" killed with SIGKILL as a scheduler's process group is in a chaos run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dgb_airflow.operators import lifeline

PLUGINS = str(Path(lifeline.__file__).resolve().parents[2])

# a supervisor forks two task processes, each in its own process group as Airflow's task runner
# puts them; the first ties itself to the supervisor, the second does not. Both print their pid.
SUPERVISOR = f"""
import os, sys, time
sys.path.insert(0, {PLUGINS!r})
from dgb_airflow.operators.lifeline import tie_to_parent
for tied in (True, False):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.setpgid(0, 0)
        if tied:
            tie_to_parent()
        os.write(w, b"ready")
        time.sleep(120)
        os._exit(0)
    os.close(w)
    os.read(r, 5)
    print(pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's")
def test_a_tied_task_process_dies_with_its_supervisor():
    sup = subprocess.Popen([sys.executable, "-c", SUPERVISOR], stdout=subprocess.PIPE, text=True)
    tied = untied = None
    try:
        tied, untied = int(sup.stdout.readline()), int(sup.stdout.readline())
        assert _alive(tied) and _alive(untied)
        os.kill(sup.pid, signal.SIGKILL)
        sup.wait(10)
        deadline = time.monotonic() + 10
        while _alive(tied) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(tied), "the tied task process outlived its supervisor"
        assert _alive(untied)  # what Airflow leaves behind without the tie: an orphan, still running
    finally:
        for pid in (sup.pid, tied, untied):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def test_every_long_running_operator_ties_its_task_before_execute(monkeypatch):
    from dgb_airflow.operators.engagement import EngagementImportOperator, TrendingOperator
    from dgb_airflow.operators.integrity import IntegrityBudgetOperator, IntegrityTierOperator
    from dgb_airflow.operators.outbox import OutboxRelayOperator
    from dgb_airflow.operators.reconcile import ReconcileOperator, RedriveOperator, ReplayOperator
    from dgb_airflow.operators.scrape import ScrapeAgencyOperator, ScrapeDispatchOperator
    from dgb_airflow.operators.stage import StageOperator

    calls = []
    monkeypatch.setattr(lifeline, "tie_to_parent", lambda: calls.append(True) or True)
    operators = (
        EngagementImportOperator,
        TrendingOperator,
        IntegrityBudgetOperator,
        IntegrityTierOperator,
        OutboxRelayOperator,
        ReconcileOperator,
        RedriveOperator,
        ReplayOperator,
        ScrapeAgencyOperator,
        ScrapeDispatchOperator,
        StageOperator,
    )
    for op in operators:
        assert issubclass(op, lifeline.TiedToSupervisor), op
        op.pre_execute(object.__new__(op), {})  # what the task runner calls before execute()
    assert len(calls) == len(operators)
