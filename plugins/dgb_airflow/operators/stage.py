"""StageOperator: runs one event-driven stage over the messages that triggered the DAG run."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import BaseOperator

from dgb_airflow.operators.lifeline import TiedToSupervisor


def triggering_events(context: Any) -> Iterator[tuple[str, Any]]:
    """(subscription, asset event) for every asset event that triggered this run."""
    accessor = context.get("triggering_asset_events") or {}
    for key, asset_events in accessor.items():
        for ev in asset_events:
            asset = getattr(ev, "asset", None) or key
            yield getattr(asset, "name", None) or str(key), ev


def triggering_messages(context: Any) -> list:
    """Every message of every asset event that triggered this run (events get coalesced)."""
    from dgb.pipeline.messages import InMessage

    messages = []
    for subscription, ev in triggering_events(context):
        payload = (ev.extra or {}).get("payload")
        if not isinstance(payload, dict):
            continue
        if isinstance(payload.get("messages"), list):  # a pulled batch (the trigger's events)
            for message in payload["messages"]:
                if isinstance(message, dict):
                    messages.append(InMessage.from_payload(subscription, message))
        elif "message_id" in payload:  # one message: events stored before batches
            messages.append(InMessage.from_payload(subscription, payload))
    return messages


def split_wake(messages: list, inputs: tuple[str, ...]) -> tuple[list, list]:
    """``messages`` split into the stage's own (from its ``inputs`` subscriptions) and those that
    only woke its DAG (an earlier stage's input: :mod:`dgb.pipeline.dags`), which it never does."""
    own = [m for m in messages if m.subscription in inputs]
    return own, [m for m in messages if m.subscription not in inputs]


def woken_s_ago(context: Any, inputs: tuple[str, ...], now: datetime | None = None) -> float | None:
    """Seconds since the newest triggering asset event of a subscription outside the stage's
    ``inputs`` (one that woke the DAG) was stored; None when no such event triggered the run."""
    newest = None
    for subscription, ev in triggering_events(context):
        stamp = getattr(ev, "timestamp", None)
        if subscription not in inputs and isinstance(stamp, datetime) and (newest is None or stamp > newest):
            newest = stamp
    if newest is None:
        return None
    if newest.tzinfo is None:
        newest = newest.replace(tzinfo=UTC)
    return max(((now or datetime.now(UTC)) - newest).total_seconds(), 0.0)


def build_stage(
    name: str, conn, *, typesense_conn_id: str = "typesense_default", model_conn_id: str = "dgb_model_service"
):
    """The stage ``name`` on ``conn``, its embedder and Typesense client from Airflow connections
    (built only when the stage asks): shared by the stage DAGs and replay's seek mode."""
    from dgb.config import settings
    from dgb.pipeline import stages

    def embedder():
        from dgb_airflow.hooks.model_service import ModelServiceHook

        return ModelServiceHook(model_conn_id).get_conn()

    def typesense():
        from dgb_airflow.hooks.typesense import TypesenseHook

        return TypesenseHook(typesense_conn_id).get_conn()

    return stages.build(name, conn, settings(), stages.Dependencies(embedder=embedder, typesense=typesense))


class StageOperator(TiedToSupervisor, BaseOperator):
    """Consume -> process -> publish for one stage (``enrich``, ``embed`` or ``index``).

    Reads every triggering asset event (messages of another stage's input only woke the DAG: the
    run does none of them and waits, warm, for the work they announce), also sweeps pending work
    from PostgreSQL (bounded), accepts manual runs with ``{"unique_ids": [...]}``, and processes
    it in chunks: each chunk's
    results, next events and token ledger commit in one transaction, then the outbox is relayed
    so the next stage starts on the first chunk. No new chunk starts past ``deadline_s``; the
    rest stays pending for the next run. Transient failures (outages) never dead-letter: the task
    ends retryable (``StageRetry``) while Airflow tries remain, and succeeds on the last try with
    the work still pending for the 1-minute sweep (see dgb.pipeline.runner).

    :param stage: ``enrich``, ``embed`` or ``index``.
    :param postgres_conn_id: Airflow connection of the news database.
    :param gcp_conn_id: Airflow connection of the Pub/Sub project the outbox is relayed to.
    :param typesense_conn_id: Airflow connection of Typesense (the index stage).
    :param model_conn_id: Airflow connection of the model service (embeddings; the local classifier).
    :param sweep_limit: most pending articles taken up from PostgreSQL besides the messages.
    :param chunk_size: articles per committed chunk (default ``DGB_STAGE_CHUNK_SIZE``, 25).
    :param deadline_s: seconds after which no new chunk starts (default ``DGB_STAGE_DEADLINE_S``,
        600: well inside the stage DAGs' 30 min run timeout).
    :param linger_s: once it has done work, the run goes on sweeping what becomes pending
        (at each notified commit of its input topics, at least every 0.5 s) until this many
        seconds pass with nothing to do (default
        ``DGB_STAGE_LINGER_S``, 60; 0: end at once), so the next article, and a backlog flowing in
        from the previous stage, are taken by a warm run instead of one DAG run per event
        (:func:`dgb.pipeline.runner.keep_sweeping`; not after an outage or the deadline, not
        after a run that found nothing).
    :param linger_max_s: the longest a run goes on sweeping (default ``DGB_STAGE_LINGER_MAX_S``, 540).
    """

    ui_color = "#f3e8fd"

    def __init__(
        self,
        *,
        stage: str,
        postgres_conn_id: str = "dgb_db",
        gcp_conn_id: str = "google_cloud_default",
        typesense_conn_id: str = "typesense_default",
        model_conn_id: str = "dgb_model_service",
        sweep_limit: int = 1000,
        chunk_size: int | None = None,
        deadline_s: float | None = None,
        linger_s: float | None = None,
        linger_max_s: float | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.stage = stage
        self.postgres_conn_id = postgres_conn_id
        self.gcp_conn_id = gcp_conn_id
        self.typesense_conn_id = typesense_conn_id
        self.model_conn_id = model_conn_id
        self.sweep_limit = sweep_limit
        self.chunk_size = chunk_size
        self.deadline_s = deadline_s
        self.linger_s = linger_s
        self.linger_max_s = linger_max_s

    def _build(self, conn):
        return build_stage(
            self.stage, conn, typesense_conn_id=self.typesense_conn_id, model_conn_id=self.model_conn_id
        )

    def execute(self, context: Any) -> dict:
        from airflow.providers.postgres.hooks.postgres import PostgresHook

        from dgb.config.pipeline import (
            stage_blas_threads,
            stage_deadline_s,
            stage_linger_max_s,
            stage_linger_s,
        )
        from dgb.pipeline.definitions import definition
        from dgb.pipeline.runner import RunOptions, keep_sweeping, run_stage, unavailable_at_start
        from dgb.pipeline.threads import blas_threads
        from dgb_airflow.hooks.outbox import OutboxRelayHook, preload_publisher

        inputs = definition(self.stage).subscriptions
        messages, wake = split_wake(triggering_messages(context), inputs)
        woken = woken_s_ago(context, inputs) if wake else None
        if woken is not None:
            self.log.info("woken by %d message(s) of an earlier stage, %.1f s ago", len(wake), woken)
        conf = (context["dag_run"].conf or {}) if context.get("dag_run") else {}
        unique_ids = conf.get("unique_ids") or []
        if not isinstance(unique_ids, list) or not all(isinstance(u, str) for u in unique_ids):
            raise ValueError("conf 'unique_ids' must be a list of strings")
        ti = context["ti"]
        final_attempt = ti.try_number > (self.retries or 0)
        deadline_s = self.deadline_s
        if deadline_s is None:
            deadline_s = stage_deadline_s()
        linger_s = self.linger_s
        if linger_s is None:
            linger_s = stage_linger_s()
        linger_max_s = self.linger_max_s
        if linger_max_s is None:
            linger_max_s = stage_linger_max_s()
        conn = PostgresHook(postgres_conn_id=self.postgres_conn_id).get_conn()
        try:
            try:
                stage = self._build(conn)
            except Exception as exc:  # e.g. the model service is down: an outage, not an error
                return unavailable_at_start(conn, self.stage, exc, final_attempt=final_attempt).summary()
            # the Pub/Sub client library imports in a thread while the stage waits on the model
            # service and PostgreSQL; started after the build, which is CPU work the import would
            # slow down (one GIL, two cores shared with the rest of the stack). Not in the index
            # stage, which emits no event: its relay is for a rare dead letter, and the import
            # (~0.6 s of CPU) would compete with the enrich task it is woken beside
            if stage.next_topic:
                preload_publisher()
            relay_hook = OutboxRelayHook(self.gcp_conn_id)  # one publisher for every chunk's relay
            relay = lambda: relay_hook.relay_soon(conn, self.log)  # noqa: E731
            options = RunOptions(
                sweep_limit=self.sweep_limit,
                final_attempt=final_attempt,
                chunk_size=self.chunk_size,
                deadline_s=deadline_s,
                on_chunk=relay,
            )
            # numpy's BLAS at DGB_STAGE_BLAS_THREADS (1): a second thread spins after each of
            # the classifier's small products, on the cores the model service needs
            with blas_threads(stage_blas_threads()):
                stage.start_run()
                report = run_stage(stage, conn, messages, options, unique_ids=unique_ids)
                report = keep_sweeping(
                    stage, conn, report, options, idle_s=linger_s, max_s=linger_max_s, woken_s_ago=woken
                )
            self.log.info("stage %s: %s", self.stage, report.summary())
            relay()
        finally:
            conn.close()
        return report.summary()
