"""URL moves (issue 16): an article that answers at another URL now (a redirect, or the agency's
Plone 6 search found it) gets ``news.url`` updated and one ``news_update_history`` row
(``field_changed='url'``); the index re-syncs it (``indexed_version = NULL``)."""

from __future__ import annotations

import logging
from datetime import datetime

from dgb.db import transaction
from dgb.integrity.checks import ContentResult
from dgb.scraper import store

log = logging.getLogger("dgb.integrity")


def move_url(conn, row: dict, content: ContentResult, now: datetime) -> str | None:
    """Point the article at the URL it answers at now, with one history row; returns the old URL
    (None when another article of the agency already has the new URL: nothing is changed)."""
    new_url, old_url = content.moved_to, row["url"]
    with transaction(conn) as cur:
        moved = store.relocate(cur, row["id"], old_url, new_url, "integrity", now)
        if not moved:  # only to name it in the warning
            cur.execute(
                "SELECT unique_id FROM news WHERE agency_key = %s AND url = %s AND id <> %s",
                (row["agency_key"], new_url, row["id"]),
            )
            taken = cur.fetchone()
    if not moved:
        log.warning(
            "integrity unique_id=%s moved to %s, but article %s already has that URL; URL kept",
            row["unique_id"],
            new_url,
            taken[0] if taken else "?",
        )
        content.moved_to = None
        return None
    log.info(
        "integrity unique_id=%s outcome=moved from=%s to=%s via=%s",
        row["unique_id"],
        old_url,
        new_url,
        content.found_via,
    )
    row["url"] = new_url
    return old_url
