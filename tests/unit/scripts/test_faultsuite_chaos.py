"""The chaos faults' confirmations (scripts/faultsuite/crash.py, pause.py, chaos.py) against real
local processes and sockets: a child ``sleep`` this test starts is stopped, continued and killed;
a loopback port is bound and closed; the site's faults are probed on an in-process site. Nothing
of the stack is touched."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))

from faultsuite import chaos, chaos_catalogue, crash, pause  # noqa: E402


@pytest.fixture
def child():
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.kill(proc.pid, sig)
        except ProcessLookupError:
            pass
    proc.wait(timeout=10)


def _wait_state(pid: int, want: set[str], within: float = 5.0) -> str | None:
    deadline = time.monotonic() + within
    while (state := crash.proc_state(pid)) not in want and time.monotonic() < deadline:
        time.sleep(0.02)
    return state


# --------------------------------------------------------------------------- pause


def test_a_pause_is_confirmed_by_state_t_and_always_continued(child):
    seen_during = []
    ok, seen = pause.freeze(
        child.pid, 0.3, on_stopped=lambda ok, s: seen_during.append((ok, crash.proc_state(child.pid)))
    )
    assert ok and seen_during == [(True, "T")]
    assert "state T after SIGSTOP" in seen and "held 0s" in seen
    assert _wait_state(child.pid, {"S", "R"}) in {"S", "R"}  # continued
    assert pause.frozen() == []


def test_an_error_during_the_hold_still_continues_the_process(child):
    def boom(ok, seen):
        assert crash.proc_state(child.pid) == "T"
        raise RuntimeError("the harness failed mid-pause")

    with pytest.raises(RuntimeError, match="mid-pause"):
        pause.freeze(child.pid, 60, on_stopped=boom)
    assert _wait_state(child.pid, {"S", "R"}) in {"S", "R"}
    assert pause.frozen() == []


def test_thaw_all_ends_a_hold_held_by_another_thread(child):
    result, stopped = [], threading.Event()
    t = threading.Thread(
        target=lambda: result.append(pause.freeze(child.pid, 60, on_stopped=lambda ok, s: stopped.set()))
    )
    t.start()
    assert stopped.wait(5) and crash.proc_state(child.pid) == "T"
    assert pause.frozen() == [(child.pid, False)]
    t0 = time.monotonic()
    assert pause.thaw_all() == [(child.pid, False)]
    t.join(timeout=10)
    assert not t.is_alive() and time.monotonic() - t0 < 5
    assert result[0][0] and "cut short" in result[0][1]
    assert _wait_state(child.pid, {"S", "R"}) in {"S", "R"}


def test_sigterm_of_the_run_continues_what_it_froze(child):
    before = signal.getsignal(signal.SIGTERM)
    t = threading.Thread(target=lambda: pause.freeze(child.pid, 60), daemon=True)
    with pytest.raises(SystemExit), pause.thaw_on_exit():
        t.start()
        assert _wait_state(child.pid, {"T"}) == "T"
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises SystemExit here
    t.join(timeout=10)
    assert _wait_state(child.pid, {"S", "R"}) in {"S", "R"}
    assert signal.getsignal(signal.SIGTERM) is before  # the run's own handler back
    assert pause.frozen() == []


def test_a_pause_of_a_process_already_gone_is_not_confirmed(child):
    child.kill()
    child.wait(timeout=10)
    ok, seen = pause.freeze(child.pid, 0.1)
    assert not ok and "gone" in seen


# --------------------------------------------------------------------------- crash


def test_a_kill_is_confirmed_once_the_pid_is_gone(child):
    ok, seen = crash.confirm_dead(child.pid, None, within_s=0.3)
    assert not ok and "still there" in seen
    crash.kill9(child.pid)
    ok, seen = crash.confirm_dead(child.pid, None, within_s=5)  # a zombie until reaped: dead
    assert ok and seen == f"pid {child.pid} gone"
    child.wait(timeout=10)
    assert crash.pid_gone(child.pid) and crash.proc_state(child.pid) is None


def test_a_closed_port_refuses_and_an_open_one_does_not():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    port = sock.getsockname()[1]
    try:
        assert not crash.port_refuses(port)
        ok, seen = crash.confirm_dead(None, port, within_s=0.2)
        assert not ok and seen == f"no pid known, 127.0.0.1:{port} not refused"
    finally:
        sock.close()
    assert crash.port_refuses(port)


def test_the_kill_confirmation_needs_both_the_pid_gone_and_the_port_refused(child):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    port = sock.getsockname()[1]
    crash.kill9(child.pid)
    ok, seen = crash.confirm_dead(child.pid, port, within_s=0.3)
    assert not ok and seen.endswith("not refused")
    sock.close()
    ok, seen = crash.confirm_dead(child.pid, port, within_s=5)
    assert ok and seen == f"pid {child.pid} gone, 127.0.0.1:{port} refused"


def test_the_postmaster_pid_is_read_from_postmaster_pid_and_only_if_alive(tmp_path, child):
    (tmp_path / "postmaster.pid").write_text(f"{child.pid}\n{tmp_path}\n1796399266\n5432\n")
    assert crash.postmaster_pid(tmp_path) == child.pid
    crash.kill9(child.pid)
    child.wait(timeout=10)
    assert crash.postmaster_pid(tmp_path) is None  # the file outlives a crashed postmaster
    assert crash.postmaster_pid(tmp_path / "nowhere") is None


# --------------------------------------------------------------------------- chaos: draw, overlap


def _chaos(seed, **kw):
    ctx = SimpleNamespace(s=None, af=None, db=None)
    c = chaos.Chaos(ctx, seed, "http://127.0.0.1:1", **kw)
    c.supervise = list  # no stack here: nothing to start
    return c


def test_a_seed_replays_the_draws_and_their_plans_and_every_kind_comes_up():
    def run(seed):
        c = _chaos(seed)
        out = []
        for _ in range(400):
            f = c.draw()
            out.append((f, repr(c.plan(f)), round(c.next_gap_s(300), 6)))
        return out

    a, b, other = run(11), run(11), run(12)
    assert a == b and a != other
    assert {f for f, _, _ in a} == set(chaos.CHAOS)
    c = _chaos(3)
    for _ in range(200):
        parts = c.plan("overlap")["parts"]
        (f1, _), (f2, _) = parts
        assert chaos_catalogue.TARGET[f1] != chaos_catalogue.TARGET[f2]
        assert not {f1, f2} & set(chaos_catalogue.NOT_OVERLAPPED)
        for f, plan in parts:
            if f in chaos_catalogue.PAUSE_TARGETS:
                assert 30 <= plan["hold_s"] <= 120


def test_a_deck_draws_every_kind_once_before_any_twice_in_a_seeded_order():
    def draws(seed, n, **kw):
        c = _chaos(seed, deck=True, **kw)
        return [c.draw() for _ in range(n)]

    kinds = len(chaos.CHAOS)
    first = draws(7, 2 * kinds)
    assert sorted(first[:kinds]) == sorted(first[kinds:]) == sorted(chaos.CHAOS)
    assert first == draws(7, 2 * kinds) and first != draws(8, 2 * kinds)
    few = ("kill_postgres", "site_slow", "upgrade")
    assert sorted(draws(7, 3, faults=few)) == sorted(few)


def test_the_soak_draws_only_its_documented_faults():
    c = _chaos(4711, faults=chaos.SOAK_FAULTS)
    assert {c.draw() for _ in range(300)} == set(chaos.SOAK_FAULTS)
    with pytest.raises(ValueError, match="unknown chaos faults"):
        _chaos(1, faults=("kill_everything",))


def test_an_overlap_runs_both_faults_together_and_records_each(monkeypatch):
    c = _chaos(5)
    running = set()
    together = []

    def fake(fault, hold, plan):
        running.add(fault)
        time.sleep(0.3)
        together.append(set(running))
        running.discard(fault)
        if fault == "kill_model":
            raise RuntimeError("no model service here")
        return chaos.Outcome(f"did {fault}", True, f"saw {fault}")

    monkeypatch.setattr(c, "_inject", fake)
    rec = c._overlap([("pause_scheduler", {"hold_s": 40}), ("site_slow", {})])
    assert rec.fault == "overlap" and "pause_scheduler + site_slow" in rec.what
    assert [p.fault for p in rec.parts] == ["pause_scheduler", "site_slow"]
    assert all(p.confirmed for p in rec.parts) and rec.confirmed
    assert {"pause_scheduler", "site_slow"} in together  # at the same time
    assert rec.confirmation.startswith("pause_scheduler: confirmed; site_slow: confirmed; together for 0.")
    d = rec.as_dict()
    assert [p["confirmation"] for p in d["parts"]] == ["saw pause_scheduler", "saw site_slow"]
    assert "started_mono" not in d and "started_mono" not in d["parts"][0]

    rec = c._overlap([("kill_model", {}), ("site_503", {})])
    failed = rec.parts[0]
    assert not failed.confirmed and failed.detail.startswith("inject_error=RuntimeError")
    assert rec.parts[1].confirmed and not rec.confirmed  # one part unconfirmed: the overlap too


def test_inject_records_the_confirmation_or_its_absence(monkeypatch):
    c = _chaos(6)
    monkeypatch.setattr(c, "_inject", lambda f, h, p: chaos.Outcome("pid=1", True, "pid 1 gone"))
    rec = c.inject("kill_scheduler")
    assert (rec.confirmed, rec.confirmation, rec.detail) == (True, "pid 1 gone", "pid=1")
    assert rec.ended and rec.as_dict()["parts"] == []

    def fails(f, h, p):
        raise OSError("refused")

    monkeypatch.setattr(c, "_inject", fails)
    rec = c.inject("kill_postgres")
    assert not rec.confirmed and "injection failed" in rec.confirmation


# --------------------------------------------------------------------------- chaos: the site


@pytest.fixture
def site():
    from dgb_dev.mirror import Site, start_in_thread

    server, base = start_in_thread(Site(None, registry={}))
    yield server, base
    server.shutdown()
    server.server_close()


def test_the_site_faults_are_confirmed_by_a_probe_not_counted_as_a_client(site, monkeypatch):
    server, base = site
    c = _chaos(1)
    c.site = base
    slow = {"path_prefix": "/", "fault": "slow", "delay": 1, "chunks": 4}
    monkeypatch.setitem(chaos_catalogue.SITE_FAULTS, "site_slow", slow)
    out = c._site("site_503", 0)
    assert out.confirmed and out.confirmation.startswith("probe GET /www.gov.br/: 503 in ")
    out = c._site("site_slow", 0)
    assert out.confirmed, out.confirmation
    assert float(out.confirmation.rsplit(" in ", 1)[1].rstrip("s")) >= 0.95
    assert server.faults.list() == []  # cleared
    assert server.requests.snapshot()["per_second"] == []  # probes spend no request budget
    assert server.requests.snapshot()["total"]["probe"] == 2
    # with no fault the probe is answered at once: not confirmed
    monkeypatch.setattr(c, "_site_fault", lambda body: None)
    assert not c._site("site_slow", 0).confirmed
    assert not c._site("site_503", 0).confirmed


# --------------------------------------------------------------------------- chaos: the upgrade


def test_the_upgrade_migration_rewrites_a_column_the_stages_read_and_is_never_left_behind():
    from faultsuite import chaos_upgrade, upgrade

    from dgb import db

    assert not chaos_upgrade.REWRITE_MIGRATION.exists()
    versions = [int(m.version) for m in db.discover()]
    assert int(chaos_upgrade.REWRITE_VERSION) > max(versions)
    assert chaos_upgrade.REWRITE_VERSION != upgrade.PROBE_VERSION
    # a no-op USING (``content`` alone) would not rewrite the table: the expression must not be one
    # (the rewrite itself is checked on a real PostgreSQL: tests/integration/scripts/test_chaos_upgrade.py)
    assert "USING content || ''" in chaos_upgrade.REWRITE_SQL
    # every stage reads content: the index stage's document query, for one
    documents = (REPO / "include" / "dgb" / "search" / "documents.py").read_text()
    assert "n.content" in documents


def test_the_upgrade_publishes_the_next_minor_and_puts_the_setting_back(monkeypatch):
    from faultsuite import chaos_upgrade

    from dgb import events, topology

    monkeypatch.delenv("DGB_EVENT_MINOR_VERSION", raising=False)
    minor = chaos_upgrade.next_minor()
    assert minor == int(topology.EVENT_VERSION.split(".")[1]) + 1
    chaos_upgrade.set_minor(minor)
    assert events.published_version() == f"{topology.EVENT_VERSION.split('.')[0]}.{minor}"
    chaos_upgrade.set_minor(None)
    assert events.published_version() == topology.EVENT_VERSION
    assert "DGB_EVENT_MINOR_VERSION" not in os.environ
