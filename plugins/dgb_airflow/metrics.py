"""The operators' metrics, in one place: counters and gauges through Airflow's stats (StatsD or
OpenTelemetry when ``[metrics]`` turns them on, no-ops otherwise). Metrics are best effort: a
failure is logged at debug level and never fails a task."""

from __future__ import annotations

import logging
import re
from typing import Any

from airflow.sdk.observability import stats

log = logging.getLogger(__name__)


def incr(stat: str, count: int = 1, tags: dict | None = None) -> None:
    """Add ``count`` to the counter ``stat`` (tags go to backends that support them)."""
    try:
        stats.incr(stat, count, tags=tags or {})
    except Exception:
        log.debug("metrics: incr %s failed", stat, exc_info=True)


def metric_name(name: str) -> str:
    """``name`` as one StatsD name segment (dots and unusual characters become ``_``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name.replace(".", "_"))


def emit_metrics(prefix: str, values: dict[str, Any]) -> None:
    """A gauge ``dgb.<prefix>.<key>`` for each numeric value of ``values`` (others are skipped)."""
    for key, value in values.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                stats.gauge(f"dgb.{prefix}.{metric_name(key)}", value)
            except Exception:
                log.debug("metrics: gauge %s.%s failed", prefix, key, exc_info=True)
                return
