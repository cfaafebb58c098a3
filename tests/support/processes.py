"""Stopping the servers tests start as OS processes; running Python code in a fresh interpreter."""

from __future__ import annotations

import os
import signal
import subprocess
import sys


def stop_process_group(proc) -> None:
    """Stop a server started with ``start_new_session=True``: SIGTERM to its group, SIGKILL after 15 s."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def run_python(code: str, *args: str, timeout: float = 120) -> str:
    """Run ``code`` in a fresh interpreter with this test process's import path; its last line of
    output (the run must succeed: its stderr is the assertion's message)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    return lines[-1] if lines else ""
