"""Stopping the servers tests start as OS processes."""

from __future__ import annotations

import os
import signal
import subprocess


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
