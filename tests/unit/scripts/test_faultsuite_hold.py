"""A held outage stays an outage: a component something else starts again while the suite holds it
down (a test session's fixtures on a shared machine) is stopped again at once, and the batch's
note says so (faultsuite.outages.Outages.hold, on a fake clock)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))  # scripts/ is not a package: its faultsuite is

from faultsuite import outages  # noqa: E402
from faultsuite.catalogue import Batch  # noqa: E402


class HeldComponent:
    """The component under the outage: ``up_at`` seconds into it, something else starts it."""

    def __init__(self, clock, up_at: list[float]):
        self.clock, self.t0, self.up_at = clock, clock.now, list(up_at)
        self.up = False
        self.stops: list[float] = []
        self.holding = False

    def healthy(self, name: str) -> bool:
        if self.up_at and self.clock.now - self.t0 >= self.up_at[0]:
            self.up_at.pop(0)
            self.up = True
        return self.up

    def stop(self, name: str) -> None:
        self.stops.append(self.clock.now - self.t0)
        self.up = False


def hold(clock, monkeypatch, up_at, fault="typesense_down", spent_after=None, component="typesense"):
    monkeypatch.setattr(outages, "time", clock)
    monkeypatch.setattr(outages, "log", lambda msg: None)
    comps = HeldComponent(clock, up_at)
    observed: list[float] = []
    watch = SimpleNamespace(observe=lambda: observed.append(clock.now - comps.t0))
    ctx = SimpleNamespace(quick=True, args=SimpleNamespace(outage_s=None))
    o = outages.Outages(ctx, comps, None, None, watch)
    o.budget = SimpleNamespace(
        retries_spent=lambda batch, since: spent_after is not None and clock.now - comps.t0 >= spent_after
    )
    batch = Batch(fault, "mec", ["t"], note="outage_s=140")
    o.hold(batch, 140.0, component=component)
    return batch, comps, observed, clock.now - comps.t0


def test_a_component_started_elsewhere_is_stopped_again_within_a_poll(fake_time, monkeypatch):
    batch, comps, _observed, held = hold(fake_time, monkeypatch, up_at=[61.0, 100.0], spent_after=150.0)
    assert len(comps.stops) == 2
    assert all(0 <= stop - at <= outages.DOWN_POLL_S for stop, at in zip(comps.stops, (61.0, 100.0)))
    assert "restarted_elsewhere=2" in batch.note.split()
    assert 150.0 <= held <= 150.0 + outages.SPENT_POLL_S  # the outage itself is as long as before


def test_a_component_left_down_is_only_checked(fake_time, monkeypatch):
    batch, comps, observed, held = hold(fake_time, monkeypatch, up_at=[], spent_after=0.0)
    assert comps.stops == [] and "restarted_elsewhere" not in batch.note
    # the retries were spent at once: the outage ends at its floor, not at the planned 140 s
    assert held == outages.ADAPTIVE_FLOOR_S
    # dead letters are still looked for every 10 s until the floor, not at every component check
    before_floor = [t for t in observed if t < outages.ADAPTIVE_FLOOR_S]
    assert before_floor == [10.0 * k for k in range(len(before_floor))] and len(before_floor) == 6


def test_the_outage_lasts_until_the_retries_are_spent_past_its_planned_length(fake_time, monkeypatch):
    _batch, _comps, _observed, held = hold(fake_time, monkeypatch, up_at=[], spent_after=95.0)
    assert 95.0 <= held <= 95.0 + outages.SPENT_POLL_S
    _batch, _comps, _observed, held = hold(fake_time, monkeypatch, up_at=[], spent_after=None)
    assert held >= 300.0  # never spent: to the cap, and the note says so
    assert "retries_not_spent_by_cap" in _batch.note


def test_an_outage_without_a_component_is_not_checked(fake_time, monkeypatch):
    batch, comps, _observed, held = hold(
        fake_time, monkeypatch, up_at=[0.0], fault="bedrock_throttle", spent_after=0.0, component=None
    )
    assert comps.stops == [] and held == outages.ADAPTIVE_FLOOR_S
