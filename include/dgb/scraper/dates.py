"""Date parsing for Brazilian news pages. Every result is tz-aware in America/Sao_Paulo.

Text dates ("10/02/2026 17h05", "27/11/2026 - 14:30", "10/02/2026") are Brasília wall-clock
time; a date without a time is 00:00 Brasília. ISO strings keep their instant and are converted
to Brasília (a naive ISO string is taken as Brasília time).
"""

from __future__ import annotations

import re
from datetime import datetime

from dateutil import parser as dateutil_parser

from dgb.scraper.identity import BRASILIA, BRASILIA_FIXED

# DD/MM/YYYY, then optionally (within a few non-digit characters such as " ", " - ", " às ")
# a time written 17h05, 17h, 17:05 or 17H05.
_BR_DATE = re.compile(
    r"(?<!\d)(\d{1,2})/(\d{1,2})/(\d{4})(?:[^\d/]{0,8}?(?<!\d)(\d{1,2})\s*[hH:]\s*(\d{2})?(?!\d))?"
)


def parse_br_datetime(text: str | None) -> datetime | None:
    """First ``DD/MM/YYYY [HHhMM|HH:MM]`` in ``text`` as a Brasília datetime, or None."""
    for match in _BR_DATE.finditer(text or ""):
        day, month, year, hour, minute = match.groups()
        h, m = (int(hour), int(minute or 0)) if hour is not None else (0, 0)
        if h > 23 or m > 59:
            h, m = 0, 0
        try:
            return datetime(int(year), int(month), int(day), h, m, tzinfo=BRASILIA)
        except ValueError:
            continue
    return None


def parse_iso_datetime(value: str | None) -> datetime | None:
    """An ISO 8601 timestamp (e.g. JSON-LD ``datePublished``, Plone ``effective``) in Brasília."""
    if not value or not isinstance(value, str) or value.strip().lower() in ("none", "null"):
        return None
    value = value.strip()
    if len(value) > 64:  # no timestamp is this long; dateutil's fuzzy parse is slow on long text
        return None
    try:
        dt = dateutil_parser.isoparse(value)
    except (ValueError, OverflowError):
        try:
            dt = dateutil_parser.parse(value, dayfirst=True)
        except (ValueError, OverflowError):
            return None
    if dt.tzinfo is None:
        return dt.replace(tzinfo=BRASILIA)
    return dt.astimezone(BRASILIA)


def labelled_datetime(text: str, label: str) -> datetime | None:
    """The date following ``label`` (e.g. "Publicado em", "Atualizado em") in free text."""
    match = re.search(re.escape(label) + r"\s*:?\s*(.{0,40})", text or "", re.IGNORECASE)
    return parse_br_datetime(match.group(1)) if match else None


def iso(dt: datetime | None) -> str | None:
    """ISO 8601 with offset (``2026-02-10T17:05:00-03:00``), or None."""
    return dt.isoformat() if dt else None


# The two text patterns production's scrapers knew ("10/02/2026 17h05", "17/11/2025 - 18:58"); a
# date they did not match sent production to its next date source, so identity needs them exactly.
_PRODUCTION_TEXT_DATES = (
    re.compile(r"(\d{2})/(\d{2})/(\d{4})\s+(\d{1,2})h(\d{2})"),
    re.compile(r"(\d{2})/(\d{2})/(\d{4})\s*-\s*(\d{1,2}):(\d{2})"),
)


def production_text_date(text: str | None) -> str | None:
    """The unique-id date text production derived from a page-text date, or None if it found none.

    Brasília wall clock, fixed ``-03:00`` offset, seconds ``00`` (``2026-02-10T17:05:00-03:00``).
    """
    for pattern in _PRODUCTION_TEXT_DATES:
        match = pattern.search(text or "")
        if match:
            day, month, year, hour, minute = (int(g) for g in match.groups())
            try:
                return datetime(year, month, day, hour, minute, tzinfo=BRASILIA_FIXED).isoformat()
            except ValueError:
                return None
    return None
