"""``news_features`` reads and writes (migration 0014; production's table).

Every write MERGES keys into the stored object (``features || new``): a job writes only the keys
it owns (word_count, sentiment, entities, trending_score, view_count ...) and never erases another
job's. A key whose new value is JSON ``null`` is stored as null (not removed): callers that mean
"absent" leave the key out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from psycopg.types.json import Jsonb

_MERGE = (
    "INSERT INTO news_features (unique_id, features) VALUES (%s, %s)"
    " ON CONFLICT (unique_id) DO UPDATE SET features = news_features.features || EXCLUDED.features"
)
_MERGE_DROP = (
    "INSERT INTO news_features (unique_id, features) VALUES (%s, %s)"
    " ON CONFLICT (unique_id) DO UPDATE"
    " SET features = (news_features.features || EXCLUDED.features) - %s::text[]"
)


def merge_features(
    cur,
    rows: Mapping[str, Mapping[str, Any]] | Iterable[tuple[str, Mapping]],
    *,
    drop: Iterable[str] = (),
) -> int:
    """Merge ``{unique_id: {key: value}}`` into ``news_features`` with the caller's cursor (its
    transaction); ``drop``: keys removed from the stored objects in the same statement (keys that
    no longer apply). Empty objects are skipped. Returns the number of articles written.

    Rows are written in ``unique_id`` order, so two writers merging overlapping sets lock the
    rows in the same order (no deadlock)."""
    items = rows.items() if isinstance(rows, Mapping) else rows
    params = sorted(((uid, Jsonb(dict(f))) for uid, f in items if f), key=lambda p: p[0])
    gone = list(dict.fromkeys(drop))
    if params and gone:
        cur.executemany(_MERGE_DROP, [(uid, f, gone) for uid, f in params])
    elif params:
        cur.executemany(_MERGE, params)
    return len(params)


def remove_keys(cur, unique_ids: Iterable[str], keys: Iterable[str]) -> None:
    """Drop ``keys`` from the stored objects of ``unique_ids`` (e.g. a feature that no longer
    applies after an edit); other keys stay."""
    ids, ks = sorted(set(unique_ids)), list(keys)
    if ids and ks:
        cur.execute(
            "UPDATE news_features SET features = features - %s::text[] WHERE unique_id = ANY(%s::text[])",
            (ks, ids),
        )


def read_features(cur, unique_ids: Iterable[str]) -> dict[str, dict]:
    """The stored objects of ``unique_ids`` (articles without a row are left out)."""
    ids = sorted(set(unique_ids))
    if not ids:
        return {}
    cur.execute("SELECT unique_id, features FROM news_features WHERE unique_id = ANY(%s::text[])", (ids,))
    return {uid: dict(f or {}) for uid, f in cur.fetchall()}
