"""The Typesense `news` collection.

Fields, names and types are production's (DestaquesGovBr's ``news`` collection), so the portal's
and the GraphQL API's queries run unchanged; a few fields of our own follow. The alias (default
``news``, production's collection name) points at a versioned collection whose name carries a hash of
the schema (``news_<hash>``). A schema change (new field, other embedding dimension) gives
a new collection name: the index stage builds it from PostgreSQL and swaps the alias, so
readers never see a half-built index.
"""

from __future__ import annotations

import hashlib
import json

#: Theme fields of a document, production's names: code and label at each level, then the most
#: specific theme (the deepest level the classifier reached).
THEME_FIELDS: tuple[str, ...] = (
    "theme_1_level_1_code",
    "theme_1_level_1_label",
    "theme_1_level_2_code",
    "theme_1_level_2_label",
    "theme_1_level_3_code",
    "theme_1_level_3_label",
    "most_specific_theme_code",
    "most_specific_theme_label",
)


#: The article features' fields, production's names and types, optional (an article without a value
#: leaves the field out): sentiment, reading figures and entities from ``news_features``
#: (:mod:`dgb.features`, written by the enrich stage), trending and views from the engagement jobs
#: (:mod:`dgb.engagement`). docs/compatibility.md has a row for each.
FEATURE_FIELDS: tuple[dict, ...] = (
    {"name": "sentiment_label", "type": "string", "facet": True, "optional": True},
    {"name": "sentiment_score", "type": "float", "optional": True},
    {"name": "trending_score", "type": "float", "optional": True, "sort": True},
    {"name": "readability_flesch", "type": "float", "optional": True},
    {"name": "word_count", "type": "int32", "optional": True},
    *(
        {"name": name, "type": "string[]", "facet": True, "optional": True}
        for name in (
            "entities",
            "entity_org",
            "entity_per",
            "entity_loc",
            "entity_event",
            "entity_policy",
            "entity_misc",
            "entity_canonical",
        )
    ),
    {"name": "view_count", "type": "int32", "optional": True, "sort": True},
)


def fields(embedding_dim: int) -> list[dict]:
    """Production's ``news`` fields (same names, types, facets and sorts), then ours.

    Production's clients (the portal, the GraphQL API) query these names; ``image`` must stay
    indexed because they filter ``image:!=""`` (an unindexed field makes that filter match
    nothing). Ours beyond production's: ``agency_name``, ``updated_at``, ``version``.
    """
    f = [
        {"name": "unique_id", "type": "string", "facet": True, "sort": True},
        {"name": "agency", "type": "string", "facet": True, "optional": True},
        {"name": "published_at", "type": "int64"},
        {"name": "title", "type": "string", "optional": True, "locale": "pt"},
        {"name": "url", "type": "string", "optional": True},
        {"name": "image", "type": "string", "optional": True},
        {"name": "video_url", "type": "string", "optional": True},
        {"name": "category", "type": "string", "facet": True, "optional": True},
        {"name": "content", "type": "string", "optional": True, "locale": "pt"},
        {"name": "summary", "type": "string", "optional": True, "locale": "pt"},
        {"name": "subtitle", "type": "string", "optional": True, "locale": "pt"},
        {"name": "editorial_lead", "type": "string", "optional": True, "locale": "pt"},
        {"name": "extracted_at", "type": "int64", "optional": True},
    ]
    for name in THEME_FIELDS:
        f.append({"name": name, "type": "string", "facet": True, "optional": True})
    f += [
        {"name": "published_year", "type": "int32", "facet": True, "optional": True},
        {"name": "published_month", "type": "int32", "facet": True, "optional": True},
        {"name": "published_week", "type": "int32", "facet": True, "optional": True},
        {"name": "tags", "type": "string[]", "facet": True, "optional": True},
        {"name": "content_hash", "type": "string", "facet": True, "optional": True},
        {"name": "has_image", "type": "bool", "facet": True, "optional": True},
        {"name": "has_video", "type": "bool", "facet": True, "optional": True},
        {"name": "image_broken", "type": "bool", "facet": True, "optional": True},
        *FEATURE_FIELDS,
        # ours
        {"name": "agency_name", "type": "string", "facet": True, "optional": True},
        {"name": "updated_at", "type": "int64", "optional": True},
        {"name": "version", "type": "int32", "optional": True},
        {"name": "content_embedding", "type": "float[]", "num_dim": embedding_dim, "optional": True},
    ]
    return [dict(x) for x in f]


def collection_schema(embedding_dim: int, alias: str = "news") -> dict:
    body = {"fields": fields(embedding_dim), "default_sorting_field": "published_at"}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:8]
    return {"name": f"{alias}_{digest}", **body}


def client(settings, timeout: float = 10.0):
    import typesense

    return typesense.Client(
        {
            "nodes": [
                {"host": settings.typesense_host, "port": str(settings.typesense_port), "protocol": "http"}
            ],
            "api_key": settings.typesense_api_key,
            "connection_timeout_seconds": timeout,
            "num_retries": 2,
            "retry_interval_seconds": 0.5,
        }
    )


def ensure_collection(settings, ts=None) -> str:
    """Create the versioned collection and the alias if missing (idempotent).

    When the alias already points at an older schema version the new collection is
    created but the alias is left alone: swapping it needs a full rebuild first
    (``dgb.search.rebuild.rebuild``), which is the index stage's job.
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
