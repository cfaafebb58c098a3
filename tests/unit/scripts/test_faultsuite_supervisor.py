"""The run's process supervisor starts what is down and only waits for what runs but is late to
report healthy (a paused triggerer just continued, a scheduler whose heartbeat is late while the
api-server restarts): only the first counts as restarted."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))

from faultsuite import components  # noqa: E402


class FakePart:
    def __init__(self, name, alive, healthy, has_proc=True):
        self.name = name
        self._healthy = healthy
        self.ups = 0
        if has_proc:
            self.proc = SimpleNamespace(alive=lambda: alive)

    def healthy(self):
        return self._healthy

    def up(self):
        self.ups += 1
        return "ok"


def _supervise(monkeypatch, parts, holding=False):
    comps = components.Components(SimpleNamespace(s=None))
    comps.holding = holding
    monkeypatch.setattr(comps, "names", lambda: list(parts))
    monkeypatch.setattr(components.stack, "component", lambda s, name: parts[name])
    lines = []
    monkeypatch.setattr(components, "log", lines.append)
    return comps, comps.supervise(), lines


def test_a_dead_process_is_started_and_counted_a_late_one_is_waited_for(monkeypatch):
    parts = {
        "postgres": FakePart("postgres", alive=False, healthy=True, has_proc=False),
        "airflow-scheduler": FakePart("airflow-scheduler", alive=True, healthy=False),
        "airflow-triggerer": FakePart("airflow-triggerer", alive=False, healthy=False),
    }
    comps, fixed, lines = _supervise(monkeypatch, parts)
    assert fixed == ["airflow-triggerer"]
    assert comps.restarted_by_supervisor == ["airflow-triggerer"]
    # both unhealthy ones are brought up (up() of a live one waits until it reports healthy)
    assert [p.ups for p in parts.values()] == [0, 1, 1]
    assert lines == [
        "supervisor: airflow-scheduler runs but does not report healthy; waiting for it",
        "supervisor: airflow-triggerer is down; starting it",
    ]


def test_a_component_with_no_process_of_ours_is_judged_by_its_health_alone(monkeypatch):
    parts = {"postgres": FakePart("postgres", alive=True, healthy=False, has_proc=False)}
    _, fixed, lines = _supervise(monkeypatch, parts)
    assert fixed == ["postgres"] and lines == ["supervisor: postgres is down; starting it"]


def test_nothing_is_touched_while_an_outage_is_held(monkeypatch):
    parts = {"airflow-triggerer": FakePart("airflow-triggerer", alive=False, healthy=False)}
    _, fixed, lines = _supervise(monkeypatch, parts, holding=True)
    assert fixed == [] and lines == [] and parts["airflow-triggerer"].ups == 0
