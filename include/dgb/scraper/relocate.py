"""A listed article that is a stored one at a new address (a move seen by the scraper first).

A Plone rename (a URL migration, a slug corrected by the newsroom) keeps an article's agency,
publication time and title, so its ``unique_id``, and changes its address; the old address then
redirects to the new one or answers 404/410. If the listing shows the new address before integrity
re-checks the old one, storing it as new would put the same article in the index twice, and the
old row would wait for removal evidence (six hours for a 404) and then be removed, taking its
history and reading figures with it.

Before a batch is saved, :func:`settle` asks each such old address once (one request of the host
budget; it is rare):

* **moved**: it redirects to the new address, or answers 404/410. The stored row takes the new URL
  (:func:`dgb.scraper.store.relocate`: one ``news_update_history`` row, ``field_changed='url'``,
  source ``scrape``; the index re-syncs the document). The save that follows compares the page
  as for any known URL, so an edit made together with the move is stored as an edit.
* **twin**: it answers 200 at itself. Two live articles share agency, title and date (production
  has a handful in 300k); the new one is saved under a lengthened id, as before.
* **undecided**: anything else (a timeout, an error answer, a redirect to a third address). The
  article is left out of this run, so nothing is stored twice. Nothing is lost either: it is still
  stored at its old address, the next poll asks again while the listing shows it, and integrity's
  check of the old address follows a redirect or the agency's search to the new one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dgb.db import transaction
from dgb.fetch import Fetcher
from dgb.scrape_errors import ScrapeError
from dgb.scraper import store
from dgb.scraper.models import Article

log = logging.getLogger("dgb.scraper")

GONE = (404, 410)


@dataclass
class Settled:
    """What :func:`settle` decided: the batch to save and the moves it made."""

    batch: list[Article]
    moved: list[tuple[str, str, str]] = field(default_factory=list)  # (unique_id, old URL, new URL)
    twins: int = 0
    undecided: list[str] = field(default_factory=list)  # new URLs left for a later run


def _same(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def verdict(old_url: str, new_url: str, status: int | None, final_url: str | None) -> str:
    """``moved``, ``twin`` or ``undecided`` from the old address's answer (``status`` None: no
    answer). Pure: the decision is tested without a server."""
    if status in GONE:
        return "moved"
    if status is not None and 200 <= status < 300 and final_url is not None:
        if _same(final_url, new_url):
            return "moved"
        if _same(final_url, old_url):
            return "twin"
    return "undecided"


def _holders(conn, agency_key: str, batch: list[Article]) -> dict[str, tuple[int, str]]:
    """Stored live articles of the agency with a batch article's ``unique_id`` at another URL:
    unique_id -> (news id, stored URL)."""
    want = {a.unique_id: a.url for a in batch if a.unique_id}
    if not want:
        return {}
    with conn.cursor() as cur:
        cur.execute(
            "SELECT unique_id, id, url FROM news"
            " WHERE agency_key = %s AND unique_id = ANY(%s) AND removed_at IS NULL",
            (agency_key, list(want)),
        )
        rows = cur.fetchall()
    conn.commit()  # nothing held open while the old addresses are asked
    return {uid: (news_id, url) for uid, news_id, url in rows if url != want[uid]}


def settle(
    conn, agency_key: str, batch: list[Article], fetcher: Fetcher, now: datetime | None = None
) -> Settled:
    """Decide, for each article of ``batch`` whose ``unique_id`` a live stored article holds at
    another URL, whether it moved (see the module doc); returns the batch to save."""
    holders = _holders(conn, agency_key, batch)
    out = Settled(batch=[])
    for art in batch:
        held = holders.get(art.unique_id)
        if held is None:
            out.batch.append(art)
            continue
        news_id, old_url = held
        try:
            resp = fetcher.get(old_url, raise_for_status=False)
            status, final = resp.status, resp.url
        except ScrapeError as exc:
            log.info("agency %s: asking %s about its move failed: %s", agency_key, old_url, exc)
            status, final = None, None
        decided = verdict(old_url, art.url, status, final)
        if decided == "twin":
            out.twins += 1
            out.batch.append(art)
        elif decided == "undecided":
            out.undecided.append(art.url)
            log.warning(
                "agency %s: %s has the identity of %s, which answered %s; left for a later run",
                agency_key,
                art.url,
                old_url,
                status,
            )
        else:
            with transaction(conn) as cur:
                done = store.relocate(cur, news_id, old_url, art.url, "scrape", now or datetime.now(UTC))
            if done:
                out.moved.append((art.unique_id, old_url, art.url))
                log.info(
                    "scraper unique_id=%s outcome=moved from=%s to=%s old_answer=%s",
                    art.unique_id,
                    old_url,
                    art.url,
                    status,
                )
            out.batch.append(art)  # saved at its (now known) URL: an edit with the move is stored
    return out
