"""Reconciliation while a batch is incomplete, as the ``reconcile_sweep`` DAG would run it:
``dgb.reconcile.repair.run`` with a short threshold, then the outbox relay (what ``dgb reconcile``
does)."""

from __future__ import annotations

import time

from dgb import outbox
from dgb.reconcile import repair, stuck

from .catalogue import Batch
from .context import Context
from .plumbing import log


class Reconciler:
    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.last_reconcile = 0.0
        self.reconcile_runs = 0
        self.older_than = 20.0 if ctx.quick else 45.0
        self.reconcile_every = 20.0 if ctx.quick else 45.0

    def due(self, batches: list[Batch], now: float) -> bool:
        """A batch whose fault is over is incomplete, long enough after the fault and the last run."""
        incomplete = [b for b in batches if b.done_at is None and b.fault_end is not None]
        return bool(
            incomplete
            and now - self.last_reconcile >= self.reconcile_every
            and now - min(b.fault_end for b in incomplete) >= self.older_than
        )

    def reconcile_now(self) -> None:
        from dgb import pubsub_clients

        s = self.ctx.s
        try:
            conn = self.ctx.db.get()
            t = stuck.Thresholds.from_env().with_age(self.older_than)
            rep = repair.run(
                conn,
                mode="manual",
                ts=self.ctx.ts,
                alias=s.typesense_collection,
                thresholds=t,
                model=s.embedding_model,
            )
            res = outbox.relay(
                conn, pubsub_clients.publisher_client(), s.gcp_project, timeout=10.0, max_batches=5
            )
            self.reconcile_runs += 1
            log(f"{rep.line()}; relay {res}")
        except Exception as exc:
            self.ctx.db.conn = None
            log(f"reconcile: {type(exc).__name__}: {str(exc)[:200]}")
        self.last_reconcile = time.monotonic()
