"""The article's sentiment feature: where it comes from (Bedrock, the local head, the lexicon). The
lexicon's rules: tests/unit/enrich/test_polarity.py; the head: tests/unit/enrich/test_sentiment_head.py."""

from __future__ import annotations

from dgb.features import sentiment


def test_the_feature_names_who_answered():
    bedrock = {"label": "negative", "score": -0.4}
    assert sentiment.features("t", "c", bedrock) == {"sentiment": bedrock, "sentiment_method": "bedrock"}
    head = {"label": "positive", "score": 0.35, "method": "local-head-1"}
    assert sentiment.features("t", "c", head) == {
        "sentiment": {"label": "positive", "score": 0.35},
        "sentiment_method": "local-head-1",
    }
    fallback = sentiment.features("Enchente deixa mortos", "", None)
    assert fallback["sentiment_method"] == "lexicon-pt-2"
    assert fallback["sentiment"]["label"] == "negative"
