"""What the chaos run observes of a process it crashed (kill -9) and of the port it served: a fault
counts only once it is seen to have happened, so each kill is followed by a look at ``/proc`` and a
loopback connect.

Also where the PostgreSQL postmaster's pid is read (the cluster's ``postmaster.pid``): PostgreSQL
is not a process of ours (Debian's ``pg_ctlcluster`` starts it), so it has no pid file of the stack.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import time
from pathlib import Path


def proc_state(pid: int) -> str | None:
    """The state letter of ``/proc/<pid>/stat`` (``R``, ``S``, ``T`` stopped, ``Z`` zombie, ...),
    or None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def pid_gone(pid: int) -> bool:
    """Dead: no such process, or a zombie (dead, only not yet reaped by its parent; the parent of
    a component restarted by this process is this process)."""
    return proc_state(pid) in (None, "Z")


def port_refuses(port: int, timeout: float = 1.0) -> bool:
    """Whether a TCP connect to 127.0.0.1:``port`` is refused (nothing listens). A connect that
    succeeds, or times out (a stopped listener's backlog), is not a refusal."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            code = sock.connect_ex(("127.0.0.1", port))
        except OSError as exc:
            code = exc.errno
    return code == errno.ECONNREFUSED


def confirm_dead(pid: int | None, port: int | None, within_s: float = 20.0) -> tuple[bool, str]:
    """Wait (at most ``within_s``) until ``pid`` is gone and, if given, ``port`` refuses; what
    was seen, for the fault's record. No pid (it was not known) is not confirmed."""
    deadline = time.monotonic() + within_s
    while True:
        gone = pid is not None and pid_gone(pid)
        refused = port is None or port_refuses(port)
        if (gone and refused) or time.monotonic() >= deadline or pid is None:
            break
        time.sleep(0.1)
    if pid is None:
        seen = "no pid known"
    else:
        seen = f"pid {pid} {'gone' if gone else f'still there (state {proc_state(pid)})'}"
    if port is not None:
        seen += f", 127.0.0.1:{port} {'refused' if refused else 'not refused'}"
    return gone and refused, seen


def kill9(pid: int, group: bool = False) -> None:
    """SIGKILL ``pid`` (``group``: its whole process group, a process of ours started in its own
    session); a process already gone is no error."""
    try:
        if group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def cluster_data_dir(version: str, name: str) -> Path:
    """The Debian cluster's data directory, as ``pg_lsclusters`` lists it (the packaging default
    when that cannot be read)."""
    try:
        out = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[0] == version and cols[1] == name:
            return Path(cols[5])
    return Path("/var/lib/postgresql") / version / name


def postmaster_pid(data_dir: Path) -> int | None:
    """The postmaster's pid, from the first line of ``<data_dir>/postmaster.pid``, if that process
    is alive (the file outlives a crashed postmaster)."""
    try:
        pid = int((data_dir / "postmaster.pid").read_text().split("\n", 1)[0].strip())
    except (OSError, ValueError):
        return None
    return None if pid_gone(pid) else pid
