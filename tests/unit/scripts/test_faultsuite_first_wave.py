"""A fresh stack queues one scheduled scrape run per agency at once; the fault suite puts each batch
on the agency whose run comes next, so that run scrapes it (faultsuite.articles.first_queued,
faultsuite.driver.Run.next_agency)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))  # scripts/ is not a package: its faultsuite is

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
