"""Task processes that end with their supervisor.

Airflow 3 runs each task in a process forked by a supervisor (the LocalExecutor's worker, a Celery
worker's child), and gives it a process group of its own, so that the supervisor can signal the
task's whole tree. The other side of that: when the supervisor dies (the scheduler killed with its
workers, a Celery worker killed), nothing kills the task. It goes on without logs or heartbeats;
Airflow, hearing nothing, fails the task instance and schedules the next run, and the two run at
once. For a stage run that can linger for minutes that breaks ``max_active_runs=1``: in a chaos run
an orphaned index run and its successor both indexed the same articles.

:class:`TiedToSupervisor` asks Linux to kill the task process (SIGKILL) when its parent ends
(``prctl(PR_SET_PDEATHSIG)``), before the operator's ``execute`` starts. Killing it is what a
crash of the task does anyway: its open transaction rolls back, its messages were acked only after
their events were stored, and every stage write is guarded by the article's version. Elsewhere
than Linux it does nothing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import Any

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent() -> bool:
    """SIGKILL this process when the process that forked it ends; False where Linux's ``prctl``
    is not available (the request is then not made)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def tie_to_parent() -> bool:
    """:func:`die_with_parent`, and end at once if the parent already ended in between (the
    request only covers a death after it is made)."""
    parent = os.getppid()
    tied = die_with_parent()
    if tied and os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)
    return tied


class TiedToSupervisor:
    """Operator mixin (before ``BaseOperator`` in the bases): the task process dies with its
    supervisor (module doc)."""

    def pre_execute(self, context: Any):
        tie_to_parent()
        return super().pre_execute(context)
