"""The "DGB integrity" page of the Airflow UI, rendering the integrity report as server-side HTML
with inline SVG charts (no scripts, no CDN), plus the same data as JSON. Served by the DGB UI app
(:func:`dgb_airflow.ui.app.create_app`, mounted under ``/dgb-integrity``):

* ``GET /``            the page: totals, per-agency modification-rate and broken-link-rate bars,
                       check outcomes per tier (stacked bars), modification types, latest changes;
* ``GET /api/report``  :func:`dgb.integrity.report.integrity_report` as JSON.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, JSONResponse

from dgb_airflow.ui.common import CSS, legend, svg_open
from dgb_airflow.ui.common import esc as _e
from dgb_airflow.ui.common import hours_text as _hours
from dgb_airflow.ui.common import pct as _pct
from dgb_airflow.ui.common import short_time as _short_time

log = logging.getLogger(__name__)

OUTCOME_COLORS = {
    "unchanged": "#2e7d32",
    "modified": "#1565c0",
    "moved": "#00838f",
    "suspect_removed": "#b39ddb",
    "removed": "#6a1b9a",
    "image_broken": "#ef6c00",
    "error": "#c62828",
}
FIELD_COLORS = {"title": "#1565c0", "content": "#00838f", "image": "#ef6c00", "subtitle": "#7b1fa2"}


# -- data ------------------------------------------------------------------------------------------


def load_report(connect: Callable[[], Any]) -> dict:
    from dgb.integrity.report import integrity_report

    conn = connect()
    try:
        return integrity_report(conn, recent=25)
    finally:
        conn.close()


# -- SVG charts ------------------------------------------------------------------------------------


def rate_bars(
    chart_id: str, title: str, rows: list[dict], key: str, color: str, detail: Callable[[dict], str]
) -> str:
    """Horizontal bars, one per agency, for a 0..1 rate. Agencies without checks show "–"."""
    bar_h, gap, label_w, width = 22, 6, 190, 640
    plot_w = width - label_w - 70
    rows = rows or []
    height = max(1, len(rows)) * (bar_h + gap) + 34
    top = max([r.get(key) or 0 for r in rows] + [0.0001])
    scale_max = min(1.0, max(0.05, top * 1.15))
    parts = [svg_open(chart_id, title, width, height)]
    for tick in (0, 0.5, 1.0):
        x = label_w + plot_w * tick
        parts.append(
            f'<line x1="{x:.1f}" y1="4" x2="{x:.1f}" y2="{height - 26}" stroke="#ddd"/>'
            f'<text x="{x:.1f}" y="{height - 10}" font-size="11" text-anchor="middle" fill="#666">'
            f"{_e(_pct(scale_max * tick))}</text>"
        )
    if not rows:
        parts.append(f'<text x="{label_w}" y="20" font-size="13" fill="#666">no data yet</text>')
    for i, r in enumerate(rows):
        y = 4 + i * (bar_h + gap)
        value = r.get(key)
        w = 0 if value is None else plot_w * min(1.0, value / scale_max)
        agency = r.get("agency_key")
        parts.append(
            f'<g class="bar-row"><text x="{label_w - 8}" y="{y + bar_h * 0.7:.1f}"'
            ' font-size="12" text-anchor="end">'
            f"{_e(agency)}</text>"
            f'<rect class="bar" data-agency="{_e(agency)}"'
            f' data-value="{"" if value is None else f"{value:.4f}"}" '
            f'x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" rx="3" fill="{color}">'
            f"<title>{_e(agency)}: {_e(_pct(value))} ({_e(detail(r))})</title></rect>"
            f'<text x="{label_w + w + 6:.1f}" y="{y + bar_h * 0.7:.1f}" font-size="12" fill="#333">'
            f"{_e(_pct(value))}</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def tier_bars(chart_id: str, tiers: list[dict]) -> str:
    """One stacked horizontal bar per tier: check outcomes."""
    bar_h, gap, label_w, width = 26, 8, 150, 640
    plot_w = width - label_w - 80
    height = max(1, len(tiers)) * (bar_h + gap) + 40
    top = max([t["checks"] for t in tiers] + [1])
    parts = [svg_open(chart_id, "Check outcomes per tier", width, height)]
    for i, t in enumerate(tiers):
        y = 4 + i * (bar_h + gap)
        parts.append(
            f'<text x="{label_w - 8}" y="{y + bar_h * 0.65:.1f}" font-size="12" text-anchor="end">'
            f"{_e(t['tier'])} ({_e(t['label'])})</text>"
        )
        x = float(label_w)
        for outcome, color in OUTCOME_COLORS.items():
            n = t["outcomes"].get(outcome, 0)
            if not n:
                continue
            w = plot_w * n / top
            parts.append(
                f'<rect class="seg" data-tier="{_e(t["tier"])}" data-outcome="{outcome}" data-count="{n}" '
                f'x="{x:.1f}" y="{y}" width="{max(w, 1):.1f}" height="{bar_h}" fill="{color}">'
                f"<title>{_e(t['tier'])} {outcome}: {n}</title></rect>"
            )
            x += w
        parts.append(
            f'<text x="{x + 6:.1f}" y="{y + bar_h * 0.65:.1f}" font-size="12" fill="#333">'
            f"{t['checks']}</text>"
        )
    parts.append(legend(list(OUTCOME_COLORS.items()), height - 8))
    parts.append("</svg>")
    return "".join(parts)


def type_bars(chart_id: str, types: dict[str, int]) -> str:
    items = sorted(types.items(), key=lambda kv: -kv[1])
    width, bar_w, gap, height = 360, 56, 24, 190
    top = max([v for _, v in items] + [1])
    parts = [svg_open(chart_id, "Modification types", width, height)]
    if not items:
        parts.append('<text x="10" y="20" font-size="13" fill="#666">no modifications recorded</text>')
    for i, (name, n) in enumerate(items):
        h = 130 * n / top
        x = 20 + i * (bar_w + gap)
        parts.append(
            f'<rect class="type" data-field="{_e(name)}" data-count="{n}" x="{x}" y="{150 - h:.1f}" '
            f'width="{bar_w}" height="{h:.1f}" fill="{FIELD_COLORS.get(name, "#555")}">'
            f"<title>{_e(name)}: {n}</title></rect>"
            f'<text x="{x + bar_w / 2}" y="{145 - h:.1f}" font-size="12" text-anchor="middle">{n}</text>'
            f'<text x="{x + bar_w / 2}" y="168" font-size="12" text-anchor="middle">{_e(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


# -- page ------------------------------------------------------------------------------------------


def render_page(report: dict) -> str:
    t = report["totals"]
    agencies = report["agencies"]
    checked = [a for a in agencies if a.get("checked_articles")]
    cards = [
        ("articles", t["articles"]),
        ("checked", t["checked_articles"]),
        ("checks", t["checks"]),
        ("modification rate", _pct(t["modification_rate"])),
        ("broken-link rate", _pct(t["broken_link_rate"])),
        ("removed", t["removed_articles"]),
        ("suspect (not hidden)", t.get("suspect_articles", 0)),
        ("moved", t.get("moved_articles", 0)),
        ("broken images", t["image_broken_articles"]),
    ]
    paused = report.get("removals_paused") or []
    paused_html = "".join(
        f'<li data-breaker-scope="{_e(b["scope"])}" data-breaker-key="{_e(b["key"])}"><b>{_e(b["scope"])} '
        f"{_e(b['key'])}</b> since {_e(_short_time(b['tripped_at']))}: {_e(b['reason'])}</li>"
        for b in paused
    )
    breaker_panel = (
        (
            f'<div class="panel alert" id="removals-paused"><h2>Removals paused</h2>'
            f"<ul>{paused_html}</ul>"
            "<div class=muted>Gone answers there only mark articles suspect_removed (still searchable)"
            " until the agency/host answers normally again.</div></div>"
        )
        if paused
        else ""
    )
    card_html = "".join(
        f'<div class="card"><div class="v">{_e(v)}</div><div class="k">{_e(k)}</div></div>' for k, v in cards
    )
    mod_chart = rate_bars(
        "chart-modification-rate",
        "Modification rate per agency",
        checked,
        "modification_rate",
        "#1565c0",
        lambda r: f"{r['modified_articles']} of {r['checked_articles']} checked",
    )
    broken_chart = rate_bars(
        "chart-broken-rate",
        "Broken-link rate per agency",
        checked,
        "broken_link_rate",
        "#c62828",
        lambda r: f"{r['removed_articles']} removed, {r['image_broken_articles']} broken images",
    )
    tiers_chart = tier_bars("chart-tier-outcomes", report["tiers"])
    types_chart = type_bars("chart-modification-types", report["modification_types"])
    agency_rows = "".join(
        f"<tr><td>{_e(a['agency_key'])}</td><td class=num>{a['checked_articles']}</td>"
        f"<td class=num>{a['modified_articles']}</td><td class=num>{_e(_pct(a['modification_rate']))}</td>"
        f"<td class=num>{a['title_changes']}/{a['content_changes']}/{a['image_changes']}</td>"
        f"<td class=num>{_e(_hours(a['mean_hours_to_first_modification']))}</td>"
        f"<td class=num>{a['removed_articles']}</td><td class=num>{a.get('suspect_articles', 0)}</td>"
        f"<td class=num>{a.get('moved_articles', 0)}</td><td class=num>{a['image_broken_articles']}</td>"
        f"<td class=num>{_e(_pct(a['broken_link_rate']))}</td></tr>"
        for a in agencies
    )
    history_rows = (
        "".join(
            f"<tr><td class=muted>{_e(_short_time(h['detected_at']))}</td><td>{_e(h['agency_key'])}</td>"
            f"<td>{_e(h['title'])}</td><td>{_e(h['field_changed'])}</td><td>{_e(h['source'])}</td>"
            f"<td><span class=diff-old>{_e(h['old_value'])}</span><br>"
            f"<span class=diff-new>{_e(h['new_value'])}"
            f"</span></td></tr>"
            for h in report["recent_changes"]
        )
        or "<tr><td colspan=6 class=muted>no changes recorded yet</td></tr>"
    )
    sched = ", ".join(f"{s['tier']} every {s['every_minutes']:g} min" for s in report["schedule"]["tiers"])
    problems = ", ".join(f"{k}: {v}" for k, v in report["problems"].items()) or "none"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>DGB integrity</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style></head>
<body>
<nav class="pages"><b>Integrity</b> <a href="pipeline">Pipeline</a></nav>
<h1>News integrity</h1>
<div class="sub">Generated {_e(_short_time(report["generated_at"]))} UTC · \
schedule <b>{_e(report["schedule"]["mode"])}</b>
({_e(sched)}) · open problems: {_e(problems)} · <a href="api/report">JSON</a></div>
{breaker_panel}
<div class="cards">{card_html}</div>
<div class="grid">
<div class="panel"><h2>Modification rate per agency</h2>{mod_chart}</div>
<div class="panel"><h2>Broken-link rate per agency</h2>{broken_chart}</div>
<div class="panel"><h2>Check outcomes per tier</h2>{tiers_chart}</div>
<div class="panel"><h2>Modification types</h2>{types_chart}</div>
</div>
<div class="panel" style="margin-top:14px"><h2>Agencies</h2>
<table><thead><tr><th>agency</th><th>checked</th><th>modified</th><th>mod. rate</th>\
<th>title/content/image</th>
<th>mean time to 1st change</th><th>removed</th><th>suspect</th><th>moved</th><th>broken img</th>
<th>broken-link rate</th></tr></thead>
<tbody>{agency_rows}</tbody></table></div>
<div class="panel" style="margin-top:14px"><h2>Latest changes</h2>
<table><thead><tr><th>detected</th><th>agency</th><th>article</th><th>field</th><th>source</th>\
<th>old → new</th></tr></thead>
<tbody>{history_rows}</tbody></table></div>
</body></html>"""


def router(connect: Callable[[], Any]) -> APIRouter:
    """The integrity page's routes (``GET /``, ``GET /api/report``). ``connect`` returns a
    psycopg connection."""
    r = APIRouter()

    @r.get("/", response_class=HTMLResponse)
    def page() -> HTMLResponse:
        try:
            report = load_report(connect)
        except Exception as exc:
            log.exception("dgb integrity UI: report failed")
            return HTMLResponse(
                f"<!DOCTYPE html><html><body><h1>News integrity</h1><p>Report unavailable: "
                f"{_e(type(exc).__name__)}: {_e(exc)}</p></body></html>",
                status_code=503,
            )
        return HTMLResponse(render_page(report))

    @r.get("/api/report")
    def report_json() -> JSONResponse:
        try:
            return JSONResponse(load_report(connect))
        except Exception as exc:
            log.exception("dgb integrity UI: report failed")
            return JSONResponse({"error": f"{type(exc).__name__}: {exc}"}, status_code=503)

    return r
