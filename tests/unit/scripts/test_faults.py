"""The fault suite's pure parts (scripts/faultsuite): the stage retry budget its quick outages must
outlast, the last-line contract, the catalogue, a batch's recovery and when reconciliation is due
(the run itself: tests/integration/scripts/test_faults_quick.py, DGB_RUN_FAULTS=1)."""

from __future__ import annotations

import re
import sys
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))  # scripts/ is not a package: its faultsuite is

from faultsuite import budget, catalogue, outages, report  # noqa: E402
from faultsuite.catalogue import Batch  # noqa: E402
from faultsuite.reconciler import Reconciler  # noqa: E402


def test_flat_retry_delay_when_backoff_is_true():
    # Airflow 3 reads retry_exponential_backoff as a multiplier: True is 1.0, a flat delay
    task = {"task_id": "index", "retries": 3, "retry_delay": 10.0, "retry_exponential_backoff": True}
    assert budget.retry_budget([("index_news", task)]) == {
        "delays_s": 30.0,
        "retries": 3,
        "where": "index_news.index",
    }


def test_exponential_delays_take_the_largest_hash_and_the_cap():
    task = {
        "task_id": "t",
        "retries": 3,
        "retry_delay": timedelta(seconds=10),
        "retry_exponential_backoff": 2.0,
        "max_retry_delay": timedelta(seconds=50),
    }
    # tries 1..3: ceil(10 * 2**k) + up to as much again - 1 = 19, 39, 79 -> capped at 50
    assert budget.retry_budget([("d", task)])["delays_s"] == 19 + 39 + 50


def test_the_longest_schedule_wins_and_no_retries_is_zero():
    short = {"task_id": "a", "retries": 1, "retry_delay": 10.0}
    long = {"task_id": "b", "retries": 2, "retry_delay": 30.0}
    assert budget.retry_budget([("x", short), ("y", long)])["where"] == "y.b"
    assert budget.retry_budget([("z", {"task_id": "c"})])["delays_s"] == 0.0


def _outage(fault, quick, outage_s=None):
    rb = budget.RetryBudget(SimpleNamespace(quick=quick, args=SimpleNamespace(outage_s=outage_s)))
    rb.cached = {"delays_s": 30.0, "retries": 3, "where": "embed_news.embed"}  # today's stage DAGs
    return rb.outage_s(Batch(fault, "mec", ["a", "b", "c"]))


def test_outage_lengths_by_mode():
    # --quick: the retry budget (30 s of delays + 4 tries at ~20 s + 30 s to reach the stage) for
    # the dependencies a stage task fails on; the emulator fails none, so it is not sized by it
    assert _outage("typesense_down", quick=True) == 140.0
    assert _outage("bedrock_throttle", quick=True) == 30 + 4 * 29 + 30
    assert _outage("emulator_down", quick=True) == catalogue.EMULATOR_QUICK_OUTAGE_S == 90.0
    assert _outage("emulator_down", quick=False) == catalogue.OUTAGE_S == 600.0
    assert _outage("emulator_down", quick=True, outage_s=45.0) == 45.0


def test_last_line_contract():
    line = report.last_line(0, 2, 5, 123.456)
    assert line == "faults: lost=0 duplicated=2 dead_lettered_healthy=5 worst_recovery_s=123.5"
    m = re.fullmatch(report.LAST_LINE, line)
    assert m
    assert (m["lost"], m["duplicated"], m["dead_lettered_healthy"], m["worst"]) == ("0", "2", "5", "123.5")
    assert not re.fullmatch(report.LAST_LINE, "faults: lost=0 duplicated=0 worst_recovery_s=1.0")


def test_every_long_outage_is_a_fault():
    assert set(catalogue.LONG_OUTAGES) <= set(catalogue.FAULTS)
    assert set(catalogue.SPENDS_RETRIES) <= set(catalogue.LONG_OUTAGES)
    assert len(set(catalogue.FAULTS)) == len(catalogue.FAULTS) == 12


def test_recovery_is_timed_from_the_injection_or_for_long_outages_from_the_recovery():
    short = Batch("kill_model", "mec", ["t"], published_at=100.0, fault_at=110.0, fault_end=112.0)
    assert short.recovery_s is None
    short.done_at = 150.0
    assert short.recovery_s == 40.0
    long = Batch("typesense_down", "mec", ["t"], published_at=100.0, fault_at=110.0, fault_end=260.0)
    long.done_at = 300.0
    assert long.long and long.recovery_s == 40.0


def test_notes_are_space_separated():
    b = Batch("kill_task", "mec", [])
    b.add_note("in_flight_at_fault=3")
    b.add_note("orphans=1")
    assert b.note == "in_flight_at_fault=3 orphans=1"


def test_reconciliation_is_due_for_an_incomplete_batch_after_its_fault_and_the_last_run():
    rec = Reconciler(SimpleNamespace(quick=True))  # every 20 s, articles older than 20 s
    pending = Batch("restart_emulator", "mec", ["t"], fault_end=1000.0)
    assert not rec.due([pending], 1010.0)  # too soon after the fault
    assert rec.due([pending], 1020.0)
    rec.last_reconcile = 1015.0
    assert not rec.due([pending], 1020.0)  # too soon after the last run
    pending.done_at = 1030.0
    assert not rec.due([pending], 1100.0)  # complete
    assert not rec.due([Batch("kill_task", "mec", ["t"])], 1100.0)  # its fault not over yet


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def held_for(monkeypatch, fault: str, floor: float, spent_after: float | None, quick: bool = True) -> float:
    """How long Outages.hold keeps a dependency down, on a fake clock, when the batch's retries are
    observed spent ``spent_after`` seconds into the outage (None: never)."""
    clock = FakeClock()
    monkeypatch.setattr(outages, "time", clock)
    ctx = SimpleNamespace(quick=quick, args=SimpleNamespace(outage_s=None))
    watch = SimpleNamespace(observe=lambda: None)
    o = outages.Outages(ctx, SimpleNamespace(holding=False), None, None, watch)
    t0 = clock.now
    o.budget = SimpleNamespace(
        retries_spent=lambda batch, since: spent_after is not None and clock.now - t0 >= spent_after
    )
    o.hold(Batch(fault, "mec", ["t"], note=f"outage_s={floor:.0f}"), floor)
    assert not o.components.holding
    return clock.now - t0


def test_a_quick_outage_lasts_its_floor_even_when_the_retries_are_spent_sooner(monkeypatch):
    assert held_for(monkeypatch, "typesense_down", 140.0, spent_after=0.0) == outages.ADAPTIVE_FLOOR_S
    assert held_for(monkeypatch, "typesense_down", 140.0, spent_after=30.0) == outages.ADAPTIVE_FLOOR_S


def test_past_its_floor_a_quick_outage_ends_within_seconds_of_the_retries_spent(monkeypatch):
    held = held_for(monkeypatch, "model_down", 140.0, spent_after=163.0)
    assert 163.0 <= held <= 163.0 + outages.SPENT_POLL_S


def test_a_quick_outage_ends_at_the_cap_and_other_outages_at_their_length(monkeypatch):
    held = held_for(monkeypatch, "bedrock_throttle", 140.0, spent_after=None)
    assert catalogue.QUICK_OUTAGE_CAP_S <= held <= catalogue.QUICK_OUTAGE_CAP_S + outages.SPENT_POLL_S
    assert held_for(monkeypatch, "emulator_down", 140.0, spent_after=None) == 140.0  # not adaptive
    assert held_for(monkeypatch, "typesense_down", 600.0, spent_after=None, quick=False) == 600.0


def test_the_upgrade_probe_still_fits_the_stage_dags_file():
    """The upgrade fault changes the stage DAGs by rewriting their tags: if that line changes,
    the probe must change with it (it refuses to run rather than change nothing)."""
    from faultsuite import upgrade

    from dgb import db

    text = upgrade.STAGE_DAG_FILE.read_text(encoding="utf-8")
    assert text.count(upgrade.TAGS_BEFORE) == 1
    assert upgrade.PROBE_TAG not in text
    assert not upgrade.PROBE_MIGRATION.exists()  # never left behind by a run
    assert int(upgrade.PROBE_VERSION) > max(int(m.version) for m in db.discover())
