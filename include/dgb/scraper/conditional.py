"""Conditional listing polls (issue 27, "cheap polls"): If-None-Match / If-Modified-Since.

The dispatcher's poll of an agency's listing (:func:`dgb.scraper.dispatch.probe`) sends the
validators of that listing URL's last full answer, stored in ``listing_validators`` (migration
0017): its ``ETag`` as ``If-None-Match``, or, only when the server gave no ETag, its
``Last-Modified`` as ``If-Modified-Since``. A 304 means the listing is byte for byte (ETag) what it
was: no news, nothing parsed, a **hit**. A 200 is parsed as always (a **miss** when validators were
sent, a **full** poll when none were).

Correctness rules:

* Validators are stored only from a listing whose items were all known (up to the known-URL fence).
  A listing that showed news, failed or could not be parsed leaves none, so the next poll reads it
  whole: a 304 can only ever repeat "nothing new", never hide an item a scrape run failed to store.
* ETag first: a Plone collection's ``Last-Modified`` need not move when a new item matches it, so
  ``If-Modified-Since`` is sent only for a listing that came without an ETag.
* No validator lives for ever: after ``max_hits`` 304s in a row or ``max_age_s`` seconds since it
  was stored (``DGB_SCRAPE_VALIDATOR_MAX_HITS`` 20, ``DGB_SCRAPE_VALIDATOR_MAX_AGE`` 3600 s) the
  poll is unconditional, so a server whose validators fail to change hides news for that long at
  most.
* A site that ignores validators (no ETag / Last-Modified, or always 200) is polled as before.

A 304 still costs a request: it takes a token of the shared host budget like any request (it saves
the listing's bytes and its parse, not a request).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from dgb.config import scrape as config_scrape

HIT, MISS, FULL = "hit", "miss", "full"


@dataclass(frozen=True)
class ConditionalPolicy:
    enabled: bool = True
    max_age_s: float = 3600.0  # validators older than this are not sent: a whole listing at least this often
    max_hits: int = 20  # 304s in a row after which the next poll is unconditional

    @classmethod
    def from_env(cls) -> ConditionalPolicy:
        """The policy with the ``DGB_SCRAPE_CONDITIONAL`` / ``DGB_SCRAPE_VALIDATOR_*`` settings."""
        return cls(**config_scrape.conditional_policy())


@dataclass(frozen=True)
class Validators:
    etag: str | None
    last_modified: str | None
    stored_at: float | None  # epoch seconds
    streak: int = 0  # 304s in a row since stored


def load(conn, agency_key: str, url: str) -> Validators | None:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT etag, last_modified, stored_at, streak FROM listing_validators"
            " WHERE agency_key = %s AND url = %s",
            (agency_key, url),
        )
        row = cur.fetchone()
    if row is None:
        return None
    etag, modified, stored, streak = row
    return Validators(etag, modified, stored.timestamp() if stored else None, streak)


def request_headers(v: Validators | None, now: float, policy: ConditionalPolicy) -> dict[str, str]:
    """The conditional headers to send: none when disabled, without validators, or when they are
    too old or have earned ``max_hits`` 304s in a row; else If-None-Match, or If-Modified-Since for a
    listing that had only a Last-Modified."""
    if not policy.enabled or v is None or v.stored_at is None:
        return {}
    if now - v.stored_at >= policy.max_age_s or v.streak >= policy.max_hits:
        return {}
    if v.etag:
        return {"If-None-Match": v.etag}
    if v.last_modified:
        return {"If-Modified-Since": v.last_modified}
    return {}


@dataclass
class Fetched:
    url: str
    answer: str  # HIT (304), MISS (200 to a conditional request) or FULL (unconditional)
    response: object | None  # dgb.fetch.Response; None on a hit


def get(
    conn, fetcher, agency_key: str, url: str, now: float, policy: ConditionalPolicy, *, counted: bool = True
) -> Fetched:
    """One listing request, conditional when the stored validators allow it. A 304 is recorded
    here (streak, and hits when ``counted``: the dispatcher's polls are, a scrape run's first page
    is not); a 200 is recorded by the caller with :func:`record` once it knows whether every item
    was known. Leaves no transaction open."""
    headers = request_headers(load(conn, agency_key, url), now, policy) if policy.enabled else {}
    conn.rollback()
    resp = fetcher.get(url, headers=headers)
    if headers and resp.status == 304:
        _upsert(conn, agency_key, url, now, HIT if counted else "", None, keep=True)
        return Fetched(url, HIT, None)
    return Fetched(url, MISS if headers else FULL, resp)


def record(
    conn, agency_key: str, fetched: Fetched, now: float, all_known: bool, *, counted: bool = True
) -> None:
    """After a 200: keep its validators when every item was known, else drop them (the next poll
    reads the listing whole); counts the answer."""
    resp = fetched.response
    validators = None
    if all_known and resp is not None:
        etag = resp.headers.get("etag") or None
        modified = resp.headers.get("last-modified") or None
        validators = (etag, modified) if (etag or modified) else None
    _upsert(conn, agency_key, fetched.url, now, fetched.answer if counted else "", validators, keep=False)


def _upsert(conn, agency_key, url, now, answer, validators, *, keep: bool) -> None:
    at = datetime.fromtimestamp(now, UTC)
    counts = (int(answer == HIT), int(answer == MISS), int(answer == FULL))
    etag, modified = validators or (None, None)
    stored = at if validators else None
    with conn.cursor() as cur:
        if keep:  # a 304: the same validators, one more hit in a row
            cur.execute(
                "UPDATE listing_validators SET streak = streak + 1, hits = hits + %s, updated_at = %s"
                " WHERE agency_key = %s AND url = %s",
                (counts[0], at, agency_key, url),
            )
        else:
            cur.execute(
                """
                INSERT INTO listing_validators AS v (agency_key, url, etag, last_modified, stored_at,
                                                     streak, hits, misses, full_polls, updated_at)
                VALUES (%s, %s, %s, %s, %s, 0, %s, %s, %s, %s)
                ON CONFLICT (agency_key, url) DO UPDATE SET
                    etag = EXCLUDED.etag, last_modified = EXCLUDED.last_modified,
                    stored_at = EXCLUDED.stored_at, streak = 0, hits = v.hits + EXCLUDED.hits,
                    misses = v.misses + EXCLUDED.misses, full_polls = v.full_polls + EXCLUDED.full_polls,
                    updated_at = EXCLUDED.updated_at
                """,
                (agency_key, url, etag, modified, stored, *counts, at),
            )
    conn.commit()


def totals(conn) -> dict:
    """Conditional polls so far, every listing together: ``hits`` (304), ``misses`` (200 to a
    conditional request), ``full`` (unconditional), ``hit_rate`` (hits / all polls; None before
    any), ``listings_with_validators``."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT coalesce(sum(hits), 0), coalesce(sum(misses), 0), coalesce(sum(full_polls), 0),"
            " count(*) FILTER (WHERE stored_at IS NOT NULL) FROM listing_validators"
        )
        hits, misses, full, held = (int(x) for x in cur.fetchone())
    conn.commit()
    polls = hits + misses + full
    return {
        "hits": hits,
        "misses": misses,
        "full": full,
        "hit_rate": round(hits / polls, 3) if polls else None,
        "listings_with_validators": held,
    }
