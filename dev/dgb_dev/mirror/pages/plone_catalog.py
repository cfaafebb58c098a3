"""The catalog side of the mirror's Plone 6 ``@search``: the sort order and the metadata columns
of a summary, as a Plone catalog answers them.

``sort_on=modified`` orders by modification date, ties by slug, newest first unless ``sort_order``
is ``ascending`` (the mirror's default order is newest first, which its clients rely on). Any other
``sort_on`` (``effective``, ``created``) or none keeps the site's own order, publication newest
first (the same as ``effective``), reversed by ``ascending``.

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

COLUMNS = ("modified", "effective", "created", "UID", "id", "head_title", "Subject")


def sort_items(items: list[Article], params: Mapping[str, str]) -> list[Article]:
    """``items`` (newest publication first) in the order the query asks."""
    ascending = params.get("sort_order", "").lower() in ("ascending", "asc")
    if params.get("sort_on") != "modified":  # effective, created or none: the site's own order
        return items[::-1] if ascending else items
    return sorted(items, key=lambda a: (a.modified_at, a.slug), reverse=not ascending)


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
