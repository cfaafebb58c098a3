"""Operators of the integrity DAGs: a budget run (the default schedule) or one tier's due articles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from dgb_airflow.metrics import emit_metrics
from dgb_airflow.metrics import incr as _incr
from dgb_airflow.operators.lifeline import TiedToSupervisor


def _result_metrics(result, log) -> None:
    """Counters of one check (tags: tier, agency) and the removal breakers' events."""
    tags = {"tier": result.tier, "agency": result.agency_key}
    _incr("dgb.integrity.checks", 1, tags)
    _incr(f"dgb.integrity.outcome.{result.outcome}", 1, tags)
    if result.image is not None:
        _incr(f"dgb.integrity.image.{result.image.status}", 1, tags)
    for change in result.breaker_changes:  # the breaker's events: a trip pauses removals
        _incr(f"dgb.integrity.breaker.{change.event}", 1, {"scope": change.scope, "key": change.key})
        log.warning("integrity breaker %s: %s", change.event, change.as_dict())


def emit_band_gauges(conn, log) -> list[dict]:
    """Gauges ``dgb.integrity.band.<band>.{articles,coverage,overdue,oldest_overdue_hours,...}``
    from :func:`dgb.integrity.report.band_figures` (best effort, like every metric)."""
    from dgb.integrity.report import band_figures

    try:
        bands = band_figures(conn)
    except Exception:
        conn.rollback()
        log.warning("integrity: per-band figures failed", exc_info=True)
        return []
    for b in bands:
        emit_metrics(f"integrity.band.{b['band']}", {k: v for k, v in b.items() if v is not None})
    return bands


class IntegrityBudgetOperator(TiedToSupervisor, BaseOperator):
    """One run of the budget scheduler (issue 14): what the request budget allows in this slot.

    :func:`dgb.integrity.runs.run_budget` chooses over every article (under 3 h first every
    ~10 min, then articles overdue for a month or with removal evidence due, then by expected
    value per cost) and checks them in that order through the polite :class:`dgb.fetch.Fetcher`
    (where the shared host budget hands out each request's turn) with the SSRF guard. It stops
    at ``max_seconds`` (the slot) or when the system gets loaded (the DAG's load sensor gates the
    start). Emits the per-check counters of :class:`IntegrityTierOperator`,
    ``dgb.integrity.budget.{planned,checked,requests,capacity}`` gauges and the per-band gauges
    (:func:`emit_band_gauges`).

    :param budget_rps: requests/s for this run (None: ``DGB_INTEGRITY_BUDGET_RPS`` if set, else what the
        scrapes leave of the host budget, :mod:`dgb.integrity.share`).
    :param postgres_conn_id: Airflow connection of the news database.
    :param max_seconds: stop taking up new checks after this many seconds (None: the slot).
    """

    template_fields: Sequence[str] = ("budget_rps",)
    ui_color = "#fdf0d5"

    def __init__(
        self,
        *,
        budget_rps: float | None = None,
        postgres_conn_id: str = "dgb_db",
        max_seconds: float | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.budget_rps = budget_rps
        self.postgres_conn_id = postgres_conn_id
        self.max_seconds = max_seconds

    def execute(self, context: Any) -> dict:
        from airflow.providers.postgres.hooks.postgres import PostgresHook

        from dgb.integrity.cli import make_fetcher
        from dgb.integrity.runs import run_budget
        from dgb.integrity.tiers import BudgetPolicy

        policy = BudgetPolicy.from_env()
        max_seconds = self.max_seconds if self.max_seconds is not None else policy.slot_seconds * 0.9
        conn = PostgresHook(postgres_conn_id=self.postgres_conn_id).get_conn()
        try:
            with make_fetcher() as fetcher:
                summary = run_budget(
                    conn,
                    fetcher,
                    policy=policy,
                    budget_rps=float(self.budget_rps) if self.budget_rps else None,
                    max_seconds=max_seconds,
                    on_result=lambda r: _result_metrics(r, self.log),
                )
                self.log.info("fetch stats: %s", fetcher.stats)
            out = summary.as_dict()
            out["bands"] = emit_band_gauges(conn, self.log)
        finally:
            conn.close()
        emit_metrics(
            "integrity.budget",
            {k: out[k] for k in ("capacity", "candidates", "planned", "checked", "requests", "seconds")},
        )
        self.log.info("integrity budget run: %s", out)
        if summary.checked >= 5 and summary.outcomes.get("error", 0) == summary.checked:
            raise RuntimeError(f"every integrity check of this run failed: {out}")
        return out


class IntegrityTierOperator(TiedToSupervisor, BaseOperator):
    """Re-check up to ``limit`` due articles of one integrity tier.

    Content by conditional GET (304 = unchanged), images by HEAD (GET+Range fallback), through
    the shared polite :class:`dgb.fetch.Fetcher` with the SSRF guard on every redirect hop and
    connections pinned to vetted addresses. The DAG's load sensor waits first; if the event
    pipeline is behind all the same, the task is skipped (nothing checked) or stops early
    (``skipped_backlog`` in its result). Emits ``dgb.integrity.checks`` / ``dgb.integrity.outcome.<o>``
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
        from dgb.integrity.runs import run_tier

        def on_result(result) -> None:
            _result_metrics(result, self.log)

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
            bands = emit_band_gauges(conn, self.log)
        finally:
            conn.close()
        out = summary.as_dict()
        out["bands"] = bands
        self.log.info("integrity tier %s: %s", self.tier, out)
        if summary.skipped_backlog:
            _incr("dgb.integrity.skipped_backlog", 1, {"tier": self.tier})
            if summary.checked == 0:  # shown as skipped, not as a successful run
                from airflow.sdk.exceptions import AirflowSkipException

                raise AirflowSkipException(summary.note or "skipped_backlog")
        if summary.checked >= 5 and summary.outcomes.get("error", 0) == summary.checked:
            raise RuntimeError(f"every integrity check of tier {self.tier} failed: {out}")
        return out
