"""The index fields of an article's ``news_features`` object that this pipeline computes:
production's names and types (``sentiment_label``, ``sentiment_score``, ``word_count``,
``readability_flesch``, the entity fields of :func:`dgb.features.entities.search_fields`); a
field with no value is left out of the document, never sent as null. Standard library only:
:mod:`dgb.search.documents` builds every document with it."""

from __future__ import annotations

from typing import Any

from dgb.features.entities import search_fields


def document_fields(features: dict | None) -> dict[str, Any]:
    f = features if isinstance(features, dict) else {}
    out: dict[str, Any] = {}
    s = f.get("sentiment")
    if isinstance(s, dict):
        if isinstance(s.get("label"), str) and s["label"]:
            out["sentiment_label"] = s["label"]
        if isinstance(s.get("score"), (int, float)) and not isinstance(s.get("score"), bool):
            out["sentiment_score"] = float(s["score"])
    if isinstance(f.get("word_count"), (int, float)) and not isinstance(f.get("word_count"), bool):
        out["word_count"] = int(f["word_count"])
    if isinstance(f.get("readability_flesch"), (int, float)) and not isinstance(
        f["readability_flesch"], bool
    ):
        out["readability_flesch"] = float(f["readability_flesch"])
    out.update(search_fields(f.get("entities")))
    return out
