"""Every event the pipeline publishes for the run's articles delivered 3 times: each published
outbox event is published twice more, straight to its topic, from a background thread."""

from __future__ import annotations

import json
import threading
import time

from dgb import topology

from .articles import Articles
from .context import Context
from .plumbing import Db, log


class Duplicator:
    def __init__(self, ctx: Context, articles: Articles):
        self.ctx = ctx
        self.articles = articles
        self.stop_event = threading.Event()
        self.duplicated_rows: set[str] = set()  # outbox ids published twice more
        self.dup_published = 0

    def start(self) -> None:
        threading.Thread(target=self.run, daemon=True).start()

    def stop(self) -> None:
        self.stop_event.set()

    def run(self) -> None:
        """Publish every outbox event of the run's articles twice more: each is delivered 3x."""
        from dgb import pubsub_clients

        publisher = pubsub_clients.publisher_client()
        db = Db(self.ctx.s.pg_dsn())
        while not self.stop_event.is_set():
            try:
                uids = self.articles.all_uids()
                if uids:
                    rows = db.query(
                        "SELECT id::text, topic, payload, attributes FROM outbox WHERE published_at IS NOT"
                        " NULL AND topic = ANY(%s) AND aggregate_id = ANY(%s)",
                        (list(topology.TOPICS), uids),
                    )
                    for row_id, topic, payload, attributes in rows:
                        if row_id in self.duplicated_rows:
                            continue
                        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
                        attrs = {k: str(v) for k, v in (attributes or {}).items()}
                        path = f"projects/{self.ctx.s.gcp_project}/topics/{topic}"
                        futures = [publisher.publish(path, data, **attrs) for _ in range(2)]
                        for f in futures:
                            f.result(timeout=10)
                        self.duplicated_rows.add(row_id)
                        self.dup_published += 2
            except Exception as exc:
                log(f"duplicator: {type(exc).__name__}: {str(exc)[:120]}")
                time.sleep(2)
            self.stop_event.wait(1.0)
        db.close()
