"""OutboxRelayHook: publishes the transactional outbox (:mod:`dgb.outbox`) through the GCP
connection's Pub/Sub. Every operator relays right after its commit so the next stage starts at
once; the ``outbox_relay`` DAG is the safety net that publishes whatever a relay left behind."""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk.bases.hook import BaseHook


class OutboxRelayHook(BaseHook):
    """Relay pending outbox rows of a PostgreSQL connection to Pub/Sub.

    :param gcp_conn_id: Airflow connection with the GCP credentials and project the events are
        published to (through :class:`dgb_airflow.hooks.pubsub.DgbPubSubHook`).
    """

    conn_name_attr = "gcp_conn_id"
    default_conn_name = "google_cloud_default"
    conn_type = "google_cloud_platform"
    hook_name = "DGB outbox relay"

    def __init__(self, gcp_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.gcp_conn_id = gcp_conn_id

    def relay(self, conn: Any, batch_size: int = 500):
        """Publish the due outbox rows; returns the :class:`dgb.outbox.RelayResult`.

        :param conn: a psycopg connection to the news database (its own transactions are used).
        :param batch_size: rows published per batch.
        """
        from dgb import outbox
        from dgb_airflow.hooks.pubsub import DgbPubSubHook

        hook = DgbPubSubHook(gcp_conn_id=self.gcp_conn_id)
        return outbox.relay(conn, hook.get_conn(), hook.project_id, batch_size=batch_size)

    def relay_soon(self, conn: Any, log: logging.Logger | None = None) -> None:
        """Relay right after a commit; a failure is only logged (the work is committed and the
        ``outbox_relay`` DAG publishes it within a minute).

        :param conn: a psycopg connection to the news database.
        :param log: where to report (default: this hook's logger).
        """
        log = log or self.log
        try:
            log.info("relay: %s", self.relay(conn))
        except Exception as exc:
            log.warning("relay after commit failed (outbox_relay will retry): %s", exc)


def relay_outbox(conn: Any, gcp_conn_id: str = OutboxRelayHook.default_conn_name, batch_size: int = 500):
    """``OutboxRelayHook(gcp_conn_id).relay(conn, batch_size)``: returns the RelayResult."""
    return OutboxRelayHook(gcp_conn_id).relay(conn, batch_size=batch_size)


def relay_soon(conn: Any, gcp_conn_id: str, log: logging.Logger) -> None:
    """``OutboxRelayHook(gcp_conn_id).relay_soon(conn, log)``: never raises."""
    OutboxRelayHook(gcp_conn_id).relay_soon(conn, log)
