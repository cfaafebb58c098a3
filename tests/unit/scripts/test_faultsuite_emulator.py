"""While the fault suite has the Pub/Sub emulator stopped, its own publisher (the duplicator) makes
no call, so gRPC's reconnect backoff, shared by every client of the process, does not grow through
the outage and the topology is re-applied as soon as the emulator is back (faultsuite.components,
faultsuite.duplicator)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))  # scripts/ is not a package: its faultsuite is

from faultsuite import components, duplicator  # noqa: E402


class Recorder:
    def __init__(self, events: list[str], name: str):
        self.events, self.name = events, name

    def pause(self) -> bool:
        self.events.append(f"{self.name}.pause")
        return True

    def resume(self) -> None:
        self.events.append(f"{self.name}.resume")


def fake_stack(monkeypatch, events: list[str]):
    def component(settings, name):
        return SimpleNamespace(
            down=lambda: events.append(f"{name}.down"), up=lambda: events.append(f"{name}.up")
        )

    monkeypatch.setattr(components.stack, "component", component)
    monkeypatch.setattr(components.topology, "apply_to_emulator", lambda s: events.append("topology"))
    monkeypatch.setattr(components, "log", lambda msg: None)


def with_paused_caller(monkeypatch) -> tuple[components.Components, list[str]]:
    """Components on a fake stack, with one Pub/Sub caller; both record into the list returned."""
    events: list[str] = []
    fake_stack(monkeypatch, events)
    comps = components.Components(SimpleNamespace(s=None))
    comps.pubsub_callers.append(Recorder(events, "dup"))
    return comps, events


def test_the_suites_pubsub_callers_are_paused_while_the_emulator_is_stopped(monkeypatch):
    comps, events = with_paused_caller(monkeypatch)
    comps.stop("pubsub")
    assert comps.stopped == {"pubsub"}
    comps.start_again("pubsub")
    assert events == ["dup.pause", "pubsub.down", "pubsub.up", "topology", "dup.resume"]
    assert comps.stopped == set()


def test_other_components_leave_the_pubsub_callers_alone(monkeypatch):
    comps, events = with_paused_caller(monkeypatch)
    comps.stop("typesense")
    comps.start_again("typesense")
    assert events == ["typesense.down", "typesense.up"]


def test_a_failed_start_still_resumes_the_callers(monkeypatch):
    comps, events = with_paused_caller(monkeypatch)

    def broken(settings, name):
        def up():
            raise RuntimeError("no emulator")

        return SimpleNamespace(down=lambda: None, up=up)

    monkeypatch.setattr(components.stack, "component", broken)
    comps.stopped.add("pubsub")
    try:
        comps.start_again("pubsub")
    except RuntimeError:
        pass
    assert events == ["dup.resume"] and comps.stopped == set()


class FakePublisher:
    def __init__(self):
        self.calls = 0
        self.lock = threading.Lock()

    def publish(self, path, data, **attrs):
        with self.lock:
            self.calls += 1
        return SimpleNamespace(result=lambda timeout: None)


def test_a_paused_duplicator_publishes_nothing_until_resumed(monkeypatch):
    publisher = FakePublisher()
    rows: list[tuple] = []
    monkeypatch.setattr("dgb.pubsub_clients.publisher_client", lambda: publisher)

    class FakeDb:
        def __init__(self, dsn):
            pass

        def query(self, sql, params):
            return list(rows)

        def close(self):
            pass

    monkeypatch.setattr(duplicator, "Db", FakeDb)
    ctx = SimpleNamespace(s=SimpleNamespace(pg_dsn=lambda: "", gcp_project="p"))
    dup = duplicator.Duplicator(ctx, SimpleNamespace(all_uids=lambda: ["u1"]))
    assert dup.pause(timeout=0.1)  # not started: nothing to wait for
    dup.resume()
    dup.start()
    try:
        assert dup.pause(timeout=5.0)
        rows.append(("1", "dgb.news.scraped", {"unique_id": "u1"}, {}))
        time.sleep(1.5)  # the loop turns at least once while paused
        assert publisher.calls == 0 and dup.dup_published == 0
        dup.resume()
        deadline = time.monotonic() + 5.0
        while dup.dup_published < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert publisher.calls == dup.dup_published == 2  # the row's two extra copies, once resumed
    finally:
        dup.stop()
