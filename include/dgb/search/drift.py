"""Typesense drift: documents missing, extra or older than PostgreSQL says they should be.

* **missing**: an article that should be searchable (enriched, not removed) has no document;
* **extra**: a document whose article is not in PostgreSQL or was removed;
* **older**: the document's ``version`` is below the article's (``newer``: above; should not
  happen).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta


@dataclass
class Drift:
    missing: list[str] = field(default_factory=list)  # should be searchable, no document
    extra: list[str] = field(default_factory=list)  # document without a live article
    older: list[str] = field(default_factory=list)  # document.version < news.version
    newer: list[str] = field(default_factory=list)  # document.version > news.version (should not happen)
    checked_articles: int = 0
    checked_documents: int = 0
    error: str | None = None

    def counts(self) -> dict[str, int]:
        return {
            "ts_missing": len(self.missing),
            "ts_extra": len(self.extra),
            "ts_older": len(self.older),
            "ts_newer": len(self.newer),
        }


def _ts_export(ts, alias: str, filter_by: str | None = None) -> dict[str, int | None]:
    params = {"include_fields": "id,version"}
    if filter_by:
        params["filter_by"] = filter_by
    raw = ts.collections[alias].documents.export(params)
    if isinstance(raw, bytes):
        raw = raw.decode()
    out: dict[str, int | None] = {}
    for line in raw.splitlines():
        if line.strip():
            doc = json.loads(line)
            out[doc["id"]] = doc.get("version")
    return out


def _ts_versions(ts, alias: str, ids: list[str] | None, chunk: int = 100) -> dict[str, int | None]:
    """id -> version of the documents (all of them, or of ``ids`` only: filtered exports)."""
    if ids is None:
        return _ts_export(ts, alias)
    out: dict[str, int | None] = {}
    for i in range(0, len(ids), chunk):
        part = [u for u in ids[i : i + chunk] if "`" not in u]
        if part:
            out.update(_ts_export(ts, alias, "unique_id:=[" + ",".join(f"`{u}`" for u in part) + "]"))
    return out


def typesense_drift(
    conn,
    ts,
    alias: str,
    *,
    now: datetime | None = None,
    min_age_s: float = 0.0,
    window_s: float | None = None,
    batch: int = 5000,
) -> Drift:
    """Compare PostgreSQL with the Typesense collection behind ``alias``.

    Full (``window_s`` None): every article against every document (one export of ids and
    versions). Windowed: only articles changed within ``window_s``, their documents fetched
    by filtered export (documents of articles not in PostgreSQL are only found by a full
    check). Articles changed less than ``min_age_s`` ago are in flight and not judged."""
    now = now or datetime.now(UTC)
    cut = now - timedelta(seconds=min_age_s)
    drift = Drift()
    rows: dict[str, tuple] = {}
    last = 0
    while True:
        with conn.cursor() as cur:
            if window_s:
                cur.execute(
                    "SELECT id, unique_id, version, enriched_at IS NOT NULL, removed_at IS NOT NULL,"
                    " updated_at FROM news WHERE id > %s AND updated_at >= %s ORDER BY id LIMIT %s",
                    (last, now - timedelta(seconds=window_s), batch),
                )
            else:
                cur.execute(
                    "SELECT id, unique_id, version, enriched_at IS NOT NULL, removed_at IS NOT NULL,"
                    " updated_at FROM news WHERE id > %s ORDER BY id LIMIT %s",
                    (last, batch),
                )
            page = cur.fetchall()
        conn.commit()
        if not page:
            break
        last = page[-1][0]
        for _id, uid, version, enriched, removed, updated in page:
            rows[uid] = (version, enriched, removed, updated)
    drift.checked_articles = len(rows)
    docs = _ts_versions(ts, alias, None if not window_s else list(rows))
    drift.checked_documents = len(docs)
    for uid, (version, enriched, removed, updated) in rows.items():
        settled = updated is None or updated < cut
        if uid in docs:
            if removed:
                if settled:
                    drift.extra.append(uid)
                continue
            doc_version = docs[uid] if docs[uid] is not None else 0
            if doc_version < version and settled:
                drift.older.append(uid)
            elif doc_version > version:
                drift.newer.append(uid)
        elif enriched and not removed and settled:
            drift.missing.append(uid)
    if not window_s:
        drift.extra.extend(sorted(uid for uid in docs if uid not in rows))
    return drift


def restore_lost_documents(conn, ts, alias: str, *, min_age_s: float = 60.0) -> int:
    """When Typesense holds fewer documents than PostgreSQL has marked indexed (a Typesense
    that came back from a restart or a crash without some of its data, a collection dropped by
    hand), mark the articles whose document is missing pending for the index stage again
    (``indexed_version = NULL``); how many. Cheap when nothing is lost: the collection's
    document count against one count in PostgreSQL; only a shortfall runs the full
    :func:`typesense_drift` (articles changed less than ``min_age_s`` ago are in flight and
    left alone). A Typesense that lost data is otherwise repaired only by reconciliation."""
    documents = int(ts.collections[alias].retrieve().get("num_documents") or 0)
    with conn.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM news WHERE indexed_version IS NOT NULL AND removed_at IS NULL"
            " AND enriched_at IS NOT NULL"
        )
        indexed = cur.fetchone()[0]
    conn.commit()
    if documents >= indexed:
        return 0
    drift = typesense_drift(conn, ts, alias, min_age_s=min_age_s)
    if not drift.missing:
        return 0
    with conn.cursor() as cur:
        cur.execute(
            "UPDATE news SET indexed_version = NULL WHERE unique_id = ANY(%s)"
            " AND indexed_version IS NOT NULL",
            (drift.missing,),
        )
        marked = cur.rowcount
    conn.commit()
    return marked
