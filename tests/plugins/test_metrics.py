"""dgb_airflow.metrics: the one metrics shim. Counters and gauges go through Airflow's real stats
module to its configured backend (a recording backend here, in place of StatsD), and a failing
backend never fails the caller."""

from __future__ import annotations

import pytest
from airflow.sdk._shared.observability.metrics import stats as stats_module

from dgb_airflow import metrics


class _Recorder:
    """A stats backend (Airflow's StatsLogger protocol) that keeps what it was sent."""

    def __init__(self, sink: list, fail: bool = False):
        self.sink, self.fail = sink, fail

    def incr(self, stat, count=1, rate=1, *, tags=None):
        if self.fail:
            raise OSError("statsd unreachable")
        self.sink.append(("incr", stat, count, tags))

    def gauge(self, stat, value, rate=1, delta=False, *, tags=None):
        if self.fail:
            raise OSError("statsd unreachable")
        self.sink.append(("gauge", stat, value, tags))


def _install(backend) -> tuple:
    saved = (stats_module._factory, stats_module._backend, stats_module._export_legacy_names)
    stats_module.initialize(factory=lambda: backend, export_legacy_names=False)
    return saved


def _restore(saved: tuple) -> None:
    stats_module._factory, stats_module._backend, stats_module._export_legacy_names = saved


@pytest.fixture
def recorded_metrics():
    sink: list = []
    saved = _install(_Recorder(sink))
    yield sink
    _restore(saved)


def test_incr_reaches_the_backend_with_tags(recorded_metrics):
    metrics.incr("dgb.test.checks", 2, {"tier": "0_2d"})
    metrics.incr("dgb.test.plain")
    assert recorded_metrics == [("incr", "dgb.test.checks", 2, {"tier": "0_2d"}),
                                ("incr", "dgb.test.plain", 1, None)]     # no tags: none sent


def test_emit_metrics_sends_numeric_values_as_gauges(recorded_metrics):
    metrics.emit_metrics("reconcile.daily.found", {"enrich": 3, "index.update": 1.5, "ok": True, "why": "x"})
    assert recorded_metrics == [("gauge", "dgb.reconcile.daily.found.enrich", 3, None),
                                ("gauge", "dgb.reconcile.daily.found.index_update", 1.5, None)]
    assert metrics.metric_name("a.b c/d") == "a_b_c_d"


def test_a_failing_backend_never_fails_the_caller():
    saved = _install(_Recorder([], fail=True))
    try:
        metrics.incr("dgb.test.checks")
        metrics.emit_metrics("x", {"n": 1})
    finally:
        _restore(saved)
