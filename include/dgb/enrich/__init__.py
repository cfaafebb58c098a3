"""Enrichment: theme classification (3-level taxonomy) and a short summary per article.

See :mod:`dgb.enrich.base` for the interface, :mod:`dgb.enrich.local` (offline, embedding
similarity, extractive summary) and :mod:`dgb.enrich.bedrock` (Amazon Bedrock, Claude).
"""

from dgb.enrich.base import (
    ArticleText,
    Classification,
    ClassificationFailure,
    Classifier,
    classify_all,
    get_classifier,
)

__all__ = [
    "ArticleText",
    "Classification",
    "ClassificationFailure",
    "Classifier",
    "classify_all",
    "get_classifier",
]
