"""Every event the pipeline publishes for the run's articles delivered 3 times: each published
outbox event is published twice more, straight to its topic, from a background thread; paused
while the suite has the Pub/Sub emulator stopped (:meth:`Duplicator.pause`)."""

from __future__ import annotations

import json
import threading
import time

from dgb import topology

from .articles import Articles
from .context import Context
from .plumbing import Db, log

NEXT_MINOR_VERSION = "1.1"  # what the upgrade fault's copies carry
PAUSE_TIMEOUT_S = 30.0  # at most this long for the copies on their way (each publish: 10 s at most)


class Duplicator:
    def __init__(self, ctx: Context, articles: Articles):
        self.ctx = ctx
        self.articles = articles
        self.stop_event = threading.Event()
        self.duplicated_rows: set[str] = set()  # outbox ids published twice more
        self.dup_published = 0
        self.paused = threading.Event()
        # set during the upgrade fault: copies go out as the next minor version, with a field
        # this version does not know (faultsuite.upgrade)
        self.next_version = threading.Event()
        self.idle = threading.Event()  # set by the thread while paused, between two publishes
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()

    def pause(self, timeout: float = PAUSE_TIMEOUT_S) -> bool:
        """No more copies until :meth:`resume`, once the copies on their way are out (bounded).

        Called before the emulator is stopped. A client that keeps calling a stopped emulator
        backs off longer after each failed connection (gRPC's reconnect backoff: 1 s growing 1.6x
        up to 2 min), and every Pub/Sub client of this process shares that connection (gRPC's
        global subchannel pool): after the outage of ``emulator_down`` the topology re-applied at
        the restart waited ~50 s for the backoff to run out (53.9 s measured against a stopped
        emulator; 0.4 s with no call during the outage). Nothing else of the suite calls Pub/Sub
        while an outage is held. The copies are only late: the rows are published twice more
        after the restart, as a failing publish would have been retried."""
        self.idle.clear()
        self.paused.set()
        if self.thread is None or not self.thread.is_alive():
            return True
        return self.idle.wait(timeout)

    def resume(self) -> None:
        self.paused.clear()

    def run(self) -> None:
        """Publish every outbox event of the run's articles twice more: each is delivered 3x."""
        from dgb import pubsub_clients

        publisher = pubsub_clients.publisher_client()
        db = Db(self.ctx.s.pg_dsn())
        while not self.stop_event.is_set():
            if self.paused.is_set():
                self.idle.set()
                self.stop_event.wait(0.2)
                continue
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
                        attrs = {k: str(v) for k, v in (attributes or {}).items()}
                        if self.next_version.is_set():
                            payload = {**payload, "field_of_the_next_version": {"since": "1.1"}}
                            attrs["event_version"] = NEXT_MINOR_VERSION
                        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
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
