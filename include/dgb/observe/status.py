"""Pipeline status from our own state (the oldest-unacknowledged-age signal, per stage).

A stage's backlog is what its definition (:mod:`dgb.pipeline.definitions`) says is pending,
dated by the oldest value of its ``since`` column: the same rule its sweep and reconciliation use.
``held`` counts, per stage and reason, the articles held out of the sweep after a permanent
failure, ``parked`` those parked for an operator (``dgb redrive`` takes them up again);
``breakers`` lists the dependencies whose circuit breaker is not closed (dgb.pipeline.resilience);
``scrape_cadence`` each agency's learnt scrape cadence, its reason and measured lag
(:func:`dgb.scraper.dispatch.cadence_table`); ``integrity_share`` the requests/s the next integrity
budget run would plan with (:func:`dgb.integrity.share.integrity_share`); ``listing_polls`` each
agency's polls, articles and yield over the last ``poll_hours`` beside its cadence, and integrity's
share against the listings' (:func:`dgb.observe.yields.agency_table`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dgb import outbox
from dgb.hostbudget import snapshot as host_budgets
from dgb.integrity.evidence import tripped_breakers
from dgb.integrity.share import integrity_share
from dgb.integrity.tiers import BudgetPolicy
from dgb.observe.yields import WINDOW_HOURS, agency_table
from dgb.pipeline.definitions import DEFINITIONS, SEARCHABLE, params
from dgb.pipeline.resilience import breaker_rows
from dgb.scraper.dispatch import cadence_table


def pipeline_status(
    conn,
    since: datetime | None = None,
    now: datetime | None = None,
    *,
    model: str | None = None,
    poll_hours: float = WINDOW_HOURS,
) -> dict:
    """Counts, backlog per stage (and the outbox) and commit->indexed latency since ``since``
    (default: the last hour), over the articles whose current version is searchable
    (:data:`dgb.pipeline.definitions.SEARCHABLE`). ``model``: the current embedding model
    (``dgb status`` passes DGB_EMBEDDING_MODEL; ``None`` = a vector of any model counts as
    embedded). ``poll_hours``: the window of ``listing_polls`` (whole hours, at least this)."""
    now = now or datetime.now(UTC)
    since = since or now - timedelta(hours=1)
    out: dict = {}
    with conn.cursor() as cur:
        # one scan of news for the counts and every stage's backlog (the embed rule's current-model
        # test defeats its partial index, so separate queries would read the table twice)
        stage_sql = ", ".join(
            f"count(*) FILTER (WHERE {d.pending}), min({d.since}) FILTER (WHERE {d.pending})"
            for d in DEFINITIONS.values()
        )
        cur.execute(
            f"SELECT count(*), count(enriched_at), count(embedded_at), count(indexed_at), {stage_sql}"
            " FROM news",
            params(model),
        )
        row = cur.fetchone()
        out["articles"], out["enriched"], out["embedded"], out["indexed"] = row[:4]
        stage_rows = {stage: row[4 + 2 * i : 6 + 2 * i] for i, stage in enumerate(DEFINITIONS)}
        cur.execute("SELECT count(*) FROM dead_letters WHERE status = 'open'")
        out["dead_letters"] = cur.fetchone()[0]
        cur.execute(f"SELECT count(*), min(created_at) FROM outbox WHERE {outbox.PENDING}")
        pending, oldest = cur.fetchone()
        out["outbox_pending"] = pending
        # terminal: Pub/Sub refused these for good (issue 13); they never count as pending
        cur.execute(f"SELECT count(*), min(failed_at) FROM outbox WHERE {outbox.FAILED}")
        failed, first_failed = cur.fetchone()
        out["outbox_failed"] = failed
        out["outbox_failed_oldest_age_s"] = _age(now, first_failed)
        backlog = {}
        for stage, (n, first) in stage_rows.items():
            backlog[stage] = {"pending": n, "oldest_age_s": _age(now, first)}
        backlog["outbox"] = {"pending": pending, "oldest_age_s": _age(now, oldest)}
        out["backlog"] = backlog
        cur.execute(
            "SELECT hold_stage, coalesce(hold_reason, '?'), count(*), count(parked_at) FROM news"
            " WHERE hold_stage IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2"
        )
        holds = cur.fetchall()
        out["held"] = [{"stage": st, "reason": r, "count": n} for st, r, n, _ in holds]
        out["parked"] = [{"stage": st, "reason": r, "count": p} for st, r, _, p in holds if p]
        cur.execute(
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s), percentile_cont(0.95) WITHIN GROUP"
            " (ORDER BY s), count(*) FROM (SELECT extract(epoch FROM indexed_at - scraped_at) AS s FROM news"
            f" WHERE scraped_at >= %s AND {SEARCHABLE}) t",
            (since,),
        )
        p50, p95, n = cur.fetchone()
    conn.commit()
    out["latency_p50_s"] = None if p50 is None else round(float(p50), 3)
    out["latency_p95_s"] = None if p95 is None else round(float(p95), 3)
    out["latency_sample"] = n
    out["since"] = since.isoformat()
    out["removals_paused"] = tripped_breakers(conn)  # issue 16: agencies/hosts whose removals pause
    out["breakers"] = breaker_rows(conn)
    out["hosts"] = host_budgets(conn)  # issue 14: each host's request budget, use, waiters, backoff
    out["scrape_cadence"] = cadence_table(conn, now)  # issue 27: each agency's cadence, reason, lag
    out["integrity_share"] = integrity_share(conn, BudgetPolicy.from_env().budget_rps).as_dict()
    out["listing_polls"] = agency_table(conn, out["scrape_cadence"], out["integrity_share"], now, poll_hours)
    conn.commit()
    return out


def _age(now: datetime, first) -> float | None:
    return None if first is None else round(max(0.0, (now - first).total_seconds()), 1)
