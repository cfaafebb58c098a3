"""Integrity metrics, read from the SQL views of migration 0003.

Per agency (``integrity_agency_metrics``): modification rate (checked articles with at least one
recorded modification / checked articles), modification types (title / content / image /
subtitle change counts), mean time from publication to the first detected modification,
broken-link rate ((removed + broken image) / checked). Per tier (``integrity_tier_outcomes``):
check counts and outcomes. Plus the latest change-history rows, open problems and the agencies /
hosts whose removals a breaker pauses now (``removals_paused``, see :mod:`dgb.integrity.evidence`).
Per article-age band (:func:`band_figures`, issue 14): coverage (share of the band's articles
checked within the band's target), overdue count and the oldest overdue article.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from psycopg.rows import dict_row

from dgb.integrity.evidence import tripped_breakers
from dgb.integrity.result import OUTCOMES
from dgb.integrity.tiers import AGE_BANDS, AgeBand, Schedule

FIELD_LABELS = {"title": "title", "content": "content", "image_url": "image", "subtitle": "subtitle"}


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _rows(cur, sql: str, params=None) -> list[dict]:
    cur.execute(sql, params)
    return [{k: _plain(v) for k, v in r.items()} for r in cur.fetchall()]


def band_figures(
    conn, now: datetime | None = None, bands: tuple[AgeBand, ...] = AGE_BANDS
) -> list[dict[str, Any]]:
    """Coverage and overdue articles per age band, for the report, StatsD and the UI.

    One dict per band, youngest first: ``band``, ``label``, ``target_minutes`` (checked at least
    this often to count as covered), ``articles`` (not removed), ``covered`` (checked within the
    target), ``coverage`` (covered / articles, None without articles), ``overdue`` (the rest: not
    checked within the target; a never-checked article counts from its publication),
    ``oldest_overdue_hours`` (the longest time since the last check among them, None when none)
    and ``never_checked``. An article's band is its age at ``now`` (default: the database's now).
    """
    params: dict[str, Any] = {}
    band_case, target_case = [], []
    for i, b in enumerate(bands):
        conds = []
        if b.max_age is not None:
            params[f"max{i}"] = b.max_age
            conds.append(f"n.published_at > t.now - %(max{i})s")
        params[f"target{i}"] = b.target
        band_case.append(f"WHEN {' AND '.join(conds) or 'true'} THEN {i}")
        target_case.append(f"WHEN {i} THEN %(target{i})s")
    params["now"] = now
    sql = f"""
        WITH t AS (SELECT coalesce(%(now)s::timestamptz, now()) AS now),
        a AS (
            SELECT CASE {" ".join(band_case)} END AS band,
                   t.now - coalesce(s.last_checked_at, n.published_at) AS since,
                   s.last_checked_at IS NULL AS never
            FROM news n CROSS JOIN t LEFT JOIN integrity_state s ON s.news_id = n.id
            WHERE n.removed_at IS NULL
        ), b AS (SELECT a.*, CASE band {" ".join(target_case)} END AS target FROM a)
        SELECT band, count(*)::bigint,
               count(*) FILTER (WHERE NOT never AND since <= target)::bigint,
               count(*) FILTER (WHERE since > target)::bigint,
               extract(epoch FROM max(since) FILTER (WHERE since > target)),
               count(*) FILTER (WHERE never)::bigint
        FROM b GROUP BY band"""
    with conn.cursor() as cur:
        cur.execute(sql, params)
        found = {r[0]: r[1:] for r in cur.fetchall()}
    conn.commit()
    out = []
    for i, b in enumerate(bands):
        articles, covered, overdue, oldest, never = found.get(i, (0, 0, 0, None, 0))
        out.append(
            {
                "band": b.name,
                "label": b.label,
                "target_minutes": b.target / timedelta(minutes=1),
                "articles": int(articles),
                "covered": int(covered),
                "coverage": round(covered / articles, 4) if articles else None,
                "overdue": int(overdue),
                "oldest_overdue_hours": None if oldest is None else round(float(oldest) / 3600.0, 2),
                "never_checked": int(never),
            }
        )
    return out


def integrity_report(conn, *, recent: int = 20, schedule: Schedule | None = None) -> dict[str, Any]:
    schedule = schedule or Schedule.from_env()
    bands = band_figures(conn)
    with conn.cursor(row_factory=dict_row) as cur:
        agencies = _rows(
            cur, "SELECT * FROM integrity_agency_metrics ORDER BY checked_articles DESC, agency_key"
        )
        tier_rows = _rows(
            cur, "SELECT tier, outcome, checks, checks_recent, bytes FROM integrity_tier_outcomes"
        )
        types = _rows(
            cur,
            "SELECT field_changed, source, sum(changes)::bigint AS changes"
            " FROM integrity_modification_types GROUP BY field_changed, source",
        )
        recent_rows = _rows(
            cur,
            "SELECT n.unique_id, n.agency_key, n.title, h.field_changed, h.source,"
            " left(h.old_value, 200) AS old_value, left(h.new_value, 200) AS new_value,"
            " h.detected_at FROM news_update_history h JOIN news n ON n.id = h.news_id"
            " ORDER BY h.detected_at DESC, h.id DESC LIMIT %s",
            (recent,),
        )
        problems = _rows(
            cur,
            "SELECT coalesce(problem, CASE WHEN image_broken THEN 'image_broken'"
            " WHEN removed_at IS NOT NULL THEN 'removed' ELSE 'failing_checks' END) AS problem,"
            " count(*)::bigint AS articles FROM integrity_problems GROUP BY 1 ORDER BY 1",
        )
    conn.commit()
    paused = tripped_breakers(conn)
    tiers = []
    by_tier: dict[str, list[dict]] = {}
    for r in tier_rows:
        by_tier.setdefault(r["tier"], []).append(r)
    known = [t.name for t in schedule.tiers]
    for name in known + sorted(set(by_tier) - set(known)):
        rows = by_tier.get(name, [])
        outcomes = dict.fromkeys(OUTCOMES, 0)
        recent_outcomes = dict.fromkeys(OUTCOMES, 0)
        for r in rows:
            outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + int(r["checks"])
            recent_outcomes[r["outcome"]] = recent_outcomes.get(r["outcome"], 0) + int(r["checks_recent"])
        try:
            t = schedule.tier(name)
            label, dag_id = t.label, t.dag_id
            every = schedule.dag_interval(t).total_seconds() / 60
        except KeyError:
            label, dag_id, every = name, None, None
        tiers.append(
            {
                "tier": name,
                "label": label,
                "dag_id": dag_id,
                "every_minutes": every,
                "checks": sum(outcomes.values()),
                "checks_recent": sum(recent_outcomes.values()),
                "bytes": sum(int(r["bytes"]) for r in rows),
                "outcomes": outcomes,
                "outcomes_recent": recent_outcomes,
            }
        )
    mod_types: dict[str, int] = {}
    mod_types_integrity: dict[str, int] = {}
    for r in types:
        label = FIELD_LABELS.get(r["field_changed"], r["field_changed"])
        mod_types[label] = mod_types.get(label, 0) + int(r["changes"])
        if r["source"] == "integrity":
            mod_types_integrity[label] = mod_types_integrity.get(label, 0) + int(r["changes"])
    checked = sum(a["checked_articles"] for a in agencies)
    modified = sum(a["modified_articles"] for a in agencies)
    broken = sum(a["broken_articles"] for a in agencies)
    totals = {
        "articles": sum(a["articles"] for a in agencies),
        "checked_articles": checked,
        "modified_articles": modified,
        "broken_articles": broken,
        "removed_articles": sum(a["removed_articles"] for a in agencies),
        "suspect_articles": sum(a["suspect_articles"] for a in agencies),
        "moved_articles": sum(a["moved_articles"] for a in agencies),
        "image_broken_articles": sum(a["image_broken_articles"] for a in agencies),
        "checks": sum(t["checks"] for t in tiers),
        "modification_rate": round(modified / checked, 4) if checked else None,
        "broken_link_rate": round(broken / checked, 4) if checked else None,
    }
    return {
        "generated_at": datetime.now(UTC).isoformat(),
        "schedule": {
            "mode": schedule.mode,
            "tiers": [
                {
                    "tier": t.name,
                    "label": t.label,
                    "dag_id": t.dag_id,
                    "every_minutes": schedule.dag_interval(t).total_seconds() / 60,
                }
                for t in schedule.tiers
            ],
        },
        "totals": totals,
        "agencies": agencies,
        "modification_types": mod_types,
        "modification_types_integrity": mod_types_integrity,
        "tiers": tiers,
        "problems": {r["problem"]: int(r["articles"]) for r in problems},
        "recent_changes": recent_rows,
        "removals_paused": paused,
        "bands": bands,
    }


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def format_table(report: dict[str, Any]) -> str:
    """The report as plain-text tables (``dgb integrity-report``)."""
    lines = []
    t = report["totals"]
    lines.append(f"Integrity report ({report['generated_at']}, schedule: {report['schedule']['mode']})")
    lines.append(
        f"articles {t['articles']}  checked {t['checked_articles']}  modified {t['modified_articles']}"
        f" ({_pct(t['modification_rate'])})  broken {t['broken_articles']} ({_pct(t['broken_link_rate'])})"
        f"  checks {t['checks']}"
    )
    for b in report.get("removals_paused") or []:
        lines.append(f"REMOVALS PAUSED for {b['scope']} {b['key']} since {b['tripped_at']}: {b['reason']}")
    if report.get("removals_paused"):
        lines.append(
            "(removals paused: gone answers there only mark articles suspect_removed until the"
            " breaker clears)"
        )
    lines.append("")
    head = (
        f"{'agency':<28} {'checked':>8} {'modified':>8} {'mod.rate':>8} {'title':>6} {'content':>7} "
        f"{'image':>6} {'h->1st mod':>10} {'removed':>7} {'suspect':>7} {'moved':>6} {'img.brk':>7} "
        f"{'brk.rate':>8}"
    )
    lines += [head, "-" * len(head)]
    for a in report["agencies"]:
        hours = a["mean_hours_to_first_modification"]
        lines.append(
            f"{a['agency_key'][:28]:<28} {a['checked_articles']:>8} {a['modified_articles']:>8} "
            f"{_pct(a['modification_rate']):>8} {a['title_changes']:>6} {a['content_changes']:>7} "
            f"{a['image_changes']:>6} {('-' if hours is None else f'{hours:.1f}'):>10} "
            f"{a['removed_articles']:>7} "
            f"{a['suspect_articles']:>7} {a['moved_articles']:>6} "
            f"{a['image_broken_articles']:>7} {_pct(a['broken_link_rate']):>8}"
        )
    lines.append("")
    head = f"{'tier':<8} {'label':<12} {'every':>8} {'checks':>8} " + " ".join(f"{o:>12}" for o in OUTCOMES)
    lines += [head, "-" * len(head)]
    for tier in report["tiers"]:
        every = tier["every_minutes"]
        lines.append(
            f"{tier['tier']:<8} {tier['label']:<12} {('-' if every is None else f'{every:g}m'):>8} "
            f"{tier['checks']:>8} " + " ".join(f"{tier['outcomes'].get(o, 0):>12}" for o in OUTCOMES)
        )
    if report["modification_types"]:
        lines.append("")
        lines.append(
            "modification types: "
            + ", ".join(f"{k} {v}" for k, v in sorted(report["modification_types"].items()))
        )
    if report["problems"]:
        lines.append("open problems: " + ", ".join(f"{k} {v}" for k, v in report["problems"].items()))
    if report.get("bands"):
        lines.append("")
        head = (
            f"{'age band':<14} {'target':>8} {'articles':>9} {'coverage':>9} {'overdue':>8}"
            f" {'oldest overdue':>15} {'never':>7}"
        )
        lines += [head, "-" * len(head)]
        for b in report["bands"]:
            oldest = b["oldest_overdue_hours"]
            lines.append(
                f"{b['label']:<14} {_minutes(b['target_minutes']):>8} {b['articles']:>9}"
                f" {_pct(b['coverage']):>9} {b['overdue']:>8}"
                f" {('-' if oldest is None else f'{oldest:.1f} h'):>15} {b['never_checked']:>7}"
            )
    return "\n".join(lines)


def _minutes(minutes: float) -> str:
    if minutes >= 1440 and minutes % 1440 == 0:
        return f"{minutes / 1440:g}d"
    if minutes >= 60 and minutes % 60 == 0:
        return f"{minutes / 60:g}h"
    return f"{minutes:g}m"
