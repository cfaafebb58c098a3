"""Operator of the integrity DAGs: check one tier's due articles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from dgb_airflow.metrics import incr as _incr


class IntegrityTierOperator(BaseOperator):
    """Re-check up to ``limit`` due articles of one integrity tier.

    Content by conditional GET (304 = unchanged), images by HEAD (GET+Range fallback), through
    the shared polite :class:`dgb.fetch.Fetcher` with the SSRF guard on every redirect hop and
    connections pinned to vetted addresses. Yields early (returns ``skipped_backlog``) when the
    event pipeline is behind. Emits ``dgb.integrity.checks`` / ``dgb.integrity.outcome.<o>``
    counters (tags: tier, agency), and ``dgb.integrity.breaker.tripped`` / ``.cleared`` (tags:
    scope, key) when an agency's or host's removal breaker changes (issue 16). Per-article
    failures are recorded as ``error`` outcomes; the task fails (to be retried) only when the
    database is unreachable or every check errored.

    :param tier: the integrity tier (e.g. ``0_2d``) whose due articles are checked (templated).
    :param limit: most articles checked in this run (templated; None: the tier's default).
    :param postgres_conn_id: Airflow connection of the news database.
    :param max_seconds: stop taking up new articles after this many seconds (None: no limit).
    """

    template_fields: Sequence[str] = ("tier", "limit")
    ui_color = "#fdf0d5"

    def __init__(
        self,
        *,
        tier: str,
        limit: int | None = None,
        postgres_conn_id: str = "dgb_db",
        max_seconds: float | None = None,
        **kwargs,
    ):
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
            for change in result.breaker_changes:  # the breaker's events: a trip pauses removals
                _incr(f"dgb.integrity.breaker.{change.event}", 1, {"scope": change.scope, "key": change.key})
                self.log.warning("integrity breaker %s: %s", change.event, change.as_dict())

        conn = PostgresHook(postgres_conn_id=self.postgres_conn_id).get_conn()
        try:
            with make_fetcher() as fetcher:
                summary = run_tier(
                    conn,
                    fetcher,
                    self.tier,
                    int(self.limit) if self.limit else None,
                    max_seconds=self.max_seconds,
                    on_result=on_result,
                )
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
