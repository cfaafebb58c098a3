"""Articles at chosen publication times and themes, indexed through the real index sync, for the
engagement tests (trending scores, view counts) and the engagement operators' tests."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime

from dgb import db


def ensure_themes(conn) -> dict[str, int]:
    """The theme tree loaded (idempotent); ``{code: id}`` of the level-1 themes."""
    from dgb.taxonomy import load_taxonomy, themes_rows

    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM themes")
        empty = cur.fetchone()[0] == 0
    conn.rollback()
    if empty:
        db.upsert_themes(conn, themes_rows(load_taxonomy()))
    with db.transaction(conn) as cur:
        cur.execute("SELECT code, id FROM themes WHERE level = 1")
        return dict(cur.fetchall())


def add_article(
    conn, uid: str, published: datetime, theme: str | None = "01", *, removed: bool = False
) -> None:
    """An enriched article of level-1 ``theme`` (None: not classified yet) published at ``published``."""
    with db.transaction(conn) as cur:
        cur.execute(
            "INSERT INTO news (unique_id, agency_key, title, url, published_at, content, summary, trace_id,"
            " theme_l1_id, enriched_at, removed_at)"
            " VALUES (%s, 'mec', %s, %s, %s, 'Texto da notícia.', 'Resumo.', %s,"
            " (SELECT id FROM themes WHERE code = %s), now(), CASE WHEN %s THEN now() END)",
            (
                uid,
                f"Notícia {uid}",
                f"https://www.gov.br/mec/{uid}",
                published,
                str(uuid.uuid4()),
                theme,
                removed,
            ),
        )


def features(conn, key: str) -> dict[str, object]:
    """``{unique_id: features[key]}`` of the rows holding ``key``."""
    with db.transaction(conn) as cur:
        cur.execute("SELECT unique_id, features -> %s FROM news_features WHERE features ? %s", (key, key))
        return dict(cur.fetchall())


def make_index(typesense_server):
    """A fresh alias on the test Typesense (no embeddings): ``(client, alias, cleanup)``."""
    from dgb.search import schema

    alias = f"t_{uuid.uuid4().hex[:8]}"
    s = replace(typesense_server, typesense_collection=alias, embedding_dim=8)
    ts = schema.client(s)
    schema.ensure_collection(s, ts)

    def cleanup():
        target = ts.aliases[alias].retrieve()["collection_name"]
        ts.aliases[alias].delete()
        ts.collections[target].delete()

    return ts, alias, cleanup


def index(conn, ts, alias: str, ids) -> None:
    """Index ``ids`` whole, through the index stage's sync."""
    from dgb.search.sync import sync

    result = sync(ts, alias, conn, ids, None)
    assert not result.failed, result.failed


def document(ts, alias: str, uid: str) -> dict:
    return ts.collections[alias].documents[uid].retrieve()
