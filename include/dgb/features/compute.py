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
    mentions = registry.resolve(cur, features.mentions, features.entities_source)
    keys = dict(features.keys)
    keys["entities"] = mentions
    gone = [k for k, v in keys.items() if v is None]
    present = {k: v for k, v in keys.items() if v is not None}
    store.merge_features(cur, {unique_id: present}, drop=gone)
    registry.write_news_entities(cur, unique_id, mentions, published_at)
    return present
