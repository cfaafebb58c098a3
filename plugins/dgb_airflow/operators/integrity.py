"""Operator of the integrity DAGs: check one tier's due articles."""

from __future__ import annotations

import logging
from typing import Any, Sequence

from airflow.sdk import BaseOperator

log = logging.getLogger(__name__)


def _incr(stat: str, count: int = 1, tags: dict | None = None) -> None:
    """StatsD/OTel counter through Airflow's metrics, if configured; never raises."""
    try:
        from airflow.sdk.observability import stats
    except Exception:  # noqa: BLE001 - older/newer Airflow layouts
        try:
            from airflow.stats import Stats as stats  # type: ignore[no-redef]
        except Exception:  # noqa: BLE001
            return
    try:
        stats.incr(stat, count, tags=tags or {})
    except TypeError:
        try:
            stats.incr(stat, count)
        except Exception:  # noqa: BLE001
            pass
    except Exception:  # noqa: BLE001
        log.debug("metrics: incr %s failed", stat, exc_info=True)


class IntegrityTierOperator(BaseOperator):
    """Re-check up to ``limit`` due articles of one integrity tier.

    Content by conditional GET (304 = unchanged), images by HEAD (GET+Range fallback), through
    the shared polite :class:`dgb.fetch.Fetcher` with the SSRF guard on every redirect hop and
    connections pinned to vetted addresses. Yields early (returns ``skipped_backlog``) when the
    event pipeline is behind. Emits ``dgb.integrity.checks`` / ``dgb.integrity.outcome.<o>``
    counters (tags: tier, agency), and ``dgb.integrity.breaker.tripped`` / ``.cleared`` (tags:
    scope, key) when an agency's or host's removal breaker changes (issue 16). Per-article
    failures are recorded as ``error`` outcomes; the task fails (to be retried) only when the database is unreachable or every check errored.
    """

    template_fields: Sequence[str] = ("tier", "limit")
    ui_color = "#fdf0d5"

    def __init__(self, *, tier: str, limit: int | None = None, postgres_conn_id: str = "dgb_db",
                 max_seconds: float | None = None, **kwargs):
        super().__init__(**kwargs)
        self.tier = tier
        self.limit = limit
        self.postgres_conn_id = postgres_conn_id
        self.max_seconds = max_seconds

    def execute(self, context: Any) -> dict:
        from airflow.providers.postgres.hooks.postgres import PostgresHook

        from dgb.integrity.cli import make_fetcher
        from dgb.integrity.service import run_tier

        def on_result(result) -> None:
            tags = {"tier": result.tier, "agency": result.agency_key}
            _incr("dgb.integrity.checks", 1, tags)
            _incr(f"dgb.integrity.outcome.{result.outcome}", 1, tags)
            if result.image is not None:
                _incr(f"dgb.integrity.image.{result.image.status}", 1, tags)
            for change in result.breaker_changes:   # the breaker's events: a trip pauses removals
                _incr(f"dgb.integrity.breaker.{change.event}", 1, {"scope": change.scope, "key": change.key})
                self.log.warning("integrity breaker %s: %s", change.event, change.as_dict())

        conn = PostgresHook(postgres_conn_id=self.postgres_conn_id).get_conn()
        try:
            with make_fetcher() as fetcher:
                summary = run_tier(conn, fetcher, self.tier, int(self.limit) if self.limit else None,
                                   max_seconds=self.max_seconds, on_result=on_result)
                self.log.info("fetch stats: %s", fetcher.stats)
        finally:
            conn.close()
        out = summary.as_dict()
        self.log.info("integrity tier %s: %s", self.tier, out)
        if summary.skipped_backlog:
            _incr("dgb.integrity.skipped_backlog", 1, {"tier": self.tier})
        if summary.checked >= 5 and summary.outcomes.get("error", 0) == summary.checked:
            raise RuntimeError(f"every integrity check of tier {self.tier} failed: {out}")
        return out
