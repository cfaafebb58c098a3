"""Operators of the engagement jobs (dgb.engagement): the trending scores and the Umami view-count
import. Each computes in PostgreSQL (``dgb_db``), writes the changed values into
``news_features`` and pushes them to Typesense (``typesense_default``, the alias of
``DGB_TYPESENSE_COLLECTION``) as partial updates in the same run. Reports: the task log, an
``engagement_runs`` row, StatsD gauges ``dgb.engagement.<kind>.*`` (when metrics are on)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from dgb_airflow.metrics import emit_metrics
from dgb_airflow.operators.lifeline import TiedToSupervisor

SAMPLE = 20  # changed ids shown in the log and the XCom


class _EngagementOperator(TiedToSupervisor, BaseOperator):
    """Shared base: the news database and Typesense connections.

    :param postgres_conn_id: Airflow connection of the news database.
    :param typesense_conn_id: Airflow connection of Typesense.
    :param batch_size: partial updates per import request.
    """

    ui_color = "#e8f4ea"

    def __init__(
        self,
        *,
        postgres_conn_id: str = "dgb_db",
        typesense_conn_id: str = "typesense_default",
        batch_size: int = 500,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.postgres_conn_id = postgres_conn_id
        self.typesense_conn_id = typesense_conn_id
        self.batch_size = batch_size

    def _pg(self):
        from airflow.providers.postgres.hooks.postgres import PostgresHook

        return PostgresHook(postgres_conn_id=self.postgres_conn_id).get_conn()

    def _typesense(self):
        from dgb_airflow.hooks.typesense import TypesenseHook

        return TypesenseHook(self.typesense_conn_id).get_conn()

    def _report(self, kind: str, figures: dict) -> dict:
        changed = figures.pop("changed_ids", [])
        figures["changed_sample"] = changed[:SAMPLE]
        self.log.info("%s: %s", kind, figures)
        emit_metrics(f"engagement.{kind}", figures)
        return figures


class TrendingOperator(_EngagementOperator):
    """Recompute the live trending scores, expire those 24 hours old, push the changed ones
    (:func:`dgb.engagement.trending.run`)."""

    def execute(self, context: Any) -> dict:
        from dgb.config import settings
        from dgb.engagement import trending

        conn = self._pg()
        try:
            figures = trending.run(
                conn, self._typesense(), settings().typesense_collection, batch_size=self.batch_size
            )
        finally:
            conn.close()
        return self._report("trending", figures)


class EngagementImportOperator(_EngagementOperator):
    """Import view counts from Umami (:func:`dgb.engagement.views.run`); skipped (not failed)
    when the Umami connection does not exist: the import is optional. Fails, writing nothing, when
    the source's counts look wrong (none, or a sharp drop: ``DGB_ENGAGEMENT_MAX_DROP``); a run
    triggered with ``{"force": true}`` imports without that check.

    :param umami_conn_id: Airflow connection of Umami's PostgreSQL (read only).
    """

    def __init__(self, *, umami_conn_id: str = "umami_db", **kwargs):
        super().__init__(**kwargs)
        self.umami_conn_id = umami_conn_id

    def execute(self, context: Any) -> dict:
        from airflow.sdk.exceptions import AirflowSkipException

        from dgb.config import settings
        from dgb.config.engagement import engagement_days, umami_website_ids
        from dgb.engagement import views
        from dgb_airflow.hooks.umami import UmamiHook

        hook = UmamiHook(self.umami_conn_id)
        if not hook.configured():
            raise AirflowSkipException(
                f"no Airflow connection {self.umami_conn_id!r}: the Umami view-count import is off"
            )
        umami = hook.get_conn()
        conn = self._pg()
        try:
            figures = views.run(
                conn,
                umami,
                self._typesense(),
                settings().typesense_collection,
                days=engagement_days(),
                website_ids=umami_website_ids(),
                batch_size=self.batch_size,
                force=_forced(context),
            )
        finally:
            conn.close()
            umami.close()
        return self._report("views", figures)


def _forced(context: Any) -> bool:
    """Whether the DAG run was triggered with ``{"force": true}`` in its configuration."""
    run = (context or {}).get("dag_run")
    conf = getattr(run, "conf", None) or {}
    return conf.get("force") is True
