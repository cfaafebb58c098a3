"""One article's features, computed and written: what the enrich stage and the backfill call.

:class:`FeatureComputer` computes, per article, the keys this pipeline owns in
``news_features.features`` (production's names; ours marked):

* ``word_count``, ``readability_flesch`` (:mod:`dgb.features.reading`), ``readability_flesch_pt`` (ours);
* ``sentiment`` ``{"label", "score"}``: the classifier's (Bedrock's combined call, or the local
  classifier's sentiment head) when it gave one, else the polarity lexicon's
  (:mod:`dgb.features.sentiment`); ``sentiment_method`` (ours) says which;
* ``entities``: production's mention list (:mod:`dgb.features.entities`), from the Bedrock NER
  call (when configured) or the offline extractor (:mod:`dgb.features.rules_ner`), canonical ids
  resolved at write time (:mod:`dgb.features.registry`); ``entities_method`` (ours) says which,
  ``entities_error`` (ours) why Bedrock's answer was not used;
* ``features_computed_at`` and ``features_version`` (ours): when, and by which version of these
  methods (:data:`FEATURES_VERSION`); ``dgb features backfill`` recomputes the rows of an older
  version.

:func:`write` merges them into ``news_features`` (``features || new``: other jobs' keys such as
``trending_score`` and ``view_count`` stay), removes the keys that no longer apply after an edit
(``readability_flesch`` of a text now under 10 words), and replaces the article's
``news_entities`` rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dgb.features import reading, registry, rules_ner, sentiment, store

RULES_METHOD = "rules-pt-1"
# 2: readability on the reader's text with Portuguese syllables, the sentiment head and the
# lemma lexicon, namespaced entity ids
FEATURES_VERSION = 2
OWN_KEYS = (
    "word_count",
    "readability_flesch",
    "readability_flesch_pt",
    "sentiment",
    "sentiment_method",
    "entities",
    "entities_method",
    "entities_error",
    "features_computed_at",
    "features_version",
)


@dataclass
class ArticleFeatures:
    """The keys to merge (a ``None`` value means: remove the key), the mentions before canonical
    resolution, and the Bedrock usage the NER call cost (for the ledger)."""

    keys: dict[str, Any]
    mentions: list[dict]
    entities_source: str = "rules"  # registry provenance of new ids: rules | llm
    usage: list[dict] = field(default_factory=list)


class FeatureComputer:
    """Computes :class:`ArticleFeatures`; ``ner`` is a :class:`dgb.features.bedrock_ner.BedrockNer`
    or None (offline extractor only)."""

    def __init__(self, ner=None):
        self.ner = ner

    def compute(
        self,
        title: str,
        content: str,
        *,
        subtitle: str | None = None,
        lead: str | None = None,
        classifier_sentiment: dict | None = None,
    ) -> ArticleFeatures:
        title, content = title or "", content or ""
        keys: dict[str, Any] = dict(reading.reading_features(content))
        keys.update(sentiment.features(title, content, classifier_sentiment))
        out = ArticleFeatures(keys, [])
        keys["entities_error"] = None
        if self.ner is not None:
            mentions, usage, error = self.ner.extract(title, subtitle, lead, content)
            out.usage.append(usage)
            if mentions is not None:
                out.mentions, out.entities_source = mentions, "llm"
                keys["entities_method"] = "bedrock"
            else:
                keys["entities_error"] = error
        if out.entities_source != "llm":
            out.mentions = rules_ner.extract(title, content)
            keys["entities_method"] = RULES_METHOD
        keys["features_computed_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        keys["features_version"] = FEATURES_VERSION
        return out


def write(cur, unique_id: str, features: ArticleFeatures, published_at=None) -> dict:
    """Write one article's features on the caller's cursor; returns the merged keys."""
    return write_many(cur, [(unique_id, features, published_at)])[unique_id]


def write_many(cur, articles: list[tuple[str, ArticleFeatures, Any]]) -> dict[str, dict]:
    """Write many articles' features ``(unique_id, features, published_at)`` on the caller's
    cursor with a few statements for all of them (the enrich stage's chunk): the mentions
    resolved in one registry look-up per provenance, the keys merged per set of removed keys, the
    ``news_entities`` rows replaced together. Returns each article's merged keys."""
    resolved: dict[str, list[dict]] = {}
    by_source: dict[str, list[tuple[str, ArticleFeatures]]] = {}
    for uid, features, _ in articles:
        by_source.setdefault(features.entities_source, []).append((uid, features))
    for source, group in by_source.items():
        flat = registry.resolve(cur, [m for _, f in group for m in f.mentions], source)
        pos = 0
        for uid, f in group:
            resolved[uid] = flat[pos : pos + len(f.mentions)]
            pos += len(f.mentions)
    merged: dict[str, dict] = {}
    by_gone: dict[tuple[str, ...], dict[str, dict]] = {}
    for uid, features, _ in articles:
        keys = dict(features.keys)
        keys["entities"] = resolved[uid]
        gone = tuple(k for k, v in keys.items() if v is None)
        merged[uid] = present = {k: v for k, v in keys.items() if v is not None}
        by_gone.setdefault(gone, {})[uid] = present
    for gone, rows in sorted(by_gone.items()):
        store.merge_features(cur, rows, drop=gone)
    registry.write_news_entities_many(cur, [(uid, resolved[uid], at) for uid, _, at in articles])
    return merged
