"""Storing scraped articles: one transaction per batch, history and outbox included.

* a new (agency_key, url) is inserted, with a ``dgb.news.scraped`` event;
* a known (agency_key, url) whose title, subtitle, content or image changed is updated in
  place (its unique_id is kept, so a title edit never creates a duplicate): one
  ``news_update_history`` row per changed field, the version bumped, downstream stage state
  reset (theme, summary, embedding), and one new event;
* an identical re-scrape changes nothing and emits nothing.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dgb import events, outbox, topology
from dgb.db import transaction
from dgb.scrape_errors import HTML_CHANGED, STORE_ERROR, ScrapeError, as_scrape_error
from dgb.scraper.models import Article

# fields whose change makes an edit (history + reprocessing)
CHANGE_FIELDS = ("title", "subtitle", "content", "image_url")
# fields refreshed along with an edit (no history row of their own)
REFRESH_FIELDS = ("editorial_lead", "category", "tags", "video_url", "updated_datetime", "content_hash")


@dataclass
class SaveResult:
    new: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: int = 0
    history_rows: int = 0
    errors: list[ScrapeError] = field(default_factory=list)  # articles the database refused


_MD_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_CREDIT_LINE = re.compile(r"(?im)^\s*(fotos?|imagem|cr[eé]ditos?)\s*:.*$")


def comparable(field_name: str, value):
    """A field's value as compared for change detection: whitespace-normalised; in content,
    images and photo-credit lines are ignored (images are tracked by ``image_url``; their alt
    text repeats the title, and where the parser puts them must not look like an edit)."""
    if value is None or value == "" or value == []:
        return None
    if field_name == "content":
        return " ".join(_CREDIT_LINE.sub("", _MD_IMAGE.sub("", value)).split()) or None
    if isinstance(value, str):
        return " ".join(value.split())
    return value


def changed_fields(old: dict, new: dict, fields=CHANGE_FIELDS) -> list[str]:
    return [f for f in fields if comparable(f, old.get(f)) != comparable(f, new.get(f))]


def _values(article: Article) -> dict:
    return {
        "title": article.title,
        "subtitle": article.subtitle,
        "content": article.content,
        "image_url": article.image_url,
        "editorial_lead": article.editorial_lead,
        "category": article.category,
        "tags": list(article.tags or []),
        "video_url": article.video_url,
        "updated_datetime": article.updated_at,
        "content_hash": article.content_hash,
    }


def _as_text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return ", ".join(value)
    return str(value)


def save_articles(
    conn,
    agency_key: str,
    agency_name: str | None,
    articles: list[Article],
    *,
    allow_update: bool = True,
    source: str = "scrape",
) -> SaveResult:
    """Insert/update ``articles`` of one agency and enqueue their events, in one transaction.

    Each article is written under its own savepoint: one the database refuses is rolled back
    alone and reported in ``SaveResult.errors`` (kind ``store_error``), the others are stored.
    A broken connection still raises (the task is retried)."""
    result = SaveResult()
    if not articles:
        return result
    now = datetime.now(UTC)
    with transaction(conn) as cur:
        cur.execute("SELECT id FROM agencies WHERE key = %s", (agency_key,))
        row = cur.fetchone()
        agency_id = row[0] if row else None
        seen_urls: set[str] = set()
        for art in articles:
            if art.url in seen_urls:  # the same article twice in one batch (listing overlap)
                continue
            seen_urls.add(art.url)
            if art.published_at is None or art.unique_id is None:
                result.errors.append(
                    ScrapeError(HTML_CHANGED, f"article {art.url} has no publication date", kind=STORE_ERROR)
                )
                continue
            cur.execute("SAVEPOINT dgb_article")
            try:
                outcome, uid, history = _save_one(
                    cur, agency_key, agency_name, agency_id, art, now, allow_update, source
                )
            except Exception as exc:
                if getattr(conn, "broken", False) or getattr(conn, "closed", False):
                    raise
                cur.execute("ROLLBACK TO SAVEPOINT dgb_article")
                result.errors.append(as_scrape_error(exc, STORE_ERROR, f" storing {art.url[:300]}"))
                continue
            cur.execute("RELEASE SAVEPOINT dgb_article")
            result.history_rows += history
            if outcome == "new":
                result.new.append(uid)
            elif outcome == "updated":
                result.updated.append(uid)
            else:
                result.unchanged += 1
    return result


def _save_one(
    cur, agency_key, agency_name, agency_id, art: Article, now, allow_update: bool, source: str
) -> tuple[str, str | None, int]:
    """Write one article: ``("new"|"updated"|"unchanged", unique_id, history rows written)``."""
    cur.execute(
        "SELECT id, unique_id, title, subtitle, content, image_url FROM news"
        " WHERE agency_key = %s AND url = %s FOR UPDATE",
        (agency_key, art.url),
    )
    existing = cur.fetchone()
    if existing is None:
        uid = _free_unique_id(cur, art)
        trace_id = str(uuid.uuid4())
        vals = _values(art)
        cur.execute(
            "INSERT INTO news (unique_id, agency_id, agency_key, agency_name, title, subtitle,"
            " content, image_url, editorial_lead, category, tags, video_url, updated_datetime,"
            " content_hash,"
            " url, published_at, extracted_at, scraped_at, trace_id)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                uid,
                agency_id,
                agency_key,
                agency_name,
                vals["title"],
                vals["subtitle"],
                vals["content"],
                vals["image_url"],
                vals["editorial_lead"],
                vals["category"],
                vals["tags"],
                vals["video_url"],
                vals["updated_datetime"],
                vals["content_hash"],
                art.url,
                art.published_at,
                now,
                now,
                trace_id,
            ),
        )
        _enqueue_scraped(cur, uid, agency_key, art.published_at, now, trace_id)
        return "new", uid, 0
    news_id, uid, *old = existing
    old_vals = dict(zip(CHANGE_FIELDS, old))
    new_vals = _values(art)
    changed = changed_fields(old_vals, new_vals)
    if not changed or not allow_update:
        return "unchanged", uid, 0
    for f in changed:
        cur.execute(
            "INSERT INTO news_update_history (news_id, field_changed, old_value, new_value, source)"
            " VALUES (%s, %s, %s, %s, %s)",
            (news_id, f, _as_text(old_vals[f]), _as_text(new_vals[f]), source),
        )
    trace_id = str(uuid.uuid4())
    assignments = ", ".join(f"{f} = %s" for f in CHANGE_FIELDS + REFRESH_FIELDS)
    cur.execute(
        f"UPDATE news SET {assignments}, version = version + 1, trace_id = %s, scraped_at = %s,"
        " extracted_at = %s, updated_at = %s,"
        " theme_l1_id = NULL, theme_l2_id = NULL, theme_l3_id = NULL, most_specific_theme_id = NULL,"
        " summary = NULL, enriched_at = NULL, classifier = NULL, classifier_version = NULL,"
        " theme_confidence = NULL, content_embedding = NULL, embedding_model = NULL,"
        " embedding_dim = NULL, embedding_generated_at = NULL, embedded_at = NULL,"
        " last_error = NULL, last_error_stage = NULL, attempts = 0"
        " WHERE id = %s",
        [new_vals[f] for f in CHANGE_FIELDS + REFRESH_FIELDS] + [trace_id, now, now, now, news_id],
    )
    _enqueue_scraped(cur, uid, agency_key, art.published_at, now, trace_id)
    return "updated", uid, len(changed)


def relocate(cur, news_id: int, old_url: str, new_url: str, source: str, now: datetime) -> bool:
    """Point a stored article at the address it answers at now (a move), with one
    ``news_update_history`` row (``field_changed='url'``); the index re-syncs the document
    (``indexed_version`` cleared). False, and nothing changed, when the row no longer has
    ``old_url`` or another article of its agency already has ``new_url``."""
    cur.execute(
        "UPDATE news SET url = %s, updated_at = %s, indexed_version = NULL WHERE id = %s AND url = %s"
        " AND NOT EXISTS (SELECT 1 FROM news o WHERE o.agency_key = news.agency_key AND o.url = %s)",
        (new_url, now, news_id, old_url, new_url),
    )
    if cur.rowcount != 1:
        return False
    cur.execute(
        "INSERT INTO news_update_history (news_id, field_changed, old_value, new_value, source,"
        " detected_at) VALUES (%s, 'url', %s, %s, %s, %s)",
        (news_id, old_url, new_url, source, now),
    )
    return True


def _enqueue_scraped(cur, uid, agency_key, published_at, scraped_at, trace_id) -> None:
    event = events.make_event(
        topology.TOPIC_SCRAPED,
        {"unique_id": uid, "agency_key": agency_key, "published_at": published_at, "scraped_at": scraped_at},
        trace_id=trace_id,
    )
    outbox.enqueue(cur, event)


def _free_unique_id(cur, art: Article) -> str:
    """The article's unique_id, lengthened with a hash of its URL when another URL already
    holds it (the same title and date at one agency: rare, production saw 10 in 300k)."""
    uid = art.unique_id
    cur.execute("SELECT 1 FROM news WHERE unique_id = %s", (uid,))
    if cur.fetchone() is None:
        return uid
    return f"{uid}{hashlib.md5(art.url.encode()).hexdigest()[:6]}"


def had_articles(conn, agency_key: str, new_ids: list[str]) -> bool:
    """Whether the agency has stored articles other than ``new_ids`` (this run's own)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT EXISTS (SELECT 1 FROM news WHERE agency_key = %s AND NOT (unique_id = ANY(%s)))",
            (agency_key, list(new_ids)),
        )
        return bool(cur.fetchone()[0])


def known_urls(conn, agency_key: str, urls: list[str]) -> set[str]:
    if not urls:
        return set()
    with conn.cursor() as cur:
        cur.execute("SELECT url FROM news WHERE agency_key = %s AND url = ANY(%s)", (agency_key, list(urls)))
        return {r[0] for r in cur.fetchall()}


def reread_mark(conn, agency_key: str) -> datetime | None:
    """The listing date a regular run must read down to (an article skipped there), or None."""
    with conn.cursor() as cur:
        cur.execute("SELECT reread_from FROM scrape_reread WHERE agency_key = %s", (agency_key,))
        row = cur.fetchone()
    return row[0] if row else None


def set_reread_mark(conn, agency_key: str, reread_from: datetime | None) -> None:
    """Set (or, with None, clear) the agency's mark (migration 0021)."""
    with transaction(conn) as cur:
        if reread_from is None:
            cur.execute("DELETE FROM scrape_reread WHERE agency_key = %s", (agency_key,))
        else:
            cur.execute(
                "INSERT INTO scrape_reread (agency_key, reread_from) VALUES (%s, %s)"
                " ON CONFLICT (agency_key) DO UPDATE SET reread_from = EXCLUDED.reread_from,"
                " marked_at = now()",
                (agency_key, reread_from),
            )


def record_run(
    conn,
    agency_key: str,
    *,
    status: str,
    error_category: str | None,
    error_message: str | None,
    scraped: int,
    saved: int,
    updated: int,
    started_at: datetime,
    seconds: float,
    run_id: str | None = None,
) -> None:
    with transaction(conn) as cur:
        cur.execute(
            "INSERT INTO scrape_runs (agency_key, status, error_category, error_message, articles_scraped,"
            " articles_saved, articles_updated, execution_time_seconds, started_at, scraped_at, run_id)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, now(), %s)",
            (
                agency_key,
                status,
                error_category,
                (error_message or None) and error_message[:2000],
                scraped,
                saved,
                updated,
                seconds,
                started_at,
                run_id,
            ),
        )
