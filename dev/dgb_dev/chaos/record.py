"""The chaos run's record (scripts/bench_chaos.py): what was done twice, counted from its side
effects, what the pipeline gave up on, and the one summary line.

The oracle (:mod:`dgb_dev.chaos.oracle`) decides what readers see. The rest comes from side
effects, each from the place it lands:

* **history rows per edit**: integrity's history table. A change of one field to one value
  recorded more than once is a change recorded twice (``duplicated_history``). The site's journal
  says how many edits were made, so a count far below that is visible too;
* **stuck**: articles the pipeline holds back from readers: dead-lettered, parked after repeated
  failures, held out of a stage's sweep, or flagged stuck. Each comes with the reason the pipeline
  gave. This is the pipeline's own account. It is reported as such, never used to decide what
  readers should see.
* **scrape waits**: Airflow's own rows (``dag_run``, ``task_instance``) give, per scrape DAG, the
  time from a run's event to its task's start; a trend along the DAG ids is the scheduler's order
  showing (``scrape_waits``).
"""

from __future__ import annotations

import math
from typing import Any

SUMMARY_KEYS = (
    "lost",
    "duplicated",
    "wrong",
    "stuck",
    "faults",
    "faults_unconfirmed",
    "worst_recovery_s",
    "fresh_p95_s",
    "max_rps_10s",
    "seed",
)


def duplicated_history(conn, since) -> dict[str, Any]:
    """History rows written at or after ``since``; changes (article, field, value) recorded more
    than once, with up to 20 examples."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT count(*), count(DISTINCT news_id) FROM news_update_history WHERE detected_at >= %s",
            (since,),
        )
        rows, articles = cur.fetchone()
        cur.execute(
            "SELECT n.url, h.field_changed, count(*) FROM news_update_history h"
            " JOIN news n ON n.id = h.news_id WHERE h.detected_at >= %s"
            " GROUP BY n.url, h.field_changed, md5(coalesce(h.new_value, ''))"
            " HAVING count(*) > 1 ORDER BY n.url",
            (since,),
        )
        repeated = cur.fetchall()
    return {
        "history_rows": rows,
        "articles_with_history": articles,
        "repeated": len(repeated),
        "examples": [f"{url} {field} x{n}" for url, field, n in repeated[:20]],
    }


def stuck_articles(conn, urls: set[str] | None = None) -> dict[str, str]:
    """URL -> why, for every live article the pipeline dead-lettered, parked, held or flagged
    stuck (``urls``: only these, by their ``url_key``)."""
    from dgb_dev.mirror.journal import url_key

    out: dict[str, str] = {}
    with conn.cursor() as cur:
        cur.execute(
            "SELECT url, concat_ws('; ',"
            "  CASE WHEN parked_at IS NOT NULL THEN 'parked at ' || parked_at::text END,"
            "  CASE WHEN hold_stage IS NOT NULL"
            "   THEN 'held at ' || hold_stage || ': ' || coalesce(hold_reason, '') END,"
            "  CASE WHEN problem IN ('stuck', 'dead_letter') THEN 'problem ' || problem END)"
            " FROM news WHERE removed_at IS NULL AND (parked_at IS NOT NULL OR hold_stage IS NOT NULL"
            "  OR problem IN ('stuck', 'dead_letter'))"
        )
        for url, why in cur.fetchall():
            out[url_key(url)] = why
        cur.execute(
            "SELECT n.url, string_agg(DISTINCT d.reason, '; ') FROM dead_letters d"
            " JOIN news n ON n.unique_id = d.unique_id WHERE n.removed_at IS NULL AND d.status = 'open'"
            " GROUP BY n.url"
        )
        for url, why in cur.fetchall():
            key = url_key(url)
            out[key] = "; ".join(x for x in (out.get(key), f"dead-lettered: {why}") if x)
    if urls is not None:
        out = {u: w for u, w in out.items() if u in urls}
    return dict(sorted(out.items()))


SCRAPE_WAITS_SQL = (
    "SELECT r.dag_id, extract(epoch FROM t.start_date - r.run_after)"
    " FROM dag_run r JOIN task_instance t ON t.dag_id = r.dag_id AND t.run_id = r.run_id"
    " WHERE r.dag_id LIKE 'scrape\\_%%' AND r.dag_id <> 'scrape_dispatcher'"
    " AND t.start_date IS NOT NULL AND r.run_after >= %s AND r.run_after < %s"
)


def scrape_waits(airflow_conn, since, until) -> dict[str, dict[str, float]]:
    """Per scrape DAG, of its runs set off in ``[since, until)``: runs, mean and longest seconds from
    the run's event to its task's start (Airflow's metadata database)."""
    with airflow_conn.cursor() as cur:
        cur.execute(SCRAPE_WAITS_SQL, (since, until))
        return wait_figures(cur.fetchall())


def wait_figures(rows) -> dict[str, dict[str, float]]:
    """``(dag_id, wait_s)`` rows -> ``{dag_id: {"runs", "mean_s", "max_s"}}`` in DAG-id order."""
    by_dag: dict[str, list[float]] = {}
    for dag_id, wait in rows:
        by_dag.setdefault(dag_id, []).append(max(0.0, float(wait)))
    return {
        d: {"runs": len(w), "mean_s": round(sum(w) / len(w), 1), "max_s": round(max(w), 1)}
        for d, w in sorted(by_dag.items())
    }


def summary_line(figures: dict[str, Any]) -> str:
    """``chaos: lost=<n> duplicated=<n> wrong=<n> stuck=<n> faults=<n> faults_unconfirmed=<n>
    worst_recovery_s=<x> fresh_p95_s=<x> max_rps_10s=<x> seed=<n>``: the run's last line."""

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return "nan" if math.isnan(v) else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"
        return str(v)

    return "chaos: " + " ".join(f"{k}={fmt(figures[k])}" for k in SUMMARY_KEYS)
