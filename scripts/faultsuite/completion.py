"""The check of the history that says a batch arrived: every article exactly done end to end
(PostgreSQL enriched, embedded with the current model, indexed at its version; Typesense holding
that version with a theme and a vector of the model's dimension), and Airflow no longer counting a
killed pipeline task as running."""

from __future__ import annotations

import json
import time

from .airflow_tasks import orphaned_tasks
from .articles import Articles
from .catalogue import Batch
from .context import Context
from .plumbing import log


class Completion:
    def __init__(self, ctx: Context, articles: Articles):
        self.ctx = ctx
        self.articles = articles

    def complete(self, uids: list[str]) -> set[str]:
        """The uids that are done end to end (PostgreSQL and Typesense)."""
        if not uids:
            return set()
        s = self.ctx.s
        rows = self.ctx.db.query(
            "SELECT unique_id, version FROM news WHERE unique_id = ANY(%s) AND removed_at IS NULL"
            " AND enriched_at IS NOT NULL AND embedded_at IS NOT NULL"
            " AND embedding_model = %s AND indexed_version = version",
            (uids, s.embedding_model),
        )
        pg_done = dict(rows)
        if not pg_done:
            return set()
        docs = self.ts_docs(list(pg_done), "id,version,theme_1_level_1_code,content_embedding")
        ok = set()
        for uid, version in pg_done.items():
            d = docs.get(uid)
            if (
                d
                and d.get("version") == version
                and d.get("theme_1_level_1_code")
                and len(d.get("content_embedding") or ()) == s.embedding_dim
            ):
                ok.add(uid)
        return ok

    def ts_docs(self, uids: list[str], fields: str) -> dict[str, dict]:
        out = {}
        docs = self.ctx.ts.collections[self.ctx.s.typesense_collection].documents
        for i in range(0, len(uids), 50):
            part = uids[i : i + 50]
            raw = docs.export(
                {
                    "include_fields": fields,
                    "filter_by": "unique_id:=[" + ",".join(f"`{u}`" for u in part) + "]",
                }
            )
            for line in raw.splitlines():
                if line.strip():
                    d = json.loads(line)
                    out[d["id"]] = d
        return out

    def check_batches(self) -> None:
        try:
            self.articles.refresh_uids()
            pending = [b for b in self.articles.batches if b.done_at is None and b.published_at]
            uids = [u for b in pending for u in b.uids.values()]
            done = self.complete(uids) if uids else set()
        except Exception as exc:
            log(f"check: {type(exc).__name__}: {str(exc)[:160]}")
            return
        now = time.monotonic()
        for b in pending:
            if len(b.uids) == len(b.titles) and set(b.uids.values()) <= done:
                # fully recovered also means Airflow let go of tasks the fault killed: until it
                # notices (task_instance_heartbeat_timeout) their runs count against max_active_runs
                orphans = orphaned_tasks(self.ctx.af)
                if orphans:
                    if not b.note or "orphans" not in b.note:
                        b.add_note(f"orphans={len(orphans)}")
                        log(
                            f"{b.fault}: batch complete, but Airflow still counts"
                            f" {len(orphans)} killed task(s) as "
                            f"running ({', '.join(orphans[:4])}); waiting for it to let go"
                        )
                    continue
                b.done_at = now
                log(f"{b.fault}: batch of {len(b.titles)} complete, recovery {b.recovery_s:.1f}s")

    def note_pending(self, batch: Batch) -> None:
        """How many of the batch's articles were still on their way when the fault hit."""
        try:
            pending = len(batch.titles) - len(self.complete(list(batch.uids.values())))
        except Exception:
            return
        batch.add_note(f"in_flight_at_fault={pending}")
