"""Typesense collection + alias against the real server."""

import uuid

import pytest

from dgb.search import schema

pytestmark = pytest.mark.stack


def test_ensure_collection_is_idempotent_and_sized_from_model(typesense_server):
    from dataclasses import replace

    alias = f"t_{uuid.uuid4().hex[:8]}"
    s = replace(typesense_server, typesense_collection=alias, embedding_dim=384)
    ts = schema.client(s)
    first = schema.ensure_collection(s, ts)
    assert "created" in first
    assert "exists" in schema.ensure_collection(s, ts)
    target = ts.aliases[alias].retrieve()["collection_name"]
    info = ts.collections[target].retrieve()
    emb = next(f for f in info["fields"] if f["name"] == "content_embedding")
    assert emb["num_dim"] == 384
    assert info["default_sorting_field"] == "published_at"
    facets = {f["name"] for f in info["fields"] if f.get("facet")}
    assert {
        "agency",
        "category",
        "tags",
        "theme_1_level_1_code",
        "most_specific_theme_label",
        "unique_id",
        "published_year",
        "published_month",
        "published_week",
    } <= facets
    # another model dimension is another schema version: a new collection, alias untouched
    s2 = replace(s, embedding_dim=768)
    note = schema.ensure_collection(s2, ts)
    assert "rebuild pending" in note
    assert ts.aliases[alias].retrieve()["collection_name"] == target
    for name in {target, schema.collection_schema(768, alias)["name"]}:
        ts.collections[name].delete()
    ts.aliases[alias].delete()
