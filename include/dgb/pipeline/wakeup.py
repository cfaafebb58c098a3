"""A waiting stage run woken by the commit that gives it work.

A stage run that stays warm (:func:`dgb.pipeline.runner.keep_sweeping`) sweeps PostgreSQL for
pending work between waits of ``poll_s`` (0.5 s). Every writer that makes work pending for a stage
also adds the event announcing it to the outbox in the same transaction, and each outbox row
notifies :data:`dgb.outbox.CHANNEL` with its topic when that transaction commits. The waiter
LISTENs on the run's own connection and returns as soon as a notification of one of the stage's
input topics arrives, so the run sweeps within milliseconds of the commit instead of up to
``poll_s`` after it (on the path of a lone article the embed and index stages each waited 0.25 s
on average). The poll stays the floor: a notification missed (sent before the LISTEN, a connection
that cannot listen) costs at most ``poll_s``, as before. Nothing is carried by the notification:
the sweep reads PostgreSQL, so a lost or spurious one changes only when it runs.
"""

from __future__ import annotations

import logging
import time

from dgb import topology
from dgb.outbox import CHANNEL

log = logging.getLogger("dgb.pipeline")


def input_topics(subscriptions: tuple[str, ...]) -> frozenset[str]:
    """The topics whose events announce work for a stage reading ``subscriptions``."""
    return frozenset(topology.subscription(name).topic for name in subscriptions)


class CommitWaiter:
    """``waiter(timeout)``: block until an input topic's commit is notified or ``timeout`` passes.

    :param conn: the run's psycopg connection (idle between sweeps: every sweep commits); it
        LISTENs from the first wait on and stops at :meth:`close`.
    :param topics: the stage's input topics (:func:`input_topics`).
    """

    def __init__(self, conn, topics: frozenset[str]):
        self.conn, self.topics = conn, topics
        self.listening: bool | None = None  # None: not tried yet; False: this connection cannot
        self.woken = 0  # how many waits a notification ended early

    def _listen(self) -> bool:
        if not hasattr(self.conn, "notifies"):
            return False
        try:
            self.conn.execute(f"LISTEN {CHANNEL}")
            self.conn.commit()
        except Exception as exc:  # e.g. a pooler in transaction mode: poll as before
            log.info("stage run cannot LISTEN (%s): it polls", exc)
            self.conn.rollback()
            return False
        return True

    def __call__(self, timeout: float) -> None:
        if self.listening is None:
            self.listening = self._listen()
        deadline = time.monotonic() + timeout
        if self.listening:
            try:
                for note in self.conn.notifies(timeout=max(timeout, 0.0)):
                    if note.channel == CHANNEL and note.payload in self.topics:
                        self.woken += 1
                        return
            except Exception as exc:  # the sweep after it meets the connection's trouble
                log.info("stage run: waiting for a notification failed (%s): it polls", exc)
                self.listening = False
        left = deadline - time.monotonic()
        if left > 0:
            time.sleep(left)

    def close(self) -> None:
        if self.listening:
            try:
                self.conn.execute(f"UNLISTEN {CHANNEL}")
                self.conn.commit()
            except Exception:  # the connection is closed with the run anyway
                pass
            self.listening = None
