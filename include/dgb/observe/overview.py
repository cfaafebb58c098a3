"""The operators' picture of the pipeline over the last hours (issue 14, item 6): what the UI's
pipeline view (``dgb_airflow.ui.pipeline``) draws and serves as JSON.

* :func:`backlog_history`: per-stage backlog at evenly spaced points of the last hours,
  reconstructed from the articles' own stage timestamps with the stage rules of
  :mod:`dgb.pipeline.definitions` (so its last point is exactly what ``dgb status`` counts now);
* :func:`latency_history`: commit -> searchable latency (``indexed_at - scraped_at``) p50/p95 per
  hour, for the articles that became searchable in that hour at their current version;
* :func:`dead_letters_by_reason`: the open dead letters, grouped by reason;
* :func:`pipeline_overview`: all of it, plus the current figures of
  :func:`dgb.observe.status.pipeline_status`, each host's request budget
  (:func:`dgb.hostbudget.snapshot`) and integrity coverage per age band
  (:func:`dgb.integrity.report.band_figures`).

Reconstruction: an article counts as pending in a stage at time ``t`` when the stage's ``ready``
rule holds, its ready timestamp is at or before ``t`` and it was not done by ``t`` (not done at
all now, or done after ``t``). Only the current timestamps are stored, so an article that went
through a stage twice (an edit resets its stage timestamps) counts for its latest pass only.

Cost: one read of ``news`` for the backlog (grouped by each row's range of points, whatever the
number of points) and one for the latencies. ``news`` has no index on the stage timestamps, so
both are (parallel) sequential scans; ``scripts/bench_pipeline_view.py`` times them at 300k rows.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from dgb.integrity.report import band_figures
from dgb.observe.status import pipeline_status
from dgb.pipeline.definitions import DEFINITIONS, SEARCHABLE, params

# stage -> (the column from which it is ready, the column set when it is done). The index stage
# is ready once enriched (a removed article is indexed as a delete) and done at indexed_at; a
# removed article's delete leaves indexed_at NULL: done, at no known time (before the window).
STAGE_TIMES: dict[str, tuple[str, str]] = {
    "enrich": ("scraped_at", "enriched_at"),
    "embed": ("enriched_at", "embedded_at"),
    "index": ("enriched_at", "indexed_at"),
}
assert set(STAGE_TIMES) == set(DEFINITIONS), "every stage needs its ready/done timestamps"

MAX_HOURS = 48


def _window(now: datetime | None, hours: float) -> tuple[datetime, datetime]:
    if not 0 < hours <= MAX_HOURS:
        raise ValueError(f"hours must be in (0, {MAX_HOURS}], got {hours!r}")
    now = now or datetime.now(UTC)
    return now, now - timedelta(hours=hours)


def backlog_history(
    conn,
    now: datetime | None = None,
    *,
    hours: float = 6,
    step_minutes: float = 15,
    model: str | None = None,
) -> list[dict[str, Any]]:
    """Backlog per stage at ``now - hours``, every ``step_minutes``, up to ``now`` (last point).

    One dict per point, oldest first: ``at`` (ISO time) and one count per stage name.
    ``model``: the current embedding model, as for :func:`dgb.observe.status.pipeline_status`.
    """
    now, start = _window(now, hours)
    if step_minutes <= 0:
        raise ValueError("step_minutes must be > 0")
    steps = max(1, round(hours * 60 / step_minutes))
    step = timedelta(microseconds=round((now - start) / timedelta(microseconds=1) / steps))
    origin = now - steps * step  # point k is origin + k * step; the last one is now

    # Each candidate row gives, per stage, the range [kf, kt) of points at which it was pending
    # (ready at or before the point, not done by it); the rows are grouped by range in ONE scan
    # and the ranges summed into per-point counts here (a difference array), so the cost is one
    # read of the candidates whatever the number of points. Exact: numeric microseconds.
    def k_of(col: str) -> str:
        return f"ceil(extract(epoch FROM {col} - %(origin)s) * 1000000 / %(step_us)s)"

    ranges, candidates = [], []
    for name, d in DEFINITIONS.items():
        ready_at, done_at = STAGE_TIMES[name]
        kf = f"CASE WHEN ({d.ready}) THEN greatest(0, least(%(n)s, {k_of(ready_at)}))::int END"
        kt = (
            f"CASE WHEN NOT ({d.done}) THEN %(n)s WHEN {done_at} IS NULL THEN 0"
            f" ELSE greatest(0, least(%(n)s, {k_of(done_at)}))::int END"
        )
        ranges.append(f"('{name}', {kf}, {kt})")
        candidates.append(f"(({d.ready}) AND (NOT ({d.done}) OR {done_at} > %(origin)s))")
    sql = (
        "SELECT s.stage, s.kf, s.kt, count(*) FROM news"
        f" CROSS JOIN LATERAL (VALUES {', '.join(ranges)}) AS s(stage, kf, kt)"
        f" WHERE ({' OR '.join(candidates)}) AND s.kf < s.kt GROUP BY 1, 2, 3"
    )
    args = params(model) | {"origin": origin, "step_us": step // timedelta(microseconds=1), "n": steps + 1}
    with conn.cursor() as cur:
        cur.execute(sql, args)
        rows = cur.fetchall()
    conn.commit()
    diff = {name: [0] * (steps + 2) for name in DEFINITIONS}
    for stage, kf, kt, n in rows:
        diff[stage][kf] += n
        diff[stage][kt] -= n
    out, running = [], dict.fromkeys(DEFINITIONS, 0)
    for k in range(steps + 1):
        for name in DEFINITIONS:
            running[name] += diff[name][k]
        out.append({"at": (origin + k * step).isoformat(), **running})
    return out


def latency_history(conn, now: datetime | None = None, *, hours: float = 6) -> list[dict[str, Any]]:
    """Commit -> searchable latency per hour of the window, oldest first: ``start``/``end`` (ISO),
    ``p50_s``/``p95_s`` (None without articles) and ``articles``, for the articles whose current
    version became searchable (:data:`dgb.pipeline.definitions.SEARCHABLE`) in that hour (by
    ``indexed_at``)."""
    now, start = _window(now, hours)
    buckets = max(1, int(-(-hours // 1)))  # whole hours, the oldest one possibly partial
    with conn.cursor() as cur:
        cur.execute(
            "SELECT b, percentile_cont(0.5) WITHIN GROUP (ORDER BY s),"
            " percentile_cont(0.95) WITHIN GROUP (ORDER BY s), count(*)"
            " FROM (SELECT floor(extract(epoch FROM %(now)s::timestamptz - indexed_at) / 3600)::int AS b,"
            "  extract(epoch FROM indexed_at - scraped_at) AS s FROM news"
            "  WHERE indexed_at > %(start)s AND indexed_at <= %(now)s"
            f"  AND {SEARCHABLE}) t GROUP BY b",
            {"now": now, "start": start},
        )
        found = {r[0]: r[1:] for r in cur.fetchall()}
    conn.commit()
    out = []
    for b in range(buckets - 1, -1, -1):
        p50, p95, n = found.get(b, (None, None, 0))
        out.append(
            {
                "start": max(start, now - timedelta(hours=b + 1)).isoformat(),
                "end": (now - timedelta(hours=b)).isoformat(),
                "p50_s": None if p50 is None else round(float(p50), 3),
                "p95_s": None if p95 is None else round(float(p95), 3),
                "articles": int(n),
            }
        )
    return out


def dead_letters_by_reason(conn, now: datetime | None = None, *, hours: float = 6) -> list[dict[str, Any]]:
    """Open dead letters per reason, most first: ``reason``, ``open``, ``new`` (first seen within
    the window), ``subscriptions``, ``oldest`` / ``latest`` (first_seen / last_seen, ISO)."""
    now, start = _window(now, hours)
    with conn.cursor() as cur:
        cur.execute(
            "SELECT reason, count(*), count(*) FILTER (WHERE first_seen > %s),"
            " array_agg(DISTINCT subscription ORDER BY subscription), min(first_seen), max(last_seen)"
            " FROM dead_letters WHERE status = 'open' GROUP BY reason ORDER BY count(*) DESC, reason",
            (start,),
        )
        rows = cur.fetchall()
    conn.commit()
    return [
        {
            "reason": reason,
            "open": int(n),
            "new": int(new),
            "subscriptions": list(subs),
            "oldest": oldest.isoformat() if oldest else None,
            "latest": latest.isoformat() if latest else None,
        }
        for reason, n, new, subs, oldest, latest in rows
    ]


def pipeline_overview(
    conn,
    now: datetime | None = None,
    *,
    hours: float = 6,
    step_minutes: float = 15,
    model: str | None = None,
) -> dict[str, Any]:
    """Everything the pipeline view shows, as one JSON-ready dict: ``current`` (the figures of
    ``dgb status`` over the window, without its hosts, scrape cadence and listing polls),
    ``backlog_history``, ``latency``, ``dead_letters``, ``hosts`` (request budgets), ``cadence``
    (each agency's scrape cadence, reason and lag), ``polls`` (each agency's polls, articles and
    yield over the window's whole hours, integrity's share against the listings':
    :mod:`dgb.observe.yields`) and ``bands`` (integrity per age band)."""
    now, start = _window(now, hours)
    current = pipeline_status(conn, start, now, model=model, poll_hours=hours)
    hosts = current.pop("hosts", [])
    cadence = current.pop("scrape_cadence", None)
    polls = current.pop("listing_polls", None)
    return {
        "generated_at": now.isoformat(),
        "hours": hours,
        "step_minutes": step_minutes,
        "model": model,
        "current": current,
        "backlog_history": backlog_history(conn, now, hours=hours, step_minutes=step_minutes, model=model),
        "latency": latency_history(conn, now, hours=hours),
        "dead_letters": dead_letters_by_reason(conn, now, hours=hours),
        "hosts": hosts,
        "cadence": cadence,
        "polls": polls,
        "bands": band_figures(conn, now),
    }
