"""``view_count`` and ``unique_sessions`` from an Umami analytics database (optional).

Production counts, from its self-hosted Umami, the pageviews and distinct sessions of the last
30 days on the portal's article pages ``/artigos/<unique_id>`` (data-platform's engagement job, over
a BigQuery copy of Umami's events). Here the job reads Umami's own PostgreSQL tables directly:
``website_event`` (one row per event: ``website_id``, ``session_id``, ``created_at``, ``url_path``
without the query string, ``event_type`` 1 for a pageview), as Umami 2.x and later lay it out.

* The article id is the path segment after ``/artigos/`` (up to the next ``/``); only ids of
  articles in ``news`` are kept. (Production's pattern accepted 32 hex digits only, production's
  older id form; this pipeline's ids are ``<slug>_<6 hex>``.)
* ``DGB_UMAMI_WEBSITE_ID`` restricts the count to the portal's website(s); unset, every website of
  the Umami database counts, as production's query does.
* An article whose views fell out of the window gets ``view_count`` 0 (production keeps the last
  value it wrote).
* Changed values are written to ``news_features`` (``features || {view_count, unique_sessions}``)
  and ``view_count`` is pushed to the index in the same run (:mod:`dgb.engagement.runs`).
* **A source that went quiet is not believed.** Before anything is written, the source's total
  pageviews (of articles in ``news``) are compared with the total stored now: when counts are
  stored and the source gives none, or a total below ``(1 - DGB_ENGAGEMENT_MAX_DROP)`` x the stored
  one (default: below half), the import writes nothing, the run is recorded ``failed`` with the
  reason and :class:`ImportRefused` fails the task (Airflow's alert). Over a 30-day window an hour
  cannot halve the total; a wrong website id, an emptied or restored Umami database, a broken
  tracker can. When the drop is real, ``airflow dags trigger engagement_import -c '{"force": true}'``
  imports once without the check.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from dgb.config.engagement import engagement_max_drop
from dgb.engagement import runs

KEY = "view_count"


class ImportRefused(RuntimeError):
    """The source's counts look wrong (none, or a sharp drop): nothing was written."""


_UMAMI_COUNTS = """
SELECT substring(url_path from '^/artigos/([^/]+)') AS unique_id,
       count(*) AS views,
       count(DISTINCT session_id) AS sessions
  FROM website_event
 WHERE event_type = 1
   AND created_at >= now() - make_interval(days => %(days)s)
   AND url_path LIKE '/artigos/%%'
   AND (%(sites)s::uuid[] IS NULL OR website_id = ANY(%(sites)s::uuid[]))
 GROUP BY 1
HAVING substring(url_path from '^/artigos/([^/]+)') IS NOT NULL
"""


def read_umami(umami_conn, days: int = 30, website_ids: Sequence[str] = ()) -> dict[str, tuple[int, int]]:
    """``{article id: (pageviews, distinct sessions)}`` of the last ``days`` days, from Umami's
    ``website_event`` (any DB-API connection to the Umami database; read only)."""
    with umami_conn.cursor() as cur:
        cur.execute(_UMAMI_COUNTS, {"days": int(days), "sites": list(website_ids) or None})
        rows = cur.fetchall()
    umami_conn.rollback()  # end the read-only transaction: nothing is held on Umami's database
    return {uid: (int(views), int(sessions)) for uid, views, sessions in rows}


_STORE = """
WITH counted AS (
    SELECT c.unique_id, c.views, c.sessions
      FROM unnest(%(ids)s::text[], %(views)s::bigint[], %(sessions)s::bigint[])
           AS c(unique_id, views, sessions)
      JOIN news n ON n.unique_id = c.unique_id
), gone AS (
    SELECT nf.unique_id, 0::bigint AS views, 0::bigint AS sessions
      FROM news_features nf
     WHERE nf.features ? 'view_count' AND nf.features -> 'view_count' <> '0'::jsonb
       AND NOT EXISTS (SELECT FROM counted WHERE counted.unique_id = nf.unique_id)
), fresh AS (
    SELECT * FROM counted UNION ALL SELECT * FROM gone
), written AS (
    INSERT INTO news_features AS nf (unique_id, features)
    SELECT unique_id, jsonb_build_object('view_count', views, 'unique_sessions', sessions)
      FROM fresh ORDER BY unique_id
    ON CONFLICT (unique_id) DO UPDATE SET features = nf.features || EXCLUDED.features
     WHERE nf.features -> 'view_count' IS DISTINCT FROM EXCLUDED.features -> 'view_count'
        OR nf.features -> 'unique_sessions' IS DISTINCT FROM EXCLUDED.features -> 'unique_sessions'
    RETURNING nf.unique_id
)
SELECT (SELECT count(*) FROM counted), (SELECT count(*) FROM gone), ARRAY(SELECT unique_id FROM written)
"""


_TOTALS = """
SELECT coalesce(sum((nf.features ->> 'view_count')::bigint), 0)
  FROM news_features nf
 WHERE nf.features ? 'view_count'
"""
_KNOWN = "SELECT unique_id FROM news WHERE unique_id = ANY(%s)"


def check(conn, counts: dict[str, tuple[int, int]], max_drop: float) -> dict[str, int]:
    """``{"stored_total", "source_total"}``; :class:`ImportRefused` when the source is empty while
    counts are stored, or its total is below ``(1 - max_drop)`` x the stored total."""
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(_TOTALS)
        stored = int(cur.fetchone()[0])
        cur.execute(_KNOWN, (sorted(counts),))
        known = {row[0] for row in cur.fetchall()}
    source = sum(views for uid, (views, _) in counts.items() if uid in known)
    totals = {"stored_total": stored, "source_total": source}
    if stored > 0 and source == 0:
        raise ImportRefused(
            f"the source counted no pageviews of known articles while {stored} are stored: "
            "kept the stored counts (check the umami_db connection and DGB_UMAMI_WEBSITE_ID)"
        )
    if stored > 0 and max_drop < 1 and source < (1 - max_drop) * stored:
        raise ImportRefused(
            f"the source's total pageviews ({source}) are below {1 - max_drop:.0%} of the stored "
            f"total ({stored}): kept the stored counts (DGB_ENGAGEMENT_MAX_DROP={max_drop:g}; "
            'trigger the DAG with {"force": true} to import anyway)'
        )
    return totals


def store(conn, counts: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """Write ``counts`` (from :func:`read_umami`) into ``news_features``, in one committed
    statement: changed values only; articles no longer counted go to 0. Returns ``{"matched": n,
    "unmatched": n, "zeroed": n, "changed": [unique_id, ...]}``."""
    ids = sorted(counts)
    params = {
        "ids": ids,
        "views": [counts[i][0] for i in ids],
        "sessions": [counts[i][1] for i in ids],
    }
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(_STORE, params)
        matched, zeroed, changed = cur.fetchone()
    return {"matched": matched, "unmatched": len(ids) - matched, "zeroed": zeroed, "changed": sorted(changed)}


def run(
    conn,
    umami_conn,
    ts,
    alias: str,
    *,
    days: int = 30,
    website_ids: Sequence[str] = (),
    batch_size: int = 500,
    max_drop: float | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """One import: read Umami, check it (:func:`check`, unless ``force``), store the changed
    counts, push ``view_count`` to ``alias``; record the run in ``engagement_runs``. Raises
    :class:`ImportRefused` (nothing written) when the check refuses, and when a count could not
    be pushed (the run is recorded ``failed``, so the next one pushes it again)."""
    t0 = time.monotonic()
    rec = runs.start(conn, "views")
    figures: dict[str, Any] = {"days": days}
    try:
        counts = read_umami(umami_conn, days, website_ids)
        if force:
            figures["forced"] = True
        else:
            figures.update(check(conn, counts, engagement_max_drop() if max_drop is None else max_drop))
        stored = store(conn, counts)
        figures.update({k: v for k, v in stored.items() if k != "changed"}, changed=len(stored["changed"]))
        runs.push_all(conn, ts, alias, rec, KEY, "view counts", figures, t0, batch_size=batch_size)
    except Exception as exc:
        runs.fail(conn, rec, figures, t0, exc)
        raise
    runs.finish(conn, rec, figures)
    figures["changed_ids"] = stored["changed"]
    return figures
