"""What every component of the local stack is: :class:`Component` (healthy, up, down, describe) and
:class:`ManagedProcess`, a component that is one process group of ours listening on one port."""

from __future__ import annotations

import os

from dgb.config import Settings
from dgb_dev.stack.process import Proc, StackError, port_open, wait_until


class Component:
    name = ""

    def __init__(self, settings: Settings):
        self.s = settings

    def healthy(self) -> bool:
        raise NotImplementedError

    def up(self) -> str:
        raise NotImplementedError

    def down(self) -> bool:
        return False

    def describe(self) -> str:
        return self.name


class ManagedProcess(Component):
    """A component that is one process (group) of ours, listening on one port."""

    host = "127.0.0.1"
    start_timeout = 60.0

    @property
    def port(self) -> int:
        raise NotImplementedError

    def argv(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def nice(self) -> int:
        """The CPU priority it runs at (0: the default)."""
        return 0

    def prepare(self) -> None:
        """Work before spawning (directories, binaries)."""

    @property
    def proc(self) -> Proc:
        return Proc(self.name, self.s)

    def up(self) -> str:
        if self.proc.alive():
            if self.healthy():
                return "already running"
            wait_until(self.healthy, self.start_timeout, self.name, self.proc.log_file, self.proc.alive)
            return "already running (became healthy)"
        if port_open(self.host, self.port):
            if self.healthy():
                raise StackError(
                    f"{self.name}: port {self.port} answers like {self.name} but was not started by this "
                    f"checkout (no live pid in {self.proc.pid_file}); stop it, or set another port "
                    f"(see README, configuration)."
                )
            raise StackError(
                f"{self.name}: port {self.host}:{self.port} is taken by another program; free it or set "
                f"another port (see README, configuration)."
            )
        self.prepare()
        self.proc.spawn(self.argv(), self.env(), nice=self.nice())
        wait_until(self.healthy, self.start_timeout, self.name, self.proc.log_file, self.proc.alive)
        return f"started (pid {self.proc.pid()})"

    def up_portless(self) -> str:
        """``up`` for a process that owns no port (checked some other way): reuse the live one,
        else start it; either way wait until it is healthy."""
        if self.proc.alive():
            wait_until(self.healthy, self.start_timeout, self.name, self.proc.log_file, self.proc.alive)
            return "already running"
        self.proc.spawn(self.argv(), self.env(), nice=self.nice())
        wait_until(self.healthy, self.start_timeout, self.name, self.proc.log_file, self.proc.alive)
        return f"started (pid {self.proc.pid()})"

    def down(self) -> bool:
        return self.proc.stop()
