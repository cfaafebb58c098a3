"""The index fields of a news_features object: production's names and types, values left out
(never null) when absent or malformed; other jobs' keys are not this module's."""

from __future__ import annotations

from dgb.features.fields import document_fields


def test_fields_of_a_full_object():
    got = document_fields(
        {
            "word_count": 412,
            "readability_flesch": 31.5,
            "readability_flesch_pt": 55.2,
            "sentiment": {"label": "positive", "score": 0.4},
            "entities": [{"text": "MEC", "type": "ORG", "canonical_id": "dgb_mec"}],
            "trending_score": 2.0,
        }
    )
    assert got == {
        "sentiment_label": "positive",
        "sentiment_score": 0.4,
        "word_count": 412,
        "readability_flesch": 31.5,
        "entities": ["MEC"],
        "entity_org": ["MEC"],
        "entity_canonical": ["dgb_mec"],
    }
    assert isinstance(got["sentiment_score"], float)


def test_absent_or_malformed_values_are_left_out():
    assert document_fields(None) == {} and document_fields({}) == {}
    assert (
        document_fields(
            {
                "word_count": True,
                "readability_flesch": "x",
                "sentiment": {"label": "", "score": None},
                "entities": "MEC",
            }
        )
        == {}
    )
    assert document_fields({"sentiment": {"score": 0}}) == {"sentiment_score": 0.0}
