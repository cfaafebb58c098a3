"""The Typesense `news` collection.

The alias (default ``news``) points at a versioned collection whose name carries a hash of
the schema (``news_<hash>``). A schema change (new field, other embedding dimension) gives
a new collection name: the index stage builds it from PostgreSQL and swaps the alias, so
readers never see a half-built index.
"""

from __future__ import annotations

import hashlib
import json


def fields(embedding_dim: int) -> list[dict]:
    f = [
        {"name": "unique_id", "type": "string"},
        {"name": "title", "type": "string", "locale": "pt"},
        {"name": "subtitle", "type": "string", "optional": True, "locale": "pt"},
        {"name": "editorial_lead", "type": "string", "optional": True, "locale": "pt"},
        {"name": "summary", "type": "string", "optional": True, "locale": "pt"},
        {"name": "content", "type": "string", "optional": True, "locale": "pt"},
        {"name": "url", "type": "string", "index": False, "optional": True},
        {"name": "image", "type": "string", "index": False, "optional": True},
        {"name": "video_url", "type": "string", "index": False, "optional": True},
        {"name": "agency", "type": "string", "facet": True},
        {"name": "agency_name", "type": "string", "facet": True, "optional": True},
        {"name": "category", "type": "string", "facet": True, "optional": True},
        {"name": "tags", "type": "string[]", "facet": True, "optional": True},
        {"name": "published_at", "type": "int64"},
        {"name": "updated_at", "type": "int64", "optional": True},
        {"name": "published_year", "type": "int32", "facet": True},
        {"name": "published_month", "type": "int32", "facet": True},
        {"name": "published_week", "type": "int32", "facet": True},
        {"name": "content_hash", "type": "string", "facet": True, "optional": True},
        {"name": "image_broken", "type": "bool", "facet": True, "optional": True},
        {"name": "version", "type": "int32", "optional": True},
    ]
    for level in ("l1", "l2", "l3", "most_specific"):
        f.append({"name": f"theme_{level}_code", "type": "string", "facet": True, "optional": True})
        f.append({"name": f"theme_{level}_label", "type": "string", "facet": True, "optional": True})
    f.append({"name": "content_embedding", "type": "float[]", "num_dim": embedding_dim, "optional": True})
    return f


def collection_schema(embedding_dim: int, alias: str = "news") -> dict:
    body = {"fields": fields(embedding_dim), "default_sorting_field": "published_at"}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:8]
    return {"name": f"{alias}_{digest}", **body}


def client(settings, timeout: float = 10.0):
    import typesense

    return typesense.Client({
        "nodes": [{"host": settings.typesense_host, "port": str(settings.typesense_port), "protocol": "http"}],
        "api_key": settings.typesense_api_key,
        "connection_timeout_seconds": timeout,
        "num_retries": 2,
        "retry_interval_seconds": 0.5,
    })


def ensure_collection(settings, ts=None) -> str:
    """Create the versioned collection and the alias if missing (idempotent).

    When the alias already points at an older schema version the new collection is
    created but the alias is left alone: swapping it needs a full rebuild first
    (``dgb.search.index.rebuild``), which is the index stage's job.
    """
    import typesense.exceptions

    ts = ts or client(settings)
    schema = collection_schema(settings.embedding_dim, settings.typesense_collection)
    try:
        ts.collections[schema["name"]].retrieve()
        made = "exists"
    except typesense.exceptions.ObjectNotFound:
        ts.collections.create(schema)
        made = "created"
    alias = settings.typesense_collection
    try:
        current = ts.aliases[alias].retrieve()["collection_name"]
    except typesense.exceptions.ObjectNotFound:
        ts.aliases.upsert(alias, {"collection_name": schema["name"]})
        current = schema["name"]
    note = "" if current == schema["name"] else f" (alias still on {current}: rebuild pending)"
    return f"collection {schema['name']} {made}, alias {alias} -> {current}{note}"
