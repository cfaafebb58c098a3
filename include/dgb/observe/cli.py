"""`dgb status`: counts, backlog and latency of the pipeline."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime

SHOWN_AGENCIES = 10  # agencies the listing polls section lists without --agencies


def register(sub) -> None:
    p = sub.add_parser("status", help="pipeline counts per stage, backlog and commit->indexed latency")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--since", help="ISO 8601 start of the latency window (default: the last hour)")
    p.add_argument(
        "--agencies",
        action="store_true",
        help="list every agency's listing polls, yield and cadence"
        f" (default: the {SHOWN_AGENCIES} most polled)",
    )
    p.set_defaults(func=_cmd_status)


def host_line(h: dict) -> str:
    """One host's request budget as `dgb status` prints it (issue 14)."""
    waiting = h["waiting"]
    if waiting:
        parts = ", ".join(f"{k} {v}" for k, v in sorted(h["waiting_by_priority"].items()))
        waiting = f"{waiting} ({parts})"
    backoff = "-"
    if h["backoff_s"]:
        backoff = f"{h['backoff_s']:.0f}s until {h['backoff_until']} ({h['backoff_reason']})"
    return (
        f"host {h['host']}  rate {h['rate_per_s']:g}/s (measured {h['measured_rps']:.2f}/s over 60s)  "
        f"in_flight {h['in_flight']}/{h['max_in_flight']}  waiting {waiting}  backoff {backoff}"
    )


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} s" if abs(value) < 120 else f"{value / 60:.0f} min"


def share_line(share: dict) -> str:
    """The integrity checks' requests/s for their next run, and why (dgb.integrity.share)."""
    if share["source"] != "host":
        why = "DGB_INTEGRITY_BUDGET_RPS" if share["source"] == "configured" else "shared host budget off"
        return f"integrity share: {share['rps']:g} req/s ({why})"
    return (
        f"integrity share: {share['rps']:.2f} req/s of www.gov.br's {share['host_rps']:g}"
        f" (listings planned {share['listings_planned_rps']:.2f}/s,"
        f" articles forecast {share.get('articles_planned_rps', 0.0):.2f}/s, scrapes measured"
        f" {share['scrape_measured_rps']:.2f}/s over 10 min, floor {share['min_rps']:g})"
    )


def cadence_lines(c: dict) -> list[str]:
    """Each agency's scrape cadence, its reason and measured lag as `dgb status` prints them (issue 27)."""
    if not c["agencies"]:
        return ["  scrape cadence: none yet (the scrape_dispatcher DAG has not run)"]
    reasons = ", ".join(f"{k} {v}" for k, v in c["by_reason"].items())
    lines = [
        f"  scrape cadence (decided {_secs(c['updated_age_s'])} ago): {len(c['agencies'])} agencies,"
        f" ~{c['polls_per_hour']:.0f} polls/h; {reasons}"
    ]
    cond = c.get("conditional")
    if cond and cond["hit_rate"] is not None:
        lines.append(
            f"  conditional listing polls: {cond['hit_rate']:.0%} answered 304 (hits {cond['hits']},"
            f" misses {cond['misses']}, unconditional {cond['full']}; a 304 is still a request)"
        )
    for a in c["agencies"]:
        lag = f"lag p50 {_secs(a['lag_p50_s'])} (n={a['lag_articles']})" if a["lag_articles"] else "lag -"
        lines.append(
            f"    scrape {a['agency']:<28s} every {_secs(a['interval_s']):>7s}  {a['reason']:<8s}"
            f" {a['rate_per_hour']:6.2f}/h  {lag}  next in {_secs(a['due_in_s'])}"
        )
    return lines


def poll_lines(t: dict, limit: int | None = SHOWN_AGENCIES) -> list[str]:
    """The listing polls section of `dgb status` (issue 36): the window's totals, integrity's share
    against the listings', then one line per agency, most polled first (``limit`` of them, all
    when None), from :func:`dgb.observe.yields.agency_table`."""
    from dgb.observe.yields import split_text, totals_text, yield_text

    lines = [f"  listing polls since {t['since']}: {totals_text(t['totals'])}"]
    if t.get("share"):
        lines.append(f"  {split_text(t['share'])}")
    shown = t["agencies"] if limit is None else t["agencies"][:limit]
    for a in shown:
        every = "every       -" if a["interval_s"] is None else f"every {_secs(a['interval_s']):>7s}"
        lines.append(
            f"    polls {a['agency']:<28s} {a['polls']:6d}  found {a['found']:4d}  failed {a['failed']:3d}"
            f"  articles {a['articles']:4d}  yield {yield_text(a['yield']):>6s}  {every}"
            f"  {a['reason'] or '-':<8s} next in {_secs(a['due_in_s'])}"
        )
    if len(shown) < len(t["agencies"]):
        lines.append(f"    ... {len(t['agencies']) - len(shown)} more agencies (dgb status --agencies)")
    return lines


def _cmd_status(args) -> int:
    from dgb import db
    from dgb.config import settings
    from dgb.observe.status import pipeline_status

    since = None
    if args.since:
        try:
            since = datetime.fromisoformat(args.since)
        except ValueError:
            print(f"error: --since must be ISO 8601, got {args.since!r}", file=sys.stderr)
            return 2
        if since.tzinfo is None:
            since = since.replace(tzinfo=UTC)
    try:
        conn = db.connect(settings().pg_dsn(), connect_timeout=5)
    except Exception as exc:
        print(f"error: cannot reach PostgreSQL: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    try:
        status = pipeline_status(conn, since, model=settings().embedding_model)
    finally:
        conn.close()
    if args.json:
        print(json.dumps(status))
        return 0
    print(
        f"articles {status['articles']}  enriched {status['enriched']}  embedded {status['embedded']}  "
        f"indexed {status['indexed']}  dead_letters {status['dead_letters']}  "
        f"outbox_pending {status['outbox_pending']}"
    )
    for stage, b in status["backlog"].items():
        age = "-" if b["oldest_age_s"] is None else f"{b['oldest_age_s']:.0f}s"
        print(f"  backlog {stage:7s} pending {b['pending']:6d}  oldest {age}")
    p50, p95 = status["latency_p50_s"], status["latency_p95_s"]
    print(
        f"  commit->indexed since {status['since']}: p50 {p50}s  p95 {p95}s  (n={status['latency_sample']})"
    )
    if status.get("outbox_failed"):
        age = status.get("outbox_failed_oldest_age_s")
        print(
            f"  OUTBOX FAILED {status['outbox_failed']} event(s) refused by Pub/Sub for good"
            f" (oldest {'-' if age is None else f'{age:.0f}s'} ago; see outbox.last_error)"
        )
    for h in status.get("parked") or []:
        print(f"  parked  {h['stage']:7s} {h['count']:6d}  reason {h['reason']}")
    held = {(h["stage"], h["reason"]): h["count"] for h in status.get("held") or []}
    parked = {(h["stage"], h["reason"]): h["count"] for h in status.get("parked") or []}
    for (stage, reason), n in held.items():
        if n - parked.get((stage, reason), 0):
            print(f"  held    {stage:7s} {n - parked.get((stage, reason), 0):6d}  reason {reason}")
    for b in status.get("breakers") or []:
        until = f" until {b['open_until']}" if b["state"] == "open" and b["open_until"] else ""
        print(f"  breaker {b['name']} {b['state']}{until} failures {b['failures']}: {b['last_error']}")
    for h in status.get("hosts") or []:
        print(f"  {host_line(h)}")
    if "scrape_cadence" in status:
        print("\n".join(cadence_lines(status["scrape_cadence"])))
    if status.get("integrity_share"):
        print(f"  {share_line(status['integrity_share'])}")
    for b in status.get("removals_paused") or []:
        print(f"  REMOVALS PAUSED {b['scope']} {b['key']} since {b['tripped_at']}: {b['reason']}")
    if status.get("listing_polls"):
        print("\n".join(poll_lines(status["listing_polls"], None if args.agencies else SHOWN_AGENCIES)))
    return 0
