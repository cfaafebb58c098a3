"""When the model service was working and when it waited, read from its request log.

Each answered ``POST /embed`` is logged when it ends with its duration from arrival
(``... INFO dgb.embed.service: POST /embed 200 count=N ms=M client=...``, see
:mod:`dgb.embed.service`), so its arrival is the end less the duration. The service encodes one
request at a time: between the first arrival and the last end of a window, a moment with no
request in the service is a moment its model had nothing to do. ``scripts/bench_backlog.py``
prints this for the pipeline's part of a backlog (how well the stages keep the model fed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) INFO dgb\.embed\.service:"
    r" POST /embed 200 count=(\d+) ms=([\d.]+)"
)


@dataclass
class Requests:
    """The answered requests of a window and the service's idle time between them."""

    count: int = 0
    texts: int = 0
    span_s: float = 0.0  # first arrival -> last end
    idle_s: float = 0.0  # no request in the service
    gaps: list[tuple[datetime, float]] = field(default_factory=list)  # (arrival after the gap, seconds)

    def line(self) -> str:
        busy = self.span_s - self.idle_s
        return (
            f"model_service requests={self.count} texts={self.texts} span_s={self.span_s:.1f}"
            f" busy_s={busy:.1f} idle_s={self.idle_s:.1f}"
        )


def requests(lines: Iterable[str], since: datetime, until: datetime | None = None) -> Requests:
    """The answered embed requests that arrived at ``since`` or later (and ended by ``until``),
    log times read as naive local times, like ``since`` and ``until``."""
    spans: list[tuple[datetime, datetime, int]] = []
    for line in lines:
        m = _LINE.match(line)
        if not m:
            continue
        end = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S") + timedelta(milliseconds=int(m[2]))
        arrival = end - timedelta(milliseconds=float(m[4]))
        if arrival >= since and (until is None or end <= until):
            spans.append((arrival, end, int(m[3])))
    out = Requests()
    if not spans:
        return out
    spans.sort()
    busy_until = spans[0][0]
    for arrival, end, texts in spans:
        gap = (arrival - busy_until).total_seconds()
        if gap > 0:
            out.idle_s += gap
            out.gaps.append((arrival, gap))
        busy_until = max(busy_until, end)
        out.count += 1
        out.texts += texts
    out.span_s = (busy_until - spans[0][0]).total_seconds()
    return out
