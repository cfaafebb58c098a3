"""``trending_score``, computed in PostgreSQL and pushed to the index in the same run.

The formula is production's (:mod:`dgb.engagement.formula`) with a minimum day count
(``DGB_TRENDING_MIN_DAY``: a theme with fewer articles in the day scores 0), counted with window
functions over
the ``news`` table: for each article, the non-removed articles of its level-1 theme published in
the 24 hours and in the 7 days up to its own ``published_at`` (itself included, as production's
``RANGE ... PRECEDING AND CURRENT ROW`` counts it).

**Which articles hold a score, and for how long.** The score describes the day before the
article's publication, so it is known when the article is published; it can still move while
articles published before it keep arriving (late scrapes, back-dated pages, re-classification).
The portal reads it as "trending now" (the "Em alta" badge at >= 1.5, the ``trending_score:desc``
sort over the whole index), so:

* an article published in the last 24 hours (and not later than now) is *live*: every run
  recomputes its score from the current rows;
* when it turns 24 hours old its score is set to **0** (in ``news_features`` and in the index):
  a badge or a sort position from a burst of last month would be stale. The value it had is not
  lost: the formula over ``news`` gives it again for any date;
* articles never live while this job ran (an adopted backlog, a late scrape of an old page) get
  no key at all: the sort puts documents without the field last, as it puts 0 near last.
* an article without a level-1 theme (not classified yet) gets its score once it has one.

Production computes the same ratio every 6 hours in BigQuery, and its scores never expire: they
stay on the article until it is re-indexed.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from dgb.config.engagement import trending_min_day
from dgb.engagement import runs

KEY = "trending_score"

# %(now)s: the reference time; %(since)s: the watermark (None: the first run, every expired score).
_SCORE = """
WITH pool AS (
    SELECT unique_id, theme_l1_id, published_at
      FROM news
     WHERE theme_l1_id IS NOT NULL AND removed_at IS NULL
       AND published_at > %(now)s::timestamptz - interval '8 days'
       AND published_at <= %(now)s::timestamptz
), counted AS (
    SELECT unique_id, published_at, count(*) OVER day AS day_count, count(*) OVER week AS week_count
      FROM pool
    WINDOW day AS (PARTITION BY theme_l1_id ORDER BY published_at
                   RANGE BETWEEN interval '24 hours' PRECEDING AND CURRENT ROW),
           week AS (PARTITION BY theme_l1_id ORDER BY published_at
                    RANGE BETWEEN interval '7 days' PRECEDING AND CURRENT ROW)
), live AS (
    SELECT unique_id,
           CASE WHEN week_count > 0 AND day_count >= %(min_day)s
                THEN round(day_count * 7.0 / week_count, 3) ELSE 0 END AS score
      FROM counted
     WHERE published_at > %(now)s::timestamptz - interval '24 hours'
), expired AS (
    SELECT nf.unique_id, 0::numeric AS score
      FROM news_features nf
      JOIN news n ON n.unique_id = nf.unique_id
     WHERE nf.features ? 'trending_score' AND nf.features -> 'trending_score' <> '0'::jsonb
       AND n.published_at <= %(now)s::timestamptz - interval '24 hours'
       AND (%(since)s::timestamptz IS NULL
            OR n.published_at > %(since)s::timestamptz - interval '24 hours' - interval '1 hour')
       AND NOT EXISTS (SELECT FROM live WHERE live.unique_id = nf.unique_id)
), fresh AS (
    SELECT unique_id, score FROM live UNION ALL SELECT unique_id, score FROM expired
), written AS (
    INSERT INTO news_features AS nf (unique_id, features)
    SELECT unique_id, jsonb_build_object('trending_score', score) FROM fresh ORDER BY unique_id
    ON CONFLICT (unique_id) DO UPDATE SET features = nf.features || EXCLUDED.features
     WHERE nf.features -> 'trending_score' IS DISTINCT FROM EXCLUDED.features -> 'trending_score'
    RETURNING nf.unique_id, nf.features -> 'trending_score' AS score
)
SELECT (SELECT count(*) FROM live), (SELECT count(*) FROM expired),
       coalesce((SELECT jsonb_object_agg(unique_id, score) FROM written), '{}'::jsonb)
"""


def compute(
    conn, *, now: datetime | None = None, since: datetime | None = None, min_day: int | None = None
) -> dict[str, Any]:
    """Score the live articles and expire the scores that turned 24 hours old, in one committed
    statement; only changed values are written. ``now``: the reference time (default:
    PostgreSQL's); ``since``: the previous complete run's start (expiry then looks only at the
    articles that crossed the 24-hour line after it; ``None``: at every stored score); ``min_day``:
    the least day count that trends (default ``DGB_TRENDING_MIN_DAY``).

    Returns ``{"live": n, "expired": n, "changed": {unique_id: score}}``."""
    with conn.transaction(), conn.cursor() as cur:
        if now is None:
            cur.execute("SELECT now()")
            now = cur.fetchone()[0]
        if min_day is None:
            min_day = trending_min_day()
        cur.execute(_SCORE, {"now": now, "since": since, "min_day": int(min_day)})
        live, expired, changed = cur.fetchone()
    return {"live": live, "expired": expired, "changed": {k: float(v) for k, v in changed.items()}}


def run(conn, ts, alias: str, *, now: datetime | None = None, batch_size: int = 500) -> dict[str, Any]:
    """One scheduled run: :func:`compute`, then push every changed score (and whatever an earlier
    failed run left unpushed) to ``alias`` as partial updates; record the run in
    ``engagement_runs``. Raises when a score could not be pushed (the run is recorded
    ``failed``, so the next run pushes it again)."""
    t0 = time.monotonic()
    rec = runs.start(conn, "trending")
    figures: dict[str, Any] = {}
    try:
        scored = compute(conn, now=now, since=rec.since)
        figures = {"live": scored["live"], "expired": scored["expired"], "changed": len(scored["changed"])}
        runs.push_all(conn, ts, alias, rec, KEY, "trending scores", figures, t0, batch_size=batch_size)
    except Exception as exc:
        runs.fail(conn, rec, figures, t0, exc)
        raise
    runs.finish(conn, rec, figures)
    figures["changed_ids"] = sorted(scored["changed"])
    return figures
