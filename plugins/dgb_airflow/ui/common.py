"""HTML/SVG helpers shared by the UI pages (``integrity`` and ``pipeline``): escaping, number and
time formatting, the page style and the opening of an inline SVG chart. Server-side only: the
pages carry no scripts and load nothing from elsewhere."""

from __future__ import annotations

import html
from datetime import datetime
from typing import Any

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;\
margin:0;padding:18px 22px;color:#222;background:#fafafa}
h1{font-size:20px;margin:0 0 4px} h2{font-size:15px;margin:0 0 8px}
.sub{color:#666;font-size:12px;margin-bottom:14px}
.alert{border-color:#c62828 !important;background:#fff5f5 !important;margin-bottom:14px}
.cards{display:flex;gap:10px;flex-wrap:wrap;margin-bottom:14px}
.card{background:#fff;border:1px solid #e3e3e3;border-radius:8px;padding:10px 14px;min-width:120px}
.card .v{font-size:22px;font-weight:600} .card .k{font-size:12px;color:#666}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:14px}
.panel{background:#fff;border:1px solid #e3e3e3;border-radius:8px;padding:12px 14px}
table{border-collapse:collapse;width:100%;font-size:12px} \
th,td{text-align:left;padding:4px 6px;border-bottom:1px solid #eee;vertical-align:top}
th{color:#555;font-weight:600} td.num{text-align:right} .muted{color:#888}
.diff-old{color:#9b1c1c} .diff-new{color:#1b5e20}
nav.pages{font-size:13px;margin-bottom:10px} nav.pages a{margin-right:12px}
"""


def esc(value: Any) -> str:
    """HTML-escaped text (attribute-safe); None is empty."""
    return html.escape("" if value is None else str(value), quote=True)


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def hours_text(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f} h"


def duration_text(seconds: float | None) -> str:
    """A duration for people: seconds, minutes or hours, "–" when unknown."""
    if seconds is None:
        return "–"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def short_time(value: Any) -> str:
    """``YYYY-MM-DD HH:MM`` of a datetime or an ISO string (other values as text)."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    return "" if value is None else str(value)


def svg_open(chart_id: str, title: str, width: int, height: int) -> str:
    """The opening of one chart: an accessible, scalable inline SVG with its title."""
    return (
        f'<svg id="{esc(chart_id)}" class="chart" role="img" aria-label="{esc(title)}" '
        f'viewBox="0 0 {width} {height}" width="100%" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{esc(title)}</title>"
    )


def legend(items: list[tuple[str, str]], y: float, x: float = 10.0) -> str:
    """A one-line legend of (label, colour) swatches at ``y``."""
    parts = []
    for label, color in items:
        parts.append(
            f'<rect x="{x:.1f}" y="{y - 10:.1f}" width="12" height="12" fill="{color}"/>'
            f'<text x="{x + 16:.1f}" y="{y:.1f}" font-size="11">{esc(label)}</text>'
        )
        x += 16 + 6.5 * len(label) + 14
    return "".join(parts)
