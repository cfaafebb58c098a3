"""Operators of the safety net: reconcile (daily / sweep), redrive dead letters, replay a window.

Each works through dgb.reconcile on a PostgresHook("dgb_db") connection (psycopg 3), then relays
the outbox with the PubSubHook so the re-sent events leave at once (a relay failure is logged,
not raised: the work is committed and ``outbox_relay`` publishes it). Reports go to the task
log, a ``reconcile_runs`` row and StatsD metrics (``dgb.reconcile.*``, when metrics are on).
"""

from __future__ import annotations

import json
from typing import Any

from airflow.sdk import BaseOperator

from dgb_airflow.metrics import emit_metrics
from dgb_airflow.operators.lifeline import TiedToSupervisor


def _conf(context: Any) -> dict:
    params = dict(context.get("params") or {})
    dag_run = context.get("dag_run")
    conf = (getattr(dag_run, "conf", None) or {}) if dag_run is not None else {}
    return {**params, **{k: v for k, v in conf.items() if v is not None}}


def _jsonable(data: dict) -> dict:
    return json.loads(json.dumps(data, default=str))


class _SafetyNetOperator(TiedToSupervisor, BaseOperator):
    """Shared base: connections, and the relay after the work is committed.

    :param postgres_conn_id: Airflow connection of the news database.
    :param gcp_conn_id: Airflow connection of the Pub/Sub project (relay, dead-letter topics, seek).
    :param typesense_conn_id: Airflow connection of Typesense (drift comparison).
    :param relay: relay the outbox after committing (False: leave it to ``outbox_relay``).
    """

    ui_color = "#fdf1e0"

    def __init__(
        self,
        *,
        postgres_conn_id: str = "dgb_db",
        gcp_conn_id: str = "google_cloud_default",
        typesense_conn_id: str = "typesense_default",
        relay: bool = True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.postgres_conn_id = postgres_conn_id
        self.gcp_conn_id = gcp_conn_id
        self.typesense_conn_id = typesense_conn_id
        self.relay = relay

    def _pg(self):
        from airflow.providers.postgres.hooks.postgres import PostgresHook

        return PostgresHook(postgres_conn_id=self.postgres_conn_id).get_conn()

    def _relay(self, conn) -> dict | None:
        if not self.relay:
            return None
        from dgb_airflow.hooks.outbox import relay_outbox

        try:
            result = relay_outbox(conn, self.gcp_conn_id)
            self.log.info("relay: %s", result)
            return {"published": result.published, "failed": result.failed}
        except Exception as exc:
            self.log.warning("relay failed (outbox_relay will publish the events): %s", exc)
            return {"error": f"{type(exc).__name__}: {exc}"[:500]}

    def _record_dead_letters(self, conn) -> None:
        """Dead letters that never reached a stage (trigger rejects) into the table (logged, never raised)."""
        try:
            from dgb.deadletters import record_from_topics
            from dgb_airflow.hooks.pubsub import DgbPubSubHook

            hook = DgbPubSubHook(gcp_conn_id=self.gcp_conn_id)
            self.log.info(
                "dead letters recorded from topics: %s",
                record_from_topics(conn, hook.subscriber_client, hook.project_id),
            )
        except Exception as exc:
            self.log.warning("recording dead letters from topics failed: %s", exc)


class ReconcileOperator(_SafetyNetOperator):
    """Find stuck articles and Typesense drift, repair through the outbox (dgb.reconcile.repair.run).

    ``mode``: ``daily`` (every article, full Typesense comparison) or ``sweep`` (the recent
    window, Typesense compared for that window). Conf/params may override ``older_than_s``,
    ``window_hours``, ``max_attempts``, ``dry_run``, ``reset_stuck``, ``drift``.

    :param mode: ``daily`` or ``sweep``.
    :param kwargs: the connections and ``relay`` of the safety-net operators, and BaseOperator's.
    """

    def __init__(self, *, mode: str = "daily", **kwargs):
        super().__init__(**kwargs)
        if mode not in ("daily", "sweep"):
            raise ValueError("mode must be 'daily' or 'sweep'")
        self.mode = mode

    def execute(self, context: Any) -> dict:
        from dgb.config import settings
        from dgb.reconcile.repair import run
        from dgb.reconcile.stuck import Thresholds

        conf = _conf(context)
        s = settings()
        window_hours = conf.get("window_hours")
        t = Thresholds.from_env(
            window=self.mode == "sweep",
            max_attempts=conf.get("max_attempts"),
            window_s=float(window_hours) * 3600 if window_hours and self.mode == "sweep" else None,
        )
        if conf.get("older_than_s") is not None:
            t = t.with_age(float(conf["older_than_s"]))
        ts = None
        if conf.get("drift", True):
            from dgb_airflow.hooks.typesense import TypesenseHook

            ts = TypesenseHook(self.typesense_conn_id).get_conn()
        dry_run = bool(conf.get("dry_run", False))
        conn = self._pg()
        try:
            rep = run(
                conn,
                mode=self.mode,
                ts=ts,
                alias=s.typesense_collection,
                thresholds=t,
                model=s.embedding_model,
                dry_run=dry_run,
                reset_stuck=bool(conf.get("reset_stuck", False)),
            )
            relayed = None if dry_run else self._relay(conn)
            if not dry_run:
                self._record_dead_letters(conn)
        finally:
            conn.close()
        self.log.info("%s (reconcile_runs id %s)", rep.line(), rep.run_id)
        if rep.flagged:
            self.log.warning(
                "flagged for an operator (problem='stuck'): %s%s",
                rep.flagged[:20],
                " ..." if len(rep.flagged) > 20 else "",
            )
        if rep.drift_error:
            self.log.warning("Typesense comparison incomplete: %s", rep.drift_error)
        emit_metrics(f"reconcile.{self.mode}.found", rep.found)
        emit_metrics(f"reconcile.{self.mode}.repaired", rep.repaired)
        emit_metrics(
            f"reconcile.{self.mode}",
            {
                "flagged": len(rep.flagged),
                "seconds": rep.seconds,
                "waiting": rep.waiting,
                "resolved": rep.resolved,
            },
        )
        return _jsonable({**rep.as_dict(), "relay": relayed})


class RedriveOperator(_SafetyNetOperator):
    """Re-publish selected open dead letters (conf/params ``reason``, ``limit``, ``subscription``,
    ``ids``, ``dry_run``) and mark them redriven (dgb.reconcile.redrive).

    Once per DAG run: the redrive and its ``reconcile_runs`` row commit together under the run's
    key, so a retry after the commit (a worker lost while relaying) reports the committed redrive
    and relays its events instead of redriving the next batch. Relaying and recording the
    trigger's rejects come after the commit and never fail the task.

    :param kwargs: the connections and ``relay`` of the safety-net operators, and BaseOperator's.
    """

    def execute(self, context: Any) -> dict:
        from dgb.config import settings
        from dgb.reconcile.redrive import redrive

        conf = _conf(context)
        limit = int(conf.get("limit") or 100)
        ids = conf.get("ids")
        if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, int) for i in ids)):
            raise ValueError("conf 'ids' must be a list of dead_letters ids (integers)")
        dry_run = bool(conf.get("dry_run", False))
        run_id = context.get("run_id") if hasattr(context, "get") else None
        dag_id = getattr(context.get("ti"), "dag_id", None) or getattr(context.get("dag_run"), "dag_id", None)
        once_key = f"{dag_id or 'redrive'}/{run_id}" if run_id else None
        conn = self._pg()
        try:
            rep = redrive(
                conn,
                reason=conf.get("reason") or None,
                limit=limit,
                subscription=conf.get("subscription") or None,
                ids=ids,
                model=settings().embedding_model,
                dry_run=dry_run,
                actor=f"airflow {run_id or ''}".strip(),
                once_key=once_key,
            )
            relayed = None if dry_run else self._relay(conn)
            if not dry_run:
                self._record_dead_letters(conn)
        finally:
            conn.close()
        self.log.info("%s (reconcile_runs id %s)", rep.line(), rep.run_id)
        for skipped in rep.skipped[:20]:
            self.log.warning("not redriven: %s", skipped)
        emit_metrics(
            "redrive", {"selected": rep.selected, "redriven": len(rep.redriven), "skipped": len(rep.skipped)}
        )
        return _jsonable({**rep.as_dict(), "relay": relayed})


class ReplayOperator(_SafetyNetOperator):
    """Re-process a time window (conf/params ``start``, ``end``, ``topic``, ``mode`` republish|seek,
    ``subscription``, ``limit``, ``dry_run``, ``fallback_republish``) with dgb.reconcile.replay.

    ``seek`` never touches the subscriptions the stage DAGs consume: it snapshots one, creates a
    new subscription from the snapshot, seeks it back to ``start`` and runs the consuming stage
    (the one the stage DAGs run, same connections) over the window's messages there, then deletes
    the new subscription and the snapshot. It fails when Pub/Sub cannot do that, unless
    ``fallback_republish`` is true (then it republishes from PostgreSQL and says why).

    :param model_conn_id: Airflow connection of the model service (seek into the embed stage).
    :param kwargs: the connections and ``relay`` of the safety-net operators, and BaseOperator's.
    """

    def __init__(self, *, model_conn_id: str = "dgb_model_service", **kwargs):
        super().__init__(**kwargs)
        self.model_conn_id = model_conn_id

    def execute(self, context: Any) -> dict:
        from dgb.reconcile.replay import ReplayRequest, replay_through_stages
        from dgb_airflow.operators.stage import build_stage

        request = ReplayRequest.from_conf(_conf(context))
        project, subscriber, publisher = None, None, None
        if request.mode == "seek":
            from dgb_airflow.hooks.pubsub import DgbPubSubHook

            try:
                hook = DgbPubSubHook(gcp_conn_id=self.gcp_conn_id)
                project, subscriber, publisher = hook.project_id, hook.subscriber_client, hook.get_conn()
            except Exception as exc:
                if not request.fallback_republish:
                    raise
                self.log.warning("no Pub/Sub clients for seek: %s", exc)
        conn = self._pg()
        try:
            rep = replay_through_stages(
                conn,
                request,
                lambda name: build_stage(
                    name, conn, typesense_conn_id=self.typesense_conn_id, model_conn_id=self.model_conn_id
                ),
                project=project,
                subscriber=subscriber,
                publisher=publisher,
            )
            # the republished events, and the next stage's events the replayed messages produced
            relayed = None if request.dry_run else self._relay(conn)
        finally:
            conn.close()
        self.log.info("%s (reconcile_runs id %s)", rep.line(), rep.run_id)
        if rep.fallback_reason:
            self.log.warning("seek not used: %s; republished from PostgreSQL instead", rep.fallback_reason)
        emit_metrics(
            "replay", {"enqueued": rep.enqueued, "replayed": sum(s.get("in_window", 0) for s in rep.seek)}
        )
        return _jsonable({**rep.as_dict(), "relay": relayed})
