"""Taking a run's articles down afterwards (unless ``--keep``), and deleting what earlier runs
left behind."""

from __future__ import annotations

from .articles import Articles
from .context import Context
from .plumbing import http_json, log

RUN_TITLE = r"\(falha-[0-9a-f]{6} n[0-9]{3}\)$"  # the title suffix of a run's articles
RUN_UID = r"falha-[0-9a-f]{6}-(n[0-9]{3}_|poison-)"  # in their unique_ids (and poison ids)


class Takedown:
    def __init__(self, ctx: Context, articles: Articles):
        self.ctx = ctx
        self.articles = articles

    def remove_articles(self) -> None:
        """Take the run's articles down everywhere. In PostgreSQL they are marked removed (and
        their index entry settled) rather than deleted: copies of their events may still be on
        their way (a killed triggerer's messages come back after their ack deadline) and must
        find the row (skipped as done) instead of dead-lettering as unknown ids. The next run
        deletes the rows of earlier runs (:meth:`purge_previous`)."""
        try:
            for b in self.articles.batches:
                for slug in b.slugs:
                    try:
                        http_json(
                            f"{self.ctx.s.mirror_url}/_control/remove", {"agency": b.agency, "slug": slug}
                        )
                    except Exception:
                        pass
            rows = self.ctx.db.query("SELECT unique_id FROM news WHERE title LIKE %s", (f"%{self.ctx.tag}%",))
            uids = sorted({r[0] for r in rows} | set(self.articles.all_uids()))
            self.ctx.db.query(
                "UPDATE news SET removed_at = now(), version = version + 1, indexed_version = version + 1,"
                " indexed_at = NULL, updated_at = now() WHERE unique_id = ANY(%s) RETURNING 1",
                (uids,),
            )
            if self.ctx.ts is not None:
                docs = self.ctx.ts.collections[self.ctx.s.typesense_collection].documents
                for uid in uids:
                    try:
                        docs[uid].delete()
                    except Exception:
                        pass
            self.ctx.db.query(
                "UPDATE dead_letters SET status = 'discarded', resolved_at = now(),"
                " resolution = %s WHERE status = 'open' AND (unique_id = ANY(%s)"
                " OR attributes->>'dgb_fault_run' = %s OR unique_id LIKE %s) RETURNING 1",
                (
                    f"fault-injection run {self.ctx.run_id}: cleanup",
                    uids,
                    self.ctx.run_id,
                    f"{self.ctx.tag}-poison-%",
                ),
            )
            log(
                f"cleanup: took down {len(uids)} articles of run {self.ctx.run_id} (site, Typesense;"
                " removed in PostgreSQL, deleted by the next run)"
            )
        except Exception as exc:
            log(f"cleanup: removing the run's articles failed: {exc}")

    def purge_previous(self) -> None:
        """Delete what earlier fault runs left: their (removed) articles, outbox rows, dead letters."""
        try:
            rows = self.ctx.db.query(
                "SELECT unique_id FROM news WHERE title ~ %s AND removed_at IS NOT NULL"
                " AND removed_at < now() - interval '10 minutes'",
                (RUN_TITLE,),
            )
            uids = [r[0] for r in rows]
            if uids:
                self.ctx.db.query("DELETE FROM outbox WHERE aggregate_id = ANY(%s) RETURNING 1", (uids,))
                self.ctx.db.query("DELETE FROM news WHERE unique_id = ANY(%s) RETURNING 1", (uids,))
            gone = self.ctx.db.query(
                "DELETE FROM dead_letters d WHERE (d.unique_id ~ %s OR d.attributes ? 'dgb_fault_run')"
                " AND d.last_seen < now() - interval '10 minutes'"
                " AND NOT EXISTS (SELECT 1 FROM news n WHERE n.unique_id = d.unique_id) RETURNING 1",
                (RUN_UID,),
            )
            if uids or gone:
                log(f"purged {len(uids)} articles and {len(gone)} dead letters of earlier fault runs")
        except Exception as exc:
            log(f"purging earlier runs failed: {exc}")
