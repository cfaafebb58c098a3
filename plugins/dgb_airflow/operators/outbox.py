"""OutboxRelayOperator: the ``outbox_relay`` DAG's task, the safety net behind the relay every
stage and scrape task runs right after its commit (:class:`dgb_airflow.hooks.outbox.OutboxRelayHook`)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from dgb_airflow.hooks.outbox import relay_outbox
from dgb_airflow.operators.lifeline import TiedToSupervisor


class OutboxRelayOperator(TiedToSupervisor, BaseOperator):
    """Publish pending outbox events to Pub/Sub, then purge published rows past the retention
    (``DGB_OUTBOX_RETENTION_DAYS``). Fails (to be retried) only if a retryable publish failed:
    rows Pub/Sub refused for good move to the terminal ``failed`` state, are logged and counted
    (``dgb status``), and never fail the run again.

    :param postgres_conn_id: Airflow connection of the news database (whose outbox is relayed).
    :param gcp_conn_id: Airflow connection of the Pub/Sub project published to.
    :param batch_size: outbox rows published per batch.
    :param purge: delete published rows older than the retention after relaying.
    """

    ui_color = "#e6ecf9"

    def __init__(
        self,
        *,
        postgres_conn_id: str = "dgb_db",
        gcp_conn_id: str = "google_cloud_default",
        batch_size: int = 500,
        purge: bool = True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.postgres_conn_id = postgres_conn_id
        self.gcp_conn_id = gcp_conn_id
        self.batch_size = batch_size
        self.purge = purge

    def execute(self, context: Any) -> dict:
        from airflow.providers.postgres.hooks.postgres import PostgresHook

        from dgb import outbox

        conn = PostgresHook(postgres_conn_id=self.postgres_conn_id).get_conn()
        try:
            result = relay_outbox(conn, self.gcp_conn_id, self.batch_size)
            purged = outbox.purge_published(conn) if self.purge else 0
            pending, failed = outbox.pending_count(conn), outbox.failed_count(conn)
            conn.commit()
        finally:
            conn.close()
        self.log.info(
            "outbox relay: %s, still pending: %d, failed (terminal): %d, purged: %d",
            result,
            pending,
            failed,
            purged,
        )
        if result.terminal:
            self.log.error(
                "outbox relay: %d events refused by Pub/Sub for good (state failed, see outbox.last_error)",
                result.terminal,
            )
        if result.failed:
            raise RuntimeError(f"outbox relay: {result}")
        return {"published": result.published, "pending": pending, "failed": failed, "purged": purged}
