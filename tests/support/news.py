"""Articles written straight into the test database at a chosen stage of the pipeline (scraped,
enriched, embedded, indexed), for the reconcile tests and the reconcile operators'."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from dgb import db

MODEL = "test-model"
DIM = 8
HOUR = timedelta(hours=1)


def add(
    conn,
    uid: str,
    stage: str = "scraped",
    *,
    age: timedelta = 2 * HOUR,
    model: str = MODEL,
    removed: bool = False,
    at: datetime | None = None,
) -> None:
    """An article that reached ``stage`` (scraped | enriched | embedded | indexed) ``age`` ago."""
    when = (at or datetime.now(UTC)) - age
    levels = ("scraped", "enriched", "embedded", "indexed")
    reached = levels.index(stage)
    version = 1 + min(reached, 2)
    with db.transaction(conn) as cur:
        cur.execute("SELECT code, id FROM themes WHERE code IN ('01', '01.01', '01.01.01')")
        theme = dict(cur.fetchall())
        cur.execute(
            "INSERT INTO news (unique_id, agency_key, title, url, published_at, content, trace_id, version,"
            " scraped_at, updated_at, removed_at)"
            " VALUES (%s, 'mec', %s, %s, %s, 'Texto da notícia.', %s, %s, %s, %s, %s)",
            (
                uid,
                f"Notícia {uid}",
                f"https://www.gov.br/mec/{uid}",
                when - HOUR,
                str(uuid.uuid4()),
                version,
                when,
                when,
                when if removed else None,
            ),
        )
        if reached >= 1:
            cur.execute(
                "UPDATE news SET theme_l1_id = %s, theme_l2_id = %s, theme_l3_id = %s,"
                " most_specific_theme_id = %s, summary = 'Resumo.', enriched_at = %s WHERE unique_id = %s",
                (theme["01"], theme["01.01"], theme["01.01.01"], theme["01.01.01"], when, uid),
            )
        if reached >= 2:
            cur.execute(
                "UPDATE news SET content_embedding = %s, embedding_model = %s, embedding_dim = %s,"
                " embedded_at = %s WHERE unique_id = %s",
                ([0.1] * DIM, model, DIM, when, uid),
            )
        if reached >= 3:
            cur.execute(
                "UPDATE news SET indexed_version = version, indexed_at = %s WHERE unique_id = %s", (when, uid)
            )
