"""OutboxRelayHook: publishes the transactional outbox (:mod:`dgb.outbox`) through the GCP
connection's Pub/Sub. Every operator relays right after its commit so the next stage starts at
once (:meth:`OutboxRelayHook.relay_soon`: a short timeout, one batch, no lock held while waiting);
the ``outbox_relay`` DAG is the safety net that publishes whatever a relay left behind, and
purges published rows past the retention."""

from __future__ import annotations

import importlib
import logging
import threading
from typing import Any

from airflow.sdk.bases.hook import BaseHook

from dgb.pubsub_clients import emulator_host, publisher_client

SOON_TIMEOUT_S = 5.0  # the relay right after a commit waits at most this long on Pub/Sub
SOON_MAX_BATCHES = 2


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
        self._publisher: tuple[Any, str] | None = None

    def relay(self, conn: Any, batch_size: int = 500, *, timeout: float = 30.0, max_batches: int = 20):
        """Publish the due outbox rows; returns the :class:`dgb.outbox.RelayResult`.

        :param conn: a psycopg connection to the news database (its own transactions are used).
        :param batch_size: rows published per batch.
        :param timeout: seconds one batch may wait on Pub/Sub.
        :param max_batches: most batches in this call.
        """
        from dgb import outbox

        publisher, project = self.publisher()
        return outbox.relay(
            conn, publisher, project, batch_size=batch_size, timeout=timeout, max_batches=max_batches
        )

    def publisher(self) -> tuple[Any, str]:
        """The connection's Pub/Sub publisher client and project, made once per hook: a stage
        task relays after every committed chunk, and a new client each time cost a connection
        look-up (a round trip to the API server) and a new gRPC channel.

        Through :class:`dgb_airflow.hooks.pubsub.DgbPubSubHook` (the Google provider's credentials
        handling), except against the emulator (``PUBSUB_EMULATOR_HOST`` set) with a project in the
        connection: then a plain anonymous client, because every stage task relays and the
        provider's imports cost it about a second on a loaded machine for credentials the emulator
        never reads.
        """
        if self._publisher is None:
            self._publisher = self._new_publisher()
        return self._publisher

    def _new_publisher(self) -> tuple[Any, str]:
        if emulator_host():
            extra = self.get_connection(self.gcp_conn_id).extra_dejson
            project = extra.get("project") or extra.get("extra__google_cloud_platform__project")
            if project:
                return publisher_client(), project
        from dgb_airflow.hooks.pubsub import DgbPubSubHook

        hook = DgbPubSubHook(gcp_conn_id=self.gcp_conn_id)
        return hook.get_conn(), hook.project_id

    def relay_soon(self, conn: Any, log: logging.Logger | None = None) -> None:
        """Relay right after a commit; a failure is only logged (the work is committed and the
        ``outbox_relay`` DAG publishes it within a minute).

        :param conn: a psycopg connection to the news database.
        :param log: where to report (default: this hook's logger).
        """
        log = log or self.log
        try:
            log.info("relay: %s", self.relay(conn, timeout=SOON_TIMEOUT_S, max_batches=SOON_MAX_BATCHES))
        except Exception as exc:
            log.warning("relay after commit failed (outbox_relay will retry): %s", exc)


def preload_publisher() -> None:
    """Import the Pub/Sub client library in a background thread, so the relay right after a
    commit does not wait for the import (about a second on a loaded machine): a stage task calls
    this first, and the import overlaps the stage's own database and model-service waits."""
    args = ("google.cloud.pubsub_v1",)
    threading.Thread(target=importlib.import_module, args=args, name="dgb-preload", daemon=True).start()


def relay_outbox(conn: Any, gcp_conn_id: str = OutboxRelayHook.default_conn_name, batch_size: int = 500):
    """``OutboxRelayHook(gcp_conn_id).relay(conn, batch_size)``: returns the RelayResult."""
    return OutboxRelayHook(gcp_conn_id).relay(conn, batch_size=batch_size)
