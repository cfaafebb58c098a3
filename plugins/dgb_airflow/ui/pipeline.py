"""The "Pipeline" view of the DGB UI (issue 14, item 6): the operators' picture of the event
pipeline beside the integrity charts, served by the same FastAPI app
(:func:`dgb_airflow.ui.app.create_app` includes :func:`router`; mounted under ``/dgb-integrity``),
server-side HTML with inline SVG.

* ``GET /pipeline``      the page: current backlog cards, per-stage backlog over the last hours,
                         commit -> searchable latency p50/p95 per hour, open dead letters by reason,
                         each host's request rate against its budget, integrity coverage and overdue
                         per age band, each agency's scrape cadence, its listing polls and yield
                         (articles per poll) and integrity's share against the listings';
* ``GET /api/pipeline``  :func:`dgb.observe.overview.pipeline_overview` as JSON.

Both take ``hours`` (window, 1-48, default 6) and ``step`` (minutes between backlog points, 5-240,
default 15). The data is :mod:`dgb.observe.overview`'s; this module only draws it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse, JSONResponse

from dgb_airflow.ui.common import CSS, duration_text, esc, hours_text, legend, pct, short_time, svg_open

log = logging.getLogger(__name__)

STAGE_COLORS = {"enrich": "#1565c0", "embed": "#00838f", "index": "#ef6c00"}
PRIORITY_COLORS = {"scrape": "#1565c0", "integrity": "#7b1fa2"}
P50_COLOR, P95_COLOR = "#2e7d32", "#a5d6a7"
COVERED_COLOR, OVERDUE_COLOR, DEAD_COLOR = "#2e7d32", "#c62828", "#c62828"


def current_model() -> str | None:
    """The embedding model a vector must come from to count as embedded (DGB_EMBEDDING_MODEL),
    as ``dgb status`` counts it."""
    from dgb.config import settings

    return settings().embedding_model


def load_overview(
    connect: Callable[[], Any], now: datetime | None, hours: float, step: float, model: str | None
) -> dict:
    from dgb.observe.overview import pipeline_overview

    conn = connect()
    try:
        return pipeline_overview(conn, now, hours=hours, step_minutes=step, model=model)
    finally:
        conn.close()


# -- SVG charts ------------------------------------------------------------------------------------


def _hm(iso: str) -> str:
    return datetime.fromisoformat(iso).strftime("%H:%M")


def _nice_max(value: float) -> float:
    """A round axis maximum at or above ``value`` (1, 2 or 5 x 10^k; 1 for nothing)."""
    if value <= 0:
        return 1.0
    k = 10.0 ** math.floor(math.log10(value))
    return next(m * k for m in (1, 2, 5, 10) if value <= m * k * (1 + 1e-9))


def backlog_chart(chart_id: str, points: list[dict], stages: list[str]) -> str:
    """One line per stage: articles pending at each point of the window."""
    width, height, left, right, top, bottom = 640, 230, 46, 14, 10, 46
    plot_w, plot_h = width - left - right, height - top - bottom
    ymax = _nice_max(max([p[s] for p in points for s in stages] + [0]))
    n = max(1, len(points) - 1)
    parts = [svg_open(chart_id, "Backlog per stage", width, height)]
    for tick in (0, 0.5, 1):
        y = top + plot_h * (1 - tick)
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#ddd"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end" fill="#666">'
            f"{ymax * tick:g}</text>"
        )
    if points:
        last = len(points) - 1
        for i in sorted({0, last // 2, last}):
            x = left + plot_w * i / n
            anchor = "start" if i == 0 else "end" if i == last else "middle"
            parts.append(
                f'<text x="{x:.1f}" y="{top + plot_h + 16}" font-size="11" text-anchor="{anchor}"'
                f' fill="#666">'
                f"{esc(_hm(points[i]['at']))}</text>"
            )
    for stage in stages:
        values = [p[stage] for p in points]
        xy = " ".join(
            f"{left + plot_w * i / n:.1f},{top + plot_h * (1 - v / ymax):.1f}" for i, v in enumerate(values)
        )
        color = STAGE_COLORS.get(stage, "#555")
        parts.append(
            f'<polyline class="series" data-stage="{esc(stage)}" data-values="{",".join(map(str, values))}"'
            f' points="{xy}" fill="none" stroke="{color}" stroke-width="2">'
            f"<title>{esc(stage)}: {values[-1] if values else 0} pending now</title></polyline>"
        )
    parts.append(legend([(s, STAGE_COLORS.get(s, "#555")) for s in stages], height - 8))
    parts.append("</svg>")
    return "".join(parts)


def latency_chart(chart_id: str, buckets: list[dict]) -> str:
    """Per hour: p95 (light) and p50 (dark) commit -> searchable latency, in minutes."""
    width, height, left, right, top, bottom = 640, 230, 60, 14, 10, 46
    plot_w, plot_h = width - left - right, height - top - bottom
    ymax = _nice_max(max([(b["p95_s"] or 0) / 60 for b in buckets] + [0]))
    slot = plot_w / max(1, len(buckets))
    bar_w = min(28.0, slot * 0.35)
    parts = [svg_open(chart_id, "Commit to searchable latency per hour (minutes)", width, height)]
    for tick in (0, 0.5, 1):
        y = top + plot_h * (1 - tick)
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#ddd"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end" fill="#666">'
            f"{ymax * tick:g} min</text>"
        )
    for i, b in enumerate(buckets):
        cx = left + slot * (i + 0.5)
        group = [
            f'<g class="bucket" data-bucket="{i}" data-p50="{"" if b["p50_s"] is None else b["p50_s"]}"'
            f' data-p95="{"" if b["p95_s"] is None else b["p95_s"]}" data-articles="{b["articles"]}">'
            f"<title>{esc(_hm(b['start']))}-{esc(_hm(b['end']))}: p50 {esc(duration_text(b['p50_s']))},"
            f" p95 {esc(duration_text(b['p95_s']))}, {b['articles']} articles</title>"
        ]
        for offset, key, color in ((-bar_w, "p95_s", P95_COLOR), (0.0, "p50_s", P50_COLOR)):
            v = (b[key] or 0) / 60
            h = plot_h * min(1.0, v / ymax)
            group.append(
                f'<rect x="{cx + offset:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w:.1f}"'
                f' height="{h:.1f}" fill="{color}"/>'
            )
        label = "–" if b["articles"] == 0 else str(b["articles"])
        group.append(
            f'<text x="{cx:.1f}" y="{top + plot_h + 16}" font-size="11" text-anchor="middle" fill="#666">'
            f"{esc(_hm(b['end']))}</text>"
            f'<text x="{cx:.1f}" y="{top + plot_h + 28}" font-size="10" text-anchor="middle" fill="#999">'
            f"n={esc(label)}</text></g>"
        )
        parts.append("".join(group))
    parts.append(legend([("p95", P95_COLOR), ("p50", P50_COLOR)], height - 4, x=left))
    parts.append("</svg>")
    return "".join(parts)


def dead_letter_chart(chart_id: str, reasons: list[dict]) -> str:
    """One bar per reason: open dead letters (new in the window in the label)."""
    bar_h, gap, label_w, width = 22, 6, 190, 640
    plot_w = width - label_w - 90
    height = max(1, len(reasons)) * (bar_h + gap) + 10
    top = max([r["open"] for r in reasons] + [1])
    parts = [svg_open(chart_id, "Open dead letters by reason", width, height)]
    if not reasons:
        parts.append('<text x="10" y="20" font-size="13" fill="#666">no open dead letters</text>')
    for i, r in enumerate(reasons):
        y = 4 + i * (bar_h + gap)
        w = plot_w * r["open"] / top
        parts.append(
            f'<g class="bar-row"><text x="{label_w - 8}" y="{y + bar_h * 0.7:.1f}" font-size="12"'
            f' text-anchor="end">{esc(r["reason"])}</text>'
            f'<rect class="bar" data-reason="{esc(r["reason"])}" data-count="{r["open"]}" x="{label_w}"'
            f' y="{y}" width="{max(w, 1):.1f}" height="{bar_h}" rx="3" fill="{DEAD_COLOR}">'
            f"<title>{esc(r['reason'])}: {r['open']} open"
            f" ({esc(', '.join(r['subscriptions']))})</title></rect>"
            f'<text x="{label_w + w + 6:.1f}" y="{y + bar_h * 0.7:.1f}" font-size="12" fill="#333">'
            f"{r['open']} ({r['new']} new)</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def host_chart(chart_id: str, hosts: list[dict]) -> str:
    """Per host: the measured request rate (stacked by priority) against its budget (the line)."""
    bar_h, gap, label_w, width = 22, 22, 150, 640
    plot_w = width - label_w - 110
    height = max(1, len(hosts)) * (bar_h + gap) + 30
    xmax = max([max(h["rate_per_s"], h["measured_rps"]) for h in hosts] + [0.001]) * 1.1
    parts = [svg_open(chart_id, "Request rate per host against its budget", width, height)]
    if not hosts:
        parts.append('<text x="10" y="20" font-size="13" fill="#666">no host budgets yet</text>')
    for i, h in enumerate(hosts):
        y = 4 + i * (bar_h + gap)
        parts.append(
            f'<g class="host" data-host="{esc(h["host"])}" data-rate="{h["measured_rps"]:.3f}"'
            f' data-budget="{h["rate_per_s"]:.3f}"><text x="{label_w - 8}" y="{y + bar_h * 0.7:.1f}"'
            f' font-size="12" text-anchor="end">{esc(h["host"])}</text>'
            f'<rect x="{label_w}" y="{y}" width="{plot_w}" height="{bar_h}" fill="#f3f3f3"/>'
        )
        x = float(label_w)
        for prio, rate in sorted(h.get("measured_rps_by_priority", {}).items()):
            w = plot_w * rate / xmax
            parts.append(
                f'<rect data-priority="{esc(prio)}" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}"'
                f' fill="{PRIORITY_COLORS.get(prio, "#555")}"><title>{esc(prio)}: {rate:g}/s</title></rect>'
            )
            x += w
        bx = label_w + plot_w * h["rate_per_s"] / xmax
        state = f"{h['in_flight']}/{h['max_in_flight']} in flight, {h['waiting']} waiting"
        if h.get("backoff_s"):
            state += f", backoff {h['backoff_s']:g}s ({h.get('backoff_reason') or '?'})"
        parts.append(
            f'<line x1="{bx:.1f}" y1="{y - 3}" x2="{bx:.1f}" y2="{y + bar_h + 3}" stroke="#222"'
            f' stroke-width="2"><title>budget {h["rate_per_s"]:g}/s</title></line>'
            f'<text x="{label_w + plot_w + 6}" y="{y + bar_h * 0.7:.1f}" font-size="12">'
            f"{h['measured_rps']:g} / {h['rate_per_s']:g} /s</text>"
            f'<text x="{label_w}" y="{y + bar_h + 13}" font-size="10" fill="#666">{esc(state)}</text></g>'
        )
    parts.append(legend([*PRIORITY_COLORS.items(), ("budget (line)", "#222")], height - 6))
    parts.append("</svg>")
    return "".join(parts)


def band_chart(chart_id: str, bands: list[dict]) -> str:
    """Per age band: articles checked within the band's target (covered) and the rest (overdue)."""
    bar_h, gap, label_w, width = 22, 20, 110, 640
    plot_w = width - label_w - 150
    height = max(1, len(bands)) * (bar_h + gap) + 26
    parts = [svg_open(chart_id, "Integrity coverage and overdue per age band", width, height)]
    for i, b in enumerate(bands):
        y = 4 + i * (bar_h + gap)
        n = b["articles"]
        cw = plot_w * b["covered"] / n if n else 0.0
        ow = plot_w * b["overdue"] / n if n else 0.0
        target = duration_text(b["target_minutes"] * 60)
        oldest = f", oldest overdue {hours_text(b['oldest_overdue_hours'])}" if b["overdue"] else ""
        parts.append(
            f'<g class="band" data-band="{esc(b["band"])}" data-articles="{n}" data-overdue="{b["overdue"]}"'
            f' data-covered="{b["covered"]}"><text x="{label_w - 8}" y="{y + bar_h * 0.7:.1f}"'
            f' font-size="12" text-anchor="end">{esc(b["label"])}</text>'
            f'<rect x="{label_w}" y="{y}" width="{plot_w}" height="{bar_h}" fill="#f3f3f3"/>'
            f'<rect x="{label_w}" y="{y}" width="{cw:.1f}" height="{bar_h}" fill="{COVERED_COLOR}"/>'
            f'<rect x="{label_w + cw:.1f}" y="{y}" width="{ow:.1f}" height="{bar_h}" fill="{OVERDUE_COLOR}"/>'
            f'<text x="{label_w + plot_w + 6}" y="{y + bar_h * 0.7:.1f}" font-size="12">'
            f"{esc(pct(b['coverage']))} of {n}</text>"
            f'<text x="{label_w}" y="{y + bar_h + 12}" font-size="10" fill="#666">target {esc(target)},'
            f" {b['overdue']} overdue{esc(oldest)}, {b['never_checked']} never checked</text></g>"
        )
    parts.append(legend([("covered", COVERED_COLOR), ("overdue", OVERDUE_COLOR)], height - 6))
    parts.append("</svg>")
    return "".join(parts)


# -- page ------------------------------------------------------------------------------------------


def cadence_table(table_id: str, cadence: dict | None) -> str:
    """Each agency's scrape cadence (fastest first), why, its expected rate and measured lag, and the
    conditional listing polls' hit rate (dgb.scraper.conditional)."""
    if not cadence or not cadence["agencies"]:
        return '<p class="muted">No cadence yet: the scrape_dispatcher DAG has not run.</p>'
    reasons = " · ".join(f"{esc(k)} {v}" for k, v in cadence["by_reason"].items())
    rows = "".join(
        f"<tr><td>{esc(a['agency'])}</td><td>{esc(duration_text(a['interval_s']))}</td>"
        f"<td>{esc(a['reason'])}</td><td>{a['rate_per_hour']:.2f}</td>"
        f"<td>{esc(duration_text(a['lag_p50_s']) if a['lag_articles'] else '-')}</td>"
        f"<td>{a['lag_articles']}</td><td>{esc(duration_text(a['due_in_s']))}</td></tr>"
        for a in cadence["agencies"]
    )
    cond = cadence.get("conditional") or {}
    hits = (
        f'<p class="muted" id="{table_id}-conditional">conditional listing polls: {cond["hit_rate"]:.0%}'
        f" answered 304 (hits {cond['hits']}, misses {cond['misses']}, unconditional {cond['full']};"
        " a 304 is still a request of the host budget)</p>"
        if cond.get("hit_rate") is not None
        else ""
    )
    return (
        f'<p class="muted">{len(cadence["agencies"])} agencies, ~{cadence["polls_per_hour"]:.0f} polls/h;'
        f" {reasons}; decided {esc(duration_text(cadence['updated_age_s']))} ago</p>{hits}"
        f'<div style="max-height:320px;overflow:auto"><table id="{table_id}"><thead><tr><th>agency</th>'
        "<th>every</th><th>reason</th><th>expected/h</th><th>lag p50 (24 h)</th><th>n</th>"
        f"<th>next in</th></tr></thead><tbody>{rows}</tbody></table></div>"
    )


def poll_table(table_id: str, polls: dict | None) -> str:
    """Each agency's listing polls over the window, what they found, the yield (articles per poll)
    and its current interval and reason, most polled first; above it the totals and integrity's
    share of the host budget against the listings' (dgb.observe.yields)."""
    if not polls or not polls["agencies"]:
        return '<p class="muted">No listing polls and no new articles in this window.</p>'
    from dgb.observe.yields import split_text, totals_text, yield_text

    share = polls.get("share")
    split = f'<p class="muted" id="{table_id}-share">{esc(split_text(share))}</p>' if share else ""
    rows = "".join(
        f'<tr><td>{esc(a["agency"])}</td><td class="num">{a["polls"]}</td>'
        f'<td class="num">{a["found"]}</td><td class="num">{a["failed"]}</td>'
        f'<td class="num">{a["articles"]}</td><td class="num">{yield_text(a["yield"])}</td>'
        f"<td>{esc(duration_text(a['interval_s']))}</td><td>{esc(a['reason'] or '-')}</td>"
        f"<td>{esc(duration_text(a['due_in_s']))}</td></tr>"
        for a in polls["agencies"]
    )
    return (
        f'<p class="muted" id="{table_id}-totals">since {esc(short_time(polls["since"]))} UTC:'
        f" {esc(totals_text(polls['totals']))}</p>{split}"
        f'<div style="max-height:320px;overflow:auto"><table id="{table_id}"><thead><tr><th>agency</th>'
        "<th>polls</th><th>found news</th><th>failed</th><th>articles</th><th>yield</th><th>every</th>"
        f"<th>reason</th><th>next in</th></tr></thead><tbody>{rows}</tbody></table></div>"
    )


def render_page(o: dict) -> str:
    cur = o["current"]
    backlog = cur["backlog"]
    stages = [s for s in backlog if s != "outbox"]
    cards = [
        (
            f"{s} pending",
            backlog[s]["pending"],
            f"oldest {duration_text(backlog[s]['oldest_age_s'])}",
        )
        for s in stages
    ]
    cards += [
        (
            "outbox unpublished",
            backlog["outbox"]["pending"],
            f"oldest {duration_text(backlog['outbox']['oldest_age_s'])}",
        ),
        ("open dead letters", cur["dead_letters"], f"{len(o['dead_letters'])} reasons"),
        (
            "commit → searchable",
            duration_text(cur["latency_p50_s"]),
            f"p95 {duration_text(cur['latency_p95_s'])} · {cur['latency_sample']} scraped in window",
        ),
        ("articles", cur["articles"], f"{cur['indexed']} indexed"),
    ]
    card_html = "".join(
        f'<div class="card"><div class="v">{esc(v)}</div><div class="k">{esc(k)}</div>'
        f'<div class="k muted">{esc(d)}</div></div>'
        for k, v, d in cards
    )
    hours, step = o["hours"], o["step_minutes"]
    windows = " ".join(
        f'<a href="pipeline?hours={h}&amp;step={s}">{h} h</a>'
        for h, s in ((1, 5), (6, 15), (24, 60), (48, 120))
    )
    paused = cur.get("removals_paused") or []
    paused_html = (
        '<div class="panel alert" id="removals-paused"><h2>Removals paused</h2><ul>'
        + "".join(f"<li><b>{esc(b['scope'])} {esc(b['key'])}</b>: {esc(b['reason'])}</li>" for b in paused)
        + "</ul></div>"
        if paused
        else ""
    )
    history = o["backlog_history"]
    panels = "\n".join(
        f'<div class="panel"><h2>{esc(title)}</h2>{chart}</div>'
        for title, chart in (
            ("Backlog per stage (articles pending)", backlog_chart("chart-backlog", history, stages)),
            ("Commit → searchable latency per hour", latency_chart("chart-latency", o["latency"])),
            ("Open dead letters by reason", dead_letter_chart("chart-dead-letters", o["dead_letters"])),
            ("Requests per host against the budget (last minute)", host_chart("chart-hosts", o["hosts"])),
            ("Integrity coverage and overdue per age band", band_chart("chart-bands", o["bands"])),
            ("Scrape cadence per agency (learnt)", cadence_table("table-cadence", o.get("cadence"))),
            ("Listing polls and yield per agency", poll_table("table-polls", o.get("polls"))),
        )
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>DGB pipeline</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style></head>
<body>
<nav class="pages"><a href="./">Integrity</a> <b>Pipeline</b></nav>
<h1>Pipeline</h1>
<div class="sub">Generated {esc(short_time(o["generated_at"]))} UTC · last {hours:g} h, backlog every \
{step:g} min · window: {windows} · embedding model {esc(o.get("model") or "any")} · \
<a href="api/pipeline?hours={hours:g}&amp;step={step:g}">JSON</a></div>
{paused_html}
<div class="cards">{card_html}</div>
<div class="grid">
{panels}
</div>
</body></html>"""


def router(
    connect: Callable[[], Any],
    *,
    now: Callable[[], datetime | None] | None = None,
    model: Callable[[], str | None] = current_model,
) -> APIRouter:
    """The pipeline view's routes. ``connect`` returns a psycopg connection; ``now`` fixes the
    clock (tests; default: now), ``model`` gives the current embedding model."""
    r = APIRouter()
    clock = now or (lambda: None)
    hours_q = Query(6.0, gt=0, le=48, description="window in hours")
    step_q = Query(15.0, ge=5, le=240, description="minutes between backlog points")

    @r.get("/pipeline", response_class=HTMLResponse)
    def page(hours: float = hours_q, step: float = step_q) -> HTMLResponse:
        try:
            overview = load_overview(connect, clock(), hours, step, model())
        except Exception as exc:
            log.exception("dgb pipeline UI: overview failed")
            return HTMLResponse(
                f"<!DOCTYPE html><html><body><h1>Pipeline</h1><p>Pipeline view unavailable: "
                f"{esc(type(exc).__name__)}: {esc(exc)}</p></body></html>",
                status_code=503,
            )
        return HTMLResponse(render_page(overview))

    @r.get("/api/pipeline")
    def overview_json(hours: float = hours_q, step: float = step_q) -> JSONResponse:
        try:
            return JSONResponse(load_overview(connect, clock(), hours, step, model()))
        except Exception as exc:
            log.exception("dgb pipeline UI: overview failed")
            return JSONResponse({"error": f"{type(exc).__name__}: {exc}"}, status_code=503)

    return r
