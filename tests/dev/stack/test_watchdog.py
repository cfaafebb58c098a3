"""The stack runner's watchdog: an Airflow component that exits is restarted, with backoff, a log
line and a count `status` shows; one stopped on purpose is left alone. Exercised on a real
process (a small HTTP server on a loopback port of this checkout's DGB_PORT_BASE) killed with
SIGKILL, as PostgreSQL's restart kills the triggerer."""

from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import replace

import pytest

from dgb.config import Settings
from dgb_dev.stack.airflow import AirflowPart
from dgb_dev.stack.celery_workers import CeleryWorker
from dgb_dev.stack.component import ManagedProcess
from dgb_dev.stack.process import group_alive, http_ok, port_open, wait_until
from dgb_dev.stack.watchdog import (
    Watchdog,
    print_watchdog_status,
    start_watchdog,
    stop_watchdog,
    watchdog_proc,
    watchdog_restarts,
    watchdog_state_file,
)

# ports of the stack are <default> + DGB_PORT_BASE (multiples of 100 between checkouts); ...77
# is no default port's ending, so this never meets another checkout's server
PORT = 8177 + int(os.environ.get("DGB_PORT_BASE", "0") or 0)


class LoopbackServer(ManagedProcess):
    """A stand-in component: a real process serving HTTP on 127.0.0.1:PORT."""

    name = "airflow-standin"
    start_timeout = 30.0

    @property
    def port(self) -> int:
        return PORT

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(PORT)]

    def healthy(self) -> bool:
        return http_ok(f"http://127.0.0.1:{PORT}/")


@pytest.fixture
def component(tmp_path):
    s = replace(Settings.from_env(), state_dir=tmp_path)
    comp = LoopbackServer(s)
    assert not port_open("127.0.0.1", PORT), f"port {PORT} is taken: free it for this test"
    comp.up()
    yield comp
    comp.down()


def _kill(comp) -> int:
    pid = comp.proc.pid()
    os.killpg(pid, signal.SIGKILL)
    # the killed group itself, not "no live pid recorded": a watchdog polling every 0.1 s may
    # record its replacement before this loop's first look
    wait_until(lambda: not group_alive(pid), 10, "the killed server to go")
    return pid


def test_a_killed_component_is_restarted_with_backoff_and_counted(component, capsys):
    dog = Watchdog(component.s, [component], poll=0.1, initial=0.2, maximum=0.4, stable_after=3600)
    stop = threading.Event()
    runner = threading.Thread(target=dog.run, args=(stop,), daemon=True)
    runner.start()
    try:
        first = _kill(component)
        wait_until(lambda: component.proc.alive() and component.healthy(), 30, "the restart")
        second = component.proc.pid()
        assert second != first
        _kill(component)
        wait_until(lambda: component.proc.alive() and component.healthy(), 30, "the 2nd restart")
        _kill(component)
        wait_until(lambda: component.proc.alive() and component.healthy(), 30, "the 3rd restart")
    finally:
        stop.set()
        runner.join(10)
    w = dog.state[component.name]
    assert w.restarts == 3 and w.delays == [0.2, 0.4, 0.4]  # doubled, capped at the maximum
    assert watchdog_restarts(component.s)[component.name]["restarts"] == 3
    out = capsys.readouterr().out
    assert f"watchdog: {component.name} exited; restarting in" in out
    assert out.count(f"watchdog: {component.name} restarted (pid") == 3
    print_watchdog_status(component.s)
    assert f"{component.name}: 3 restart(s)" in capsys.readouterr().out


def test_a_component_that_stays_up_starts_over_at_the_first_delay(component):
    dog = Watchdog(component.s, [component], initial=5, maximum=60, stable_after=100)
    _kill(component)
    assert dog.check_once(now=0.0) == []  # exited: a restart is due in 5 s
    assert dog.check_once(now=5.0) == [component.name]
    wait_until(component.healthy, 30, "the restart")
    assert dog.check_once(now=200.0) == []  # up for 195 s: stable
    _kill(component)
    dog.check_once(now=201.0)
    assert dog.state[component.name].delays == [5, 5]


def test_a_component_stopped_on_purpose_is_left_alone(component):
    dog = Watchdog(component.s, [component], initial=0, poll=0.1)
    assert component.down() is True  # `make down` stops the watchdog first, then the components
    assert dog.check_once() == [] and dog.check_once() == []
    assert not component.proc.alive() and dog.state[component.name].restarts == 0


def test_up_and_down_start_and_stop_the_watchdog_process(tmp_path):
    s = replace(Settings.from_env(), state_dir=tmp_path)
    assert start_watchdog(s).startswith("started")
    assert start_watchdog(s).startswith("already running")
    proc = watchdog_proc(s)
    wait_until(lambda: "watchdog: watching" in proc.log_file.read_text(), 60, "the watchdog")
    assert stop_watchdog(s) is True and not proc.alive()
    assert "watchdog: stopped" in proc.log_file.read_text()
    assert watchdog_state_file(s).exists()  # it watched this state dir, not the environment's


def test_two_starters_never_run_two_copies(component):
    """The watchdog and another starter (`up`, the fault suite) may both find a component down:
    a start finding a live process recorded (under the component's lock) reuses it."""
    pid = component.proc.pid()
    assert component.proc.spawn(component.argv(), component.env()) == pid
    assert component.proc.pid() == pid and group_alive(pid)


class LowPriorityServer(LoopbackServer):
    """The stand-in at a lower CPU priority, as the stack runs Airflow's processes."""

    def nice(self) -> int:
        return 7


def _priority(pid: int) -> tuple[int, str | None]:
    """(the process's nice, its autogroup line, or None where the kernel has no autogroups)."""
    try:
        with open(f"/proc/{pid}/autogroup") as fh:
            group = fh.read().strip()
    except OSError:
        group = None
    return os.getpriority(os.PRIO_PROCESS, pid), group


def test_a_component_starts_and_restarts_at_its_lower_cpu_priority(tmp_path):
    """Airflow's processes run below the model service's priority (DGB_AIRFLOW_NICE): the
    process and its session's autogroup (which is what the scheduler weighs first) get the nice,
    at the first start and after a watchdog restart."""
    s = replace(Settings.from_env(), state_dir=tmp_path)
    comp = LowPriorityServer(s)
    assert not port_open("127.0.0.1", PORT), f"port {PORT} is taken: free it for this test"
    comp.up()
    try:
        nice, group = _priority(comp.proc.pid())
        base = os.getpriority(os.PRIO_PROCESS, 0)
        assert nice == max(base, 7)
        assert group is None or group.endswith(" nice 7")
        _kill(comp)
        dog = Watchdog(s, [comp], initial=0, poll=0.1)
        assert dog.check_once(now=0.0) == [comp.name]
        wait_until(comp.healthy, 30, "the restart")
        again, group = _priority(comp.proc.pid())
        assert again == nice and (group is None or group.endswith(" nice 7"))
    finally:
        comp.down()


def test_airflow_parts_take_their_nice_from_the_environment(monkeypatch):
    s = Settings.from_env()
    monkeypatch.delenv("DGB_AIRFLOW_NICE", raising=False)
    assert AirflowPart(s, "scheduler").nice() == 10
    assert CeleryWorker(s, 1).nice() == 10
    monkeypatch.setenv("DGB_AIRFLOW_NICE", "0")
    assert AirflowPart(s, "triggerer").nice() == 0
    monkeypatch.setenv("DGB_AIRFLOW_NICE", "25")
    with pytest.raises(ValueError, match="DGB_AIRFLOW_NICE"):
        AirflowPart(s, "scheduler").nice()


def test_the_dag_processor_runs_at_the_lowest_priority_unless_told(monkeypatch):
    """It only re-parses unchanged DAG files: under a backlog that work waits, never the stages'."""
    s = Settings.from_env()
    monkeypatch.delenv("DGB_AIRFLOW_NICE", raising=False)
    monkeypatch.delenv("DGB_AIRFLOW_DAG_PROCESSOR_NICE", raising=False)
    assert AirflowPart(s, "dag-processor").nice() == 19
    assert AirflowPart(s, "scheduler").nice() == 10  # the stage tasks' parent: unchanged
    monkeypatch.setenv("DGB_AIRFLOW_DAG_PROCESSOR_NICE", "5")
    assert AirflowPart(s, "dag-processor").nice() == 10  # never above the rest of Airflow
    monkeypatch.setenv("DGB_AIRFLOW_NICE", "0")
    assert AirflowPart(s, "dag-processor").nice() == 5
