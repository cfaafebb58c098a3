"""An article's events rebuilt from PostgreSQL, and written to the outbox: what repair, redrive
and replay re-send.

Every re-sent event keeps the article's ``trace_id`` and carries the attribute
``dgb_source`` (:data:`SOURCE_ATTR`: ``reconcile``, ``redrive`` or ``replay``).
"""

from __future__ import annotations

from collections.abc import Iterable

from dgb import events, outbox, topology
from dgb.pipeline import definitions

SOURCE_ATTR = "dgb_source"  # attribute of every event re-sent from here


_ROW = f"""
SELECT n.unique_id, n.agency_key, n.published_at, n.scraped_at, n.trace_id, n.enriched_at, n.summary,
       tm.code AS most_specific_theme_code, n.embedded_at, n.embedding_dim, n.embedding_model, n.version,
       n.indexed_version, n.removed_at, n.reconcile_attempts, n.reconciled_at, n.problem,
       ({definitions.EMBED.done}) AS embed_done
  FROM news n LEFT JOIN themes tm ON tm.id = n.most_specific_theme_id
 WHERE n.unique_id = ANY(%(ids)s)
"""


def load_rows(cur, unique_ids: Iterable[str], model: str | None = None) -> dict[str, dict]:
    """unique_id -> the article's row as the events need it; ``embed_done``: embedded by
    ``model``, the current embedding model (the embed stage's done rule; None = any model)."""
    ids = list(dict.fromkeys(unique_ids))
    if not ids:
        return {}
    cur.execute(_ROW, {**definitions.params(model), "ids": ids})
    names = [d.name for d in cur.description]
    return {r[0]: dict(zip(names, r)) for r in cur.fetchall()}


def event_for(row: dict, topic: str, source: str) -> events.Event:
    """The ``topic`` event of an article, rebuilt from its row (trace_id kept)."""
    uid = row["unique_id"]
    if topic == topology.TOPIC_SCRAPED:
        payload = {
            "unique_id": uid,
            "agency_key": row["agency_key"],
            "published_at": row["published_at"],
            "scraped_at": row["scraped_at"],
        }
    elif topic == topology.TOPIC_ENRICHED:
        if row["enriched_at"] is None:
            raise ValueError(f"{uid} is not enriched: no {topic} event")
        payload = {
            "unique_id": uid,
            "enriched_at": row["enriched_at"],
            "most_specific_theme_code": row["most_specific_theme_code"],
            "has_summary": bool(row["summary"]),
        }
    elif topic == topology.TOPIC_EMBEDDED:
        if row["embedded_at"] is None:
            raise ValueError(f"{uid} is not embedded: no {topic} event")
        payload = {"unique_id": uid, "embedded_at": row["embedded_at"], "embedding_dim": row["embedding_dim"]}
    else:
        raise ValueError(f"unknown topic {topic!r}")
    trace = str(row["trace_id"]) if row.get("trace_id") else None
    event = events.make_event(topic, payload, trace_id=trace)
    return events.Event(event.topic, event.payload, {**event.attributes, SOURCE_ATTR: source})


def topic_for(row: dict, wanted: str) -> str:
    """The event to send for ``wanted`` given what the article (a :func:`load_rows` row) has done
    so far: the wanted topic when the row can produce it, else the earliest stage it still needs."""
    if row["enriched_at"] is None:
        return topology.TOPIC_SCRAPED
    if wanted == topology.TOPIC_EMBEDDED and (not row["embed_done"] or row["removed_at"] is not None):
        return topology.TOPIC_ENRICHED
    if wanted == topology.TOPIC_SCRAPED:
        return topology.TOPIC_SCRAPED
    return wanted


def enqueue(cur, event: events.Event) -> None:
    """Write a rebuilt event to the outbox (the caller's transaction)."""
    outbox.enqueue_raw(cur, event.topic, event.unique_id, event.payload, event.attributes)
