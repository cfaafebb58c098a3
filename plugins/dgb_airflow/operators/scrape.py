"""ScrapeAgencyOperator: scrape agencies into PostgreSQL and relay their events at once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from dgb_airflow.hooks.outbox import OutboxRelayHook
from dgb_airflow.operators.lifeline import TiedToSupervisor


class ScrapeAgencyOperator(TiedToSupervisor, BaseOperator):
    """Scrape one agency (or several, in turn) into PostgreSQL, events into the outbox, then
    relay them to Pub/Sub at once (the outbox_relay DAG is the safety net). Requests go through the
    per-host budget shared by every worker (:mod:`dgb.hostbudget`) at ``scrape`` priority.

    Reads DAG params / trigger conf ``start_date``, ``end_date`` (YYYY-MM-DD) and
    ``allow_update``. Fails (so Airflow retries with backoff) only when every agency of the
    task failed on the network; parse-level failures are recorded in ``scrape_runs``.

    :param agency_keys: keys of the agencies to scrape (templated), each configured for scraping.
    :param postgres_conn_id: Airflow connection of the news database.
    :param gcp_conn_id: Airflow connection of the Pub/Sub project the outbox is relayed to.
    """

    template_fields: Sequence[str] = ("agency_keys",)
    ui_color = "#d9f2e6"

    def __init__(
        self,
        *,
        agency_keys: Sequence[str],
        postgres_conn_id: str = "dgb_db",
        gcp_conn_id: str = "google_cloud_default",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.agency_keys = list(agency_keys)
        self.postgres_conn_id = postgres_conn_id
        self.gcp_conn_id = gcp_conn_id

    def execute(self, context: Any) -> list[dict]:
        from airflow.providers.postgres.hooks.postgres import PostgresHook

        from dgb.hostbudget import task_fetcher
        from dgb.scraper.conditional import ConditionalPolicy
        from dgb.scraper.dags import agency_by_key
        from dgb.scraper.run import ScrapeParams, scrape_agency

        params = ScrapeParams.from_params(
            {
                **(context.get("params") or {}),
                **((context["dag_run"].conf or {}) if context.get("dag_run") else {}),
            }
        )
        run_id = context.get("run_id")
        validators = ConditionalPolicy.from_env()
        conn = PostgresHook(postgres_conn_id=self.postgres_conn_id).get_conn()
        reports = []
        relay_hook = OutboxRelayHook(self.gcp_conn_id)  # one publisher for every agency's relay
        try:
            with task_fetcher("scrape") as fetcher:  # the host budget shared by every worker
                for key in self.agency_keys:
                    report = scrape_agency(  # first listing page conditional (a 304: nothing new)
                        conn, agency_by_key(key), fetcher, params, run_id=run_id, validators=validators
                    )
                    self.log.info("scrape %s: %s", key, report.as_dict())
                    reports.append(report.as_dict())
                    if report.new or report.updated:
                        relay_hook.relay_soon(conn, self.log)
                self.log.info("fetch stats: %s", fetcher.stats)
        finally:
            conn.close()
        if reports and all(
            r["status"] == "failed" and r["error_category"] == "network_error" for r in reports
        ):
            raise RuntimeError(f"every agency failed on the network: {[r['error_message'] for r in reports]}")
        return reports


class ScrapeDispatchOperator(TiedToSupervisor, BaseOperator):
    """Poll the agencies that are due now and start the scrape DAGs of those with news.

    Each agency's cadence is learnt from its publication history (:mod:`dgb.scraper.cadence`);
    each due agency's newest listing page is read here, through the per-host budget at ``scrape``
    priority (:func:`dgb.scraper.dispatch.run_tick`), and only a listing with an unknown item (or
    an error) starts the agency's scrape DAG: an event of its due asset, added through this task's
    outlet alias (``dgb.scraper.dags.DUE_ALIAS``). Writes every agency's cadence, reason and lag to
    ``scrape_cadence`` and the tick's polls per agency to ``listing_polls``.

    :param postgres_conn_id: Airflow connection of the news database.
    """

    ui_color = "#e6f2d9"

    def __init__(self, *, postgres_conn_id: str = "dgb_db", **kwargs):
        super().__init__(**kwargs)
        self.postgres_conn_id = postgres_conn_id

    def execute(self, context: Any) -> dict:
        from airflow.providers.postgres.hooks.postgres import PostgresHook
        from airflow.sdk import Asset, AssetAlias

        from dgb.hostbudget import task_fetcher
        from dgb.scraper.dags import DUE_ALIAS, due_asset, scrape_specs, selected_agencies
        from dgb.scraper.dispatch import run_tick

        agencies = {a.key: a for a in selected_agencies()}
        conn = PostgresHook(postgres_conn_id=self.postgres_conn_id).get_conn()
        try:
            with task_fetcher("scrape") as fetcher:
                decision = run_tick(conn, scrape_specs(), fetcher, agencies.__getitem__)
        finally:
            conn.close()
        events = context["outlet_events"][AssetAlias(DUE_ALIAS)]
        for dag_id in decision.triggered:
            name, uri = due_asset(dag_id)
            events.add(Asset(name=name, uri=uri))
        reasons: dict[str, int] = {}
        for a in decision.agencies:
            reasons[a.reason] = reasons.get(a.reason, 0) + 1
        polled = {p.key: p.error or p.new for p in decision.probes}
        cond = decision.conditional  # 304 hits / 200 misses / unconditional polls (still requests)
        self.log.info(
            "polled %s; started %s; agencies by reason: %s; conditional polls %s",
            polled,
            decision.triggered,
            reasons,
            cond,
        )
        return {
            "polled": len(decision.probes),
            "started": decision.triggered,
            "reasons": reasons,
            "conditional": cond,
        }
