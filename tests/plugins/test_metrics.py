"""dgb_airflow.metrics: the one metrics shim. Counters and gauges go through Airflow's real stats
module to its configured backend (a recording backend here, in place of StatsD: the statsd
package is not installed), and a failing backend never fails the caller."""

from __future__ import annotations

from dgb_airflow import metrics
from tests.support.airflow_stats import StatsRecorder, install_stats_backend, restore_stats_backend


def test_incr_reaches_the_backend_with_tags(recorded_metrics):
    metrics.incr("dgb.test.checks", 2, {"tier": "0_2d"})
    metrics.incr("dgb.test.plain")
    assert recorded_metrics == [
        ("incr", "dgb.test.checks", 2, {"tier": "0_2d"}),
        ("incr", "dgb.test.plain", 1, None),
    ]  # no tags: none sent


def test_emit_metrics_sends_numeric_values_as_gauges(recorded_metrics):
    metrics.emit_metrics("reconcile.daily.found", {"enrich": 3, "index.update": 1.5, "ok": True, "why": "x"})
    assert recorded_metrics == [
        ("gauge", "dgb.reconcile.daily.found.enrich", 3, None),
        ("gauge", "dgb.reconcile.daily.found.index_update", 1.5, None),
    ]
    assert metrics.metric_name("a.b c/d") == "a_b_c_d"


def test_a_failing_backend_never_fails_the_caller():
    saved = install_stats_backend(StatsRecorder([], fail=True))
    try:
        metrics.incr("dgb.test.checks")
        metrics.emit_metrics("x", {"n": 1})
    finally:
        restore_stats_backend(saved)
