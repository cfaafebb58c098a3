"""dgb_dev.stack.typesense.drop_index against the real Typesense: a benchmark's scratch index (the
alias and every collection of its name) goes, another index stays."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from dgb.search import schema
from dgb_dev.stack.typesense import drop_index

pytestmark = pytest.mark.stack


def test_drop_index_removes_the_alias_and_its_collections_only(typesense_server):
    tag = uuid.uuid4().hex[:6]
    alias, other = f"scratch_{tag}", f"scratchy_{tag}"
    s = replace(typesense_server, typesense_collection=alias, embedding_dim=3)
    ts = schema.client(s)
    schema.ensure_collection(s, ts)
    ts.collections.create({"name": f"{alias}_older", "fields": [{"name": "t", "type": "string"}]})
    ts.collections.create({"name": other, "fields": [{"name": "t", "type": "string"}]})
    try:
        dropped = drop_index(s)
        names = {c["name"] for c in ts.collections.retrieve()}
        assert f"{alias}_older" in dropped and len(dropped) == 2
        assert not any(n == alias or n.startswith(alias + "_") for n in names)
        assert other in names
        assert alias not in {a["name"] for a in ts.aliases.retrieve()["aliases"]}
        assert drop_index(s) == []  # nothing left: a no-op
    finally:
        ts.collections[other].delete()
