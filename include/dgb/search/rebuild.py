"""Index rebuild: the collection of the current schema, built from PostgreSQL, behind the alias.

:func:`rebuild` builds the collection of the current schema (``schema.collection_schema``) from
PostgreSQL and swaps the alias atomically: how a schema or model-dimension change rolls out. Each
batch goes through :func:`dgb.search.sync.sync` (checked imports, marks in PostgreSQL).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from dgb.search import schema
from dgb.search.sync import delete_document, sync


def _alias_target(ts, alias: str) -> str | None:
    import typesense.exceptions as tse

    try:
        return ts.aliases[alias].retrieve()["collection_name"]
    except tse.ObjectNotFound:
        return None


def _collection_exists(ts, name: str) -> bool:
    import typesense.exceptions as tse

    try:
        ts.collections[name].retrieve()
        return True
    except tse.ObjectNotFound:
        return False


def _index_ids(ts, collection: str) -> set[str]:
    raw = ts.collections[collection].documents.export({"include_fields": "id"})
    return {json.loads(line)["id"] for line in raw.splitlines() if line.strip()}


def _live_ids(conn, batch: int) -> Iterator[list[str]]:
    """Non-removed article ids in keyset-paginated batches."""
    last = 0
    while True:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(
                "SELECT id, unique_id FROM news WHERE removed_at IS NULL AND id > %s ORDER BY id LIMIT %s",
                (last, batch),
            )
            rows = cur.fetchall()
        if not rows:
            return
        last = rows[-1][0]
        yield [r[1] for r in rows]


def rebuild(
    ts,
    settings,
    conn,
    *,
    batch_size: int = 500,
    max_retries: int = 5,
    max_failed_ratio: float = 0.01,
    sleep: Callable[[float], None] = time.sleep,
) -> dict:
    """Build the collection of the current schema from PostgreSQL and point the alias at it.

    * alias on an older schema (or missing): the new versioned collection is (re)created empty
      (a half-built leftover is dropped: it is not live), every non-removed article is imported,
      the alias is swapped atomically (``aliases.upsert``), the old collection dropped, then the
      articles whose version changed (or that were added/removed) while building are synced
      again through the alias (catch-up: the live index stage kept writing to the old one);
    * alias already on the current schema: refreshed in place (every article upserted,
      documents of removed or vanished articles deleted).

    When more than ``max_failed_ratio`` of the documents fail, the alias is NOT swapped and
    RuntimeError is raised (the old index stays live). Idempotent; returns counts.
    """
    alias = settings.typesense_collection
    dim = settings.embedding_dim
    spec = schema.collection_schema(dim, alias)
    new = spec["name"]
    old = _alias_target(ts, alias)
    mode = "refresh" if old == new else "swap"
    if mode == "swap":
        if _collection_exists(ts, new):
            ts.collections[new].delete()
        ts.collections.create(spec)
    counts: dict[str, Any] = {
        "mode": mode,
        "collection": new,
        "previous": old,
        "indexed": 0,
        "failed": 0,
        "deleted": 0,
        "stale": 0,
        "caught_up": 0,
        "dropped": None,
    }
    failed: dict[str, str] = {}
    written: dict[str, int] = {}
    for ids in _live_ids(conn, batch_size):
        res = sync(ts, new, conn, ids, dim, batch_size=batch_size, max_retries=max_retries, sleep=sleep)
        counts["indexed"] += len(res.indexed)
        counts["stale"] += len(res.stale)
        failed.update(res.failed)
        written.update(res.versions)
    total = counts["indexed"] + len(failed)
    if mode == "swap" and total and len(failed) / total > max_failed_ratio:
        raise RuntimeError(
            f"rebuild of {new}: {len(failed)} of {total} documents failed (e.g. "
            f"{next(iter(failed.items()))}); alias {alias} left on {old}"
        )
    if mode == "refresh":
        extra = sorted(_index_ids(ts, new) - set(written))
        res = sync(ts, new, conn, extra, dim, batch_size=batch_size, max_retries=max_retries, sleep=sleep)
        documents = ts.collections[new].documents
        for uid in res.missing:  # no longer in PostgreSQL at all
            delete_document(documents, uid, max_retries, sleep)
        counts["deleted"] = len(res.deleted) + len(res.missing)
        failed.update(res.failed)
    else:
        ts.aliases.upsert(alias, {"collection_name": new})
        if old and _collection_exists(ts, old):
            ts.collections[old].delete()
            counts["dropped"] = old
        # catch up with what changed while we were building
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SELECT unique_id, version, removed_at IS NOT NULL FROM news")
            rows = cur.fetchall()
        touched = [
            uid
            for uid, version, removed in rows
            if (uid in written and (written[uid] != version or removed))
            or (uid not in written and not removed and uid not in failed)
        ]
        if touched:
            res = sync(
                ts, alias, conn, touched, dim, batch_size=batch_size, max_retries=max_retries, sleep=sleep
            )
            counts["caught_up"] = len(res.indexed) + len(res.deleted)
            failed.update(res.failed)
    counts["failed"] = len(failed)
    counts["failures"] = dict(list(failed.items())[:20])
    return counts
