"""A fresh stack queues one scheduled scrape run per agency at once; the fault suite puts each batch
on the agency whose run comes next (its batch is scraped by that run), and publishes the first
batch while the stack is still starting (faultsuite.articles.first_queued,
faultsuite.driver.Run.next_agency, faultsuite.components.up_watching)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))  # scripts/ is not a package: its faultsuite is

from faultsuite import components  # noqa: E402
from faultsuite.articles import Articles  # noqa: E402
from faultsuite.driver import Run  # noqa: E402


class FakeAf:
    def __init__(self, rows=None, error: Exception | None = None):
        self.rows, self.error, self.params = rows or [], error, None

    def query(self, sql, params):
        self.params = params
        if self.error:
            raise self.error
        return [r for r in self.rows if r[0] in params[0]][:1]


def test_the_first_queued_agency_maps_back_from_its_dag_id():
    af = FakeAf(rows=[("scrape_mec",), ("scrape_meio_ambiente",)])
    articles = Articles(SimpleNamespace(af=af))
    assert articles.first_queued(["meio-ambiente", "mec"]) == "mec"
    assert sorted(af.params[0]) == ["scrape_mec", "scrape_meio_ambiente"]
    assert articles.first_queued(["meio-ambiente"]) == "meio-ambiente"
    assert articles.first_queued(["saude"]) is None


def test_no_airflow_database_yet_is_no_queued_agency():
    articles = Articles(SimpleNamespace(af=FakeAf(error=RuntimeError("no table dag_run"))))
    assert articles.first_queued(["mec"]) is None


def run_with(queue: list[str], agencies: list[str]) -> Run:
    run = Run.__new__(Run)  # no Context: only the agency choice is exercised
    run.articles = SimpleNamespace(first_queued=lambda cands: next((a for a in queue if a in cands), None))
    run.agencies, run.unused = list(agencies), list(agencies)
    return run


def test_each_batch_takes_the_next_queued_unused_agency_else_the_preferred_order():
    run = run_with(queue=["mds", "mec"], agencies=["agricultura", "mec", "mds", "saude"])
    assert [run.next_agency() for _ in range(4)] == ["mds", "mec", "agricultura", "saude"]
    assert run.next_agency() == "mds"  # all used: start over


def test_up_watching_checks_until_true_while_the_stack_starts(monkeypatch):
    monkeypatch.setattr(components, "WATCH_EVERY_S", 0.01)
    started = threading.Event()
    calls = []

    def up():
        started.set()
        time.sleep(0.3)

    def check():
        calls.append(time.monotonic())
        return len(calls) == 3

    components.up_watching(up, check)
    assert started.is_set() and len(calls) == 3


def test_up_watching_keeps_checking_for_a_grace_period_after_the_stack_is_up(fake_time, monkeypatch):
    monkeypatch.setattr(components, "WATCH_EVERY_S", 0.01)
    calls = []
    components.up_watching(lambda: None, lambda: calls.append(1) or len(calls) >= 5)
    assert len(calls) == 5
    t0 = fake_time.now
    components.up_watching(lambda: None, lambda: False, clock=fake_time)
    assert components.EARLY_GRACE_S <= fake_time.now - t0 <= components.EARLY_GRACE_S + 0.02


def test_a_failed_start_is_raised_and_a_failing_check_only_logged(monkeypatch):
    monkeypatch.setattr(components, "WATCH_EVERY_S", 0.01)
    monkeypatch.setattr(components, "log", lambda msg: None)

    def broken():
        raise RuntimeError("api-server exited")

    with pytest.raises(RuntimeError, match="api-server"):
        components.up_watching(broken, lambda: False)
    calls = []

    def failing():
        calls.append(1)
        raise ValueError("mirror down")

    components.up_watching(lambda: time.sleep(0.1), failing)
    assert calls == [1]
