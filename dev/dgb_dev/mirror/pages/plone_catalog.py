"""The catalog side of the mirror's Plone 6 ``@search``: the sort order and the metadata columns
of a summary, as a Plone catalog answers them.

``sort_on=modified`` (or ``effective`` / ``created``) orders by that date, ties by slug;
``sort_order`` ``descending`` or ``reverse`` is newest first, ``ascending`` oldest first (without a
``sort_order`` the site keeps its own newest-first order, which clients of this mirror rely on).
Without ``sort_on`` the order is the site's (publication, newest first).

``metadata_fields`` adds catalog columns to each summary (``modified``, ``effective``, ``created``,
``UID``, ``id``, ``head_title``, ``Subject``; ``_all`` for every one), dates in ISO 8601 UTC with an
offset, the same value the item's own JSON and its page's ``Last-Modified`` give: an edit moves all
three. Only the last ``metadata_fields`` of the query is read (the mirror's query parsing keeps one
value per key); a client wanting dates asks ``modified`` alone or ``_all``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dgb_dev.mirror.content import Article, iso_utc

DATE_INDEXES = {
    "modified": lambda a: a.modified_at,
    "effective": lambda a: a.published_at,
    "created": lambda a: a.published_at,
}
COLUMNS = ("modified", "effective", "created", "UID", "id", "head_title", "Subject")


def sort_items(items: list[Article], params: Mapping[str, str]) -> list[Article]:
    """``items`` (newest publication first) in the order the query asks."""
    order = params.get("sort_order", "").lower()
    key = DATE_INDEXES.get(params.get("sort_on", ""))
    if key is None:
        return items[::-1] if order in ("ascending", "asc") else items
    return sorted(items, key=lambda a: (key(a), a.slug), reverse=order not in ("ascending", "asc"))


def columns(a: Article, params: Mapping[str, str]) -> dict[str, Any]:
    """The catalog columns ``metadata_fields`` asks for, for one article's summary."""
    wanted = params.get("metadata_fields", "")
    names = COLUMNS if wanted == "_all" else tuple(n for n in COLUMNS if n == wanted)
    values = {
        "modified": lambda: iso_utc(a.modified_at),
        "effective": lambda: iso_utc(a.published_at),
        "created": lambda: iso_utc(a.published_at),
        "UID": lambda: a.uid,
        "id": lambda: a.slug,
        "head_title": lambda: a.category,
        "Subject": lambda: list(a.tags),
    }
    return {n: values[n]() for n in names}
