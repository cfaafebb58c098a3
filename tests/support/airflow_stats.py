"""A recording backend for Airflow's stats (what the operators send as metrics), and installing it."""

from __future__ import annotations

from airflow.sdk._shared.observability.metrics import stats as stats_module


class StatsRecorder:
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


def install_stats_backend(backend) -> tuple:
    saved = (stats_module._factory, stats_module._backend, stats_module._export_legacy_names)
    stats_module.initialize(factory=lambda: backend, export_legacy_names=False)
    return saved


def restore_stats_backend(saved: tuple) -> None:
    stats_module._factory, stats_module._backend, stats_module._export_legacy_names = saved
