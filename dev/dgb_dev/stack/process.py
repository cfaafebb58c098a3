"""The processes the local stack owns: pid files, log files, process groups, CPU priority, and
waiting for a component to answer.

Every process we start gets a pid file under ``<state_dir>/run`` and a log file under
``<state_dir>/logs``, and its own session (process group == pid), so stopping it stops its children.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dgb.config import REPO_ROOT, Settings
from dgb.config import dev as dev_settings


class StackError(RuntimeError):
    """A component could not be started or checked; the message says what to do."""


def log(msg: str) -> None:
    print(f"[stack] {msg}", flush=True)


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def http_ok(url: str, timeout: float = 2.0, expect: Callable[[bytes], bool] | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = resp.read(65536)
            return resp.status == 200 and (expect is None or expect(body))
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    what: str,
    log_file: Path | None = None,
    alive: Callable[[], bool] | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if alive is not None and not alive():
            raise StackError(f"{what} exited during start-up{_log_tail(log_file)}")
        time.sleep(0.3)
    raise StackError(f"{what} not healthy after {timeout:.0f}s{_log_tail(log_file)}")


def _log_tail(log_file: Path | None, lines: int = 15) -> str:
    if not log_file or not log_file.exists():
        return ""
    tail = log_file.read_text(errors="replace").splitlines()[-lines:]
    return f"; last lines of {log_file}:\n  " + "\n  ".join(tail)


def lower_priority(pid: int, nice: int) -> None:
    """Give a process we just started (its own session) the CPU priority ``nice`` (0-19), best
    effort: its session's autogroup and the process itself, which its threads and children
    inherit. With the kernel's autogroups on (most distributions), the scheduler first shares the
    CPU equally between sessions, whatever each thread's nice, so the autogroup's nice is the one
    that counts; without them the per-process one does."""
    try:
        with open(f"/proc/{pid}/autogroup", "w") as fh:
            fh.write(str(nice))
    except OSError:
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, pid, nice)
    except OSError:
        pass


@dataclass
class Proc:
    """A background process we own: pid file + log file + health check."""

    name: str
    settings: Settings

    @property
    def pid_file(self) -> Path:
        return self.settings.state_dir / "run" / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.settings.state_dir / "logs" / f"{self.name}.log"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        if _is_zombie(pid):
            return None
        return pid

    def alive(self) -> bool:
        return self.pid() is not None

    def spawn(self, argv: list[str], env: dict[str, str], cwd: Path | None = None, *, nice: int = 0) -> int:
        """Start the process (its own session: pgid == pid) unless a live one is recorded: the
        check and the start hold a lock on ``<name>.lock``, so the watchdog and another starter
        (`up`, the fault suite) never run two copies. ``nice``: its CPU priority (see
        :func:`lower_priority`). Returns the pid."""
        import fcntl

        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.pid_file.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            running = self.pid()
            if running is not None:
                return running
            pid = self._spawn(argv, env, cwd)
            if nice:
                lower_priority(pid, nice)
            return pid

    def _spawn(self, argv: list[str], env: dict[str, str], cwd: Path | None) -> int:
        env = service_env(env)
        with open(self.log_file, "ab") as out:
            out.write(
                f"\n--- {time.strftime('%Y-%m-%dT%H:%M:%S')} starting: {' '.join(map(str, argv))}\n".encode()
            )
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=str(cwd or REPO_ROOT),
                start_new_session=True,
            )
        self.pid_file.write_text(str(proc.pid))
        return proc.pid

    def stop(self, timeout: float = 20.0) -> bool:
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        _killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and group_alive(pid):
            time.sleep(0.2)
        if group_alive(pid):
            _killpg(pid, signal.SIGKILL)
            time.sleep(0.3)
        self.pid_file.unlink(missing_ok=True)
        return True


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return False


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # spawned with start_new_session: pgid == pid
    except ProcessLookupError:
        pass


def group_alive(pgid: int) -> bool:
    """Whether any process of the group ``pgid`` is still there (zombies aside)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def service_env(env: dict[str, str]) -> dict[str, str]:
    """The environment a long-running process of the stack starts with: Python writes its
    bytecode (the venv is installed without ``.pyc`` and a shell may set
    ``PYTHONDONTWRITEBYTECODE``: then every Airflow task process compiled every module it imported,
    ~1 s each), and glibc keeps few allocation arenas (``DGB_MALLOC_ARENA_MAX``)."""
    out = dict(env)
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    arenas = dev_settings.malloc_arena_max()
    if arenas:
        out.setdefault("MALLOC_ARENA_MAX", arenas)
    return out
