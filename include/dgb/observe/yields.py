"""What the listing polls buy, per agency (issue 36, "Visible"): the table ``dgb status`` prints
after its other lines and the pipeline view draws.

Per agency, over a window of whole hours (default the last 24, :data:`WINDOW_HOURS`):

* ``polls``: the dispatcher's listing polls (``listing_polls``, :mod:`dgb.scraper.polls`), with
  ``found`` (polls whose listing showed an unknown item: a scrape run was started) and ``failed``;
* ``articles``: its articles first stored in the window (``news.created_at``), backfills left
  out as the dispatcher's lag leaves them out (published over
  :data:`dgb.scraper.dispatch.BACKFILL_AGE_S` before they were stored);
* ``yield``: articles / polls (None without polls);
* ``interval_s``, ``reason`` and ``due_in_s``: the cadence the dispatcher last decided
  (``scrape_cadence``, :func:`dgb.scraper.dispatch.cadence_table`).

Rows are sorted by polls, most first. An agency appears when it has a cadence, a poll or an article
in the window. The totals add the rows up; ``polls_per_s`` is the polls over the window's seconds.

``share`` sets integrity's requests/s for its next run (:func:`dgb.integrity.share.integrity_share`,
as ``dgb status`` computes it) against the listings': what the cadence plans now and what it
polled over the window, each also as a fraction of the host's rate when integrity's share is what
the scrapes leave of it (``source`` ``host``; a configured or default rate has no host rate).

:func:`agency_rows`, :func:`totals` and :func:`budget_split` are pure, :func:`totals_text` and
:func:`split_text` put them in the words both ``dgb status`` and the pipeline view print;
:func:`agency_table` reads the database and calls them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from dgb.scraper import polls as listing_polls
from dgb.scraper.dispatch import BACKFILL_AGE_S

WINDOW_HOURS = 24.0


def agency_rows(
    cadences: Iterable[Mapping],
    polls: Mapping[str, listing_polls.PollCount],
    articles: Mapping[str, int],
) -> list[dict]:
    """One row per agency found in ``cadences`` (``cadence_table``'s ``agencies``), ``polls`` or
    ``articles``: most polls first, then most articles, then by key."""
    decided = {c["agency"]: c for c in cadences}
    rows = []
    for key in set(decided) | set(polls) | set(articles):
        count = polls.get(key, listing_polls.PollCount())
        found = int(articles.get(key, 0))
        cadence = decided.get(key, {})
        rows.append(
            {
                "agency": key,
                "polls": count.polls,
                "found": count.found,
                "failed": count.failed,
                "articles": found,
                "yield": round(found / count.polls, 4) if count.polls else None,
                "interval_s": cadence.get("interval_s"),
                "reason": cadence.get("reason"),
                "due_in_s": cadence.get("due_in_s"),
            }
        )
    rows.sort(key=lambda r: (-r["polls"], -r["articles"], r["agency"]))
    return rows


def totals(rows: Iterable[Mapping], window_s: float) -> dict:
    """The rows added up: polls, found, failed, articles, their yield and the polls per second."""
    rows = list(rows)
    out = {k: sum(r[k] for r in rows) for k in ("polls", "found", "failed", "articles")}
    out["yield"] = round(out["articles"] / out["polls"], 4) if out["polls"] else None
    out["polls_per_s"] = round(out["polls"] / window_s, 4) if window_s > 0 else 0.0
    out["agencies"] = len(rows)
    return out


def budget_split(share: Mapping, polled_rps: float) -> dict:
    """Integrity's requests/s (``share``: :meth:`dgb.integrity.share.Share.as_dict`) against the
    listings' planned and polled ones, each also as a fraction of the host's rate when known."""
    host = float(share.get("host_rps") or 0.0) if share["source"] == "host" else 0.0
    planned = float(share.get("listings_planned_rps") or 0.0)

    def of_host(rps: float) -> float | None:
        return round(rps / host, 4) if host > 0 else None

    return {
        "source": share["source"],
        "host_rps": host or None,
        "integrity_rps": float(share["rps"]),
        "integrity_fraction": of_host(float(share["rps"])),
        "listings_planned_rps": planned,
        "listings_planned_fraction": of_host(planned),
        "listings_polled_rps": round(polled_rps, 4),
        "listings_polled_fraction": of_host(polled_rps),
    }


def yield_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def totals_text(t: Mapping) -> str:
    """The totals in words, as ``dgb status`` and the pipeline view print them."""
    return (
        f"{t['polls']} polls ({t['found']} found news, {t['failed']} failed), {t['articles']} new"
        f" articles, yield {yield_text(t['yield'])} articles/poll, {t['polls_per_s']:.2f} polls/s"
    )


def split_text(s: Mapping) -> str:
    """:func:`budget_split` in words, as ``dgb status`` and the pipeline view print it."""

    def rps(value: float, fraction: float | None) -> str:
        return f"{value:.2f} req/s" + ("" if fraction is None else f" ({fraction:.0%})")

    host = f"www.gov.br's {s['host_rps']:g} req/s" if s["host_rps"] else f"{s['source']} rate"
    return (
        f"integrity vs listings ({host}): integrity {rps(s['integrity_rps'], s['integrity_fraction'])},"
        f" listings planned {rps(s['listings_planned_rps'], s['listings_planned_fraction'])},"
        f" polled {rps(s['listings_polled_rps'], s['listings_polled_fraction'])}"
    )


def stored_articles(conn, start: datetime, end: datetime) -> dict[str, int]:
    """Each agency's articles first stored in ``[start, end]``, backfills left out."""
    with conn.cursor() as cur:
        cur.execute(
            """
            SELECT agency_key, count(*) FROM news
             WHERE created_at >= %(start)s AND created_at <= %(end)s
               AND created_at - published_at < make_interval(secs => %(backfill)s)
               AND published_at > %(start)s - make_interval(secs => %(backfill)s)  -- implied: the index range
             GROUP BY agency_key
            """,
            {"start": start, "end": end, "backfill": BACKFILL_AGE_S},
        )
        rows = cur.fetchall()
    conn.commit()
    return {k: int(n) for k, n in rows}


def agency_table(
    conn, cadence: Mapping, share: Mapping | None, now: datetime, hours: float = WINDOW_HOURS
) -> dict:
    """The table over the whole hours from :func:`dgb.scraper.polls.window_start` to ``now``:
    ``since`` (ISO), ``window_s``, ``totals``, ``share`` (None without one) and ``agencies``."""
    start = listing_polls.window_start(now, hours)
    window_s = (now - start).total_seconds()
    rows = agency_rows(
        cadence["agencies"], listing_polls.counts(conn, start, now), stored_articles(conn, start, now)
    )
    total = totals(rows, window_s)
    return {
        "since": start.isoformat(),
        "window_s": round(window_s),
        "totals": total,
        "share": None if share is None else budget_split(share, total["polls_per_s"]),
        "agencies": rows,
    }
