"""Listing polls per agency and hour (issue 36, "Visible"): the table ``listing_polls`` (migration
0020).

``scrape_cadence`` holds each agency's current decision (interval, reason, next due) and the time
of its last poll only; how many polls an agency got over a day was nowhere. The dispatcher
(:func:`dgb.scraper.dispatch.run_tick`) now adds each tick's polls with :func:`add`, in the
transaction that writes ``scrape_cadence``: per agency and UTC hour, the polls, those whose
listing showed an unknown item (``found``: its scrape DAG was started) and those that failed.
:func:`counts` reads them back over a window of whole hours (:func:`window_start`) for
``dgb status`` and the pipeline view (:mod:`dgb.observe.yields`). Rows older than
:data:`KEPT_S` are deleted as new ones are added: at most 160 agencies x 24 hours a day.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

KEPT_S = 7 * 86400.0


@dataclass(frozen=True)
class PollCount:
    polls: int = 0
    found: int = 0  # polls whose listing showed an unknown item
    failed: int = 0  # polls whose listing could not be read or parsed


def tally(probes: Iterable) -> dict[str, PollCount]:
    """Polls per agency from one tick's probes (:class:`dgb.scraper.dispatch.Probe`)."""
    out: dict[str, list[int]] = {}
    for p in probes:
        c = out.setdefault(p.key, [0, 0, 0])
        c[0] += 1
        c[1] += int(p.new > 0)
        c[2] += int(bool(p.error))
    return {k: PollCount(*c) for k, c in out.items()}


def hour_of(at: datetime) -> datetime:
    """The start of the UTC hour ``at`` falls in (the table's bucket)."""
    return at.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def window_start(now: datetime, hours: float) -> datetime:
    """Where a window of ``hours`` ending at ``now`` starts when counted in whole hours: the start
    of the hour ``hours`` before ``now``, so it covers at least ``hours`` (at most one more)."""
    return hour_of(now - timedelta(hours=hours))


def add(cur, probes: Iterable, at: datetime) -> None:
    """Add one tick's probes to their agencies' hour (``cur``: the caller's transaction) and delete
    the hours older than :data:`KEPT_S`."""
    hour = hour_of(at)
    rows = [(k, hour, c.polls, c.found, c.failed) for k, c in sorted(tally(probes).items())]
    if rows:
        cur.executemany(
            """
            INSERT INTO listing_polls AS p (agency_key, hour, polls, found, failed)
            VALUES (%s, %s, %s, %s, %s)
            ON CONFLICT (agency_key, hour) DO UPDATE SET
                polls = p.polls + EXCLUDED.polls, found = p.found + EXCLUDED.found,
                failed = p.failed + EXCLUDED.failed
            """,
            rows,
        )
    cur.execute("DELETE FROM listing_polls WHERE hour < %s", (hour - timedelta(seconds=KEPT_S),))


def counts(conn, start: datetime, end: datetime) -> dict[str, PollCount]:
    """Each agency's polls in the hours from ``start`` up to the one ``end`` falls in."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT agency_key, sum(polls), sum(found), sum(failed) FROM listing_polls"
            " WHERE hour >= %s AND hour <= %s GROUP BY agency_key",
            (hour_of(start), hour_of(end)),
        )
        rows = cur.fetchall()
    conn.commit()
    return {k: PollCount(int(p), int(f), int(e)) for k, p, f, e in rows}
