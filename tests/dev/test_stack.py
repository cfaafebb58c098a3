"""The stack runner: reuse of running servers, clear errors on taken ports, clean stop."""

import socket
from dataclasses import replace

import pytest

from dgb_dev import stack

pytestmark = pytest.mark.stack


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_running_component_is_reused(typesense_server):
    comp = stack.Typesense(typesense_server)
    pid = comp.proc.pid()
    assert comp.up().startswith("already running")
    assert comp.proc.pid() == pid


def test_port_taken_by_another_program_is_a_clear_error(typesense_server, tmp_path):
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        s = replace(typesense_server, state_dir=tmp_path, typesense_port=port)
        comp = stack.Typesense(s)
        with pytest.raises(stack.StackError, match=f"port 127.0.0.1:{port} is taken by another program"):
            comp.up()
        # refused before starting anything: no process, no pid file, no log
        assert comp.proc.pid() is None
        assert not comp.proc.pid_file.exists() and not comp.proc.log_file.exists()


def test_same_service_started_elsewhere_is_named(typesense_server, tmp_path):
    # the shared Typesense answers on its port but this state dir holds no pid for it
    s = replace(typesense_server, state_dir=tmp_path)
    with pytest.raises(stack.StackError, match="not started by this checkout"):
        stack.Typesense(s).up()


def test_start_and_stop_own_instance_leaves_nothing(typesense_server, tmp_path):
    s = replace(
        typesense_server, state_dir=tmp_path, typesense_port=_free_port(), typesense_peering_port=_free_port()
    )
    comp = stack.Typesense(s)
    assert comp.up().startswith("started")
    pid = comp.proc.pid()
    assert comp.healthy()
    assert comp.down() is True
    assert not stack._group_alive(pid)
    assert not comp.healthy()
    assert comp.down() is False  # stopping twice is harmless
