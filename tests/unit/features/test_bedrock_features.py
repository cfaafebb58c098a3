"""Bedrock's answers for the features: the combined theme + summary + sentiment call and the NER
call, on the responses of tests/fixtures/bedrock (complete, partial, malformed, cut off), through
the one Bedrock fake's client. Every case ends with the article classified or a clear failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dgb.enrich.base import ArticleText
from dgb.enrich.bedrock import BedrockClassifier
from dgb.features import sentiment
from dgb.features.bedrock_ner import CONTENT_CHARS, SYSTEM, BedrockNer
from dgb.features.compute import FeatureComputer
from dgb.taxonomy import load_taxonomy
from dgb_dev.bedrock_fake import FakeClient  # the one Bedrock fake
from tests.support.bedrock import Sleeps, client_error, recorded

NEWS = Path(__file__).resolve().parents[2] / "fixtures" / "classifier" / "real_news.jsonl"


@pytest.fixture(scope="module")
def taxonomy():
    return load_taxonomy()


@pytest.fixture(scope="module")
def anvisa() -> dict:
    rows = [json.loads(line) for line in NEWS.read_text(encoding="utf-8").splitlines()]
    return next(r for r in rows if r["title"].startswith("Anvisa determina"))


def _classifier(taxonomy, *replies) -> BedrockClassifier:
    return BedrockClassifier(taxonomy, client=FakeClient(*replies), sleep=Sleeps(), rand=lambda: 0.0)


def _item(a: dict) -> ArticleText:
    return ArticleText("anvisa_1", a["title"], None, None, a["content"])


def test_combined_call_answers_theme_summary_and_sentiment(taxonomy, anvisa):
    c = _classifier(taxonomy, recorded("combined_ok"))
    res = c.classify_one(_item(anvisa))
    assert res.ok and res.most_specific == "03.04.01"
    assert res.sentiment == {"label": "negative", "score": -0.4}
    assert "validation" not in res.usage and res.usage["calls"] == 1
    system = c.client.requests[0]["system"][0]["text"]
    assert '"sentiment": {"label": "positive|neutral|negative", "score": 0.0}' in system


@pytest.mark.parametrize(
    ("fixture", "note"),
    [
        ("combined_no_sentiment", "sentiment missing"),
        ("combined_bad_sentiment", "sentiment label 'muito negativo' is not one of"),
    ],
)
def test_partial_combined_answer_keeps_the_classification_and_says_why(taxonomy, anvisa, fixture, note):
    res = _classifier(taxonomy, recorded(fixture)).classify_one(_item(anvisa))
    assert res.ok and res.theme_l1 == "03" and res.summary
    assert res.sentiment is None
    assert any(n.startswith(note) for n in res.usage["validation"])
    # the stage then takes the offline sentiment: the article still gets one
    f = FeatureComputer().compute(anvisa["title"], anvisa["content"], classifier_sentiment=res.sentiment)
    # the lexicon's answer: "em situação irregular" in the title, nothing favourable
    assert f.keys["sentiment_method"] == "lexicon-pt-2"
    assert f.keys["sentiment"] == sentiment.sentiment(anvisa["title"], anvisa["content"])
    assert f.keys["sentiment"]["label"] == "negative" and f.keys["sentiment"]["score"] < -0.2


def test_out_of_range_score_is_clamped_and_label_case_folded(taxonomy, anvisa):
    res = _classifier(taxonomy, recorded("combined_score_out_of_range")).classify_one(_item(anvisa))
    assert res.sentiment == {"label": "negative", "score": -1.0}


def test_malformed_combined_answer_is_a_clear_permanent_failure_after_one_reask(taxonomy, anvisa):
    c = _classifier(taxonomy, recorded("combined_malformed"), recorded("combined_malformed"))
    res = c.classify_one(_item(anvisa))
    assert not res.ok and res.reason == "malformed_llm_output" and not res.retryable
    assert "no JSON object in the reply after 2 attempt(s)" in res.detail
    assert res.usage["calls"] == 2 and res.usage["failures"] == 1  # billed, in the ledger


def _ner(taxonomy, *replies) -> BedrockNer:
    return BedrockNer(_classifier(taxonomy, *replies), model_id="ner-model")


def test_ner_call_its_own_model_temperature_zero_first_3000_chars(taxonomy, anvisa):
    ner = _ner(taxonomy, recorded("ner_ok"))
    long = anvisa["content"] + " fim" * 2000
    mentions, usage, error = ner.extract(anvisa["title"], None, None, long)
    req = ner.caller.client.requests[0]
    assert req["modelId"] == "ner-model" and usage["model_id"] == "ner-model"
    assert req["inferenceConfig"]["temperature"] == 0.0
    assert req["system"][0]["text"] == SYSTEM
    body = req["messages"][0]["content"][0]["text"]
    assert body.count(" fim") < CONTENT_CHARS // 4 and len(body) < CONTENT_CHARS + 400
    assert error is None and usage["output_tokens"] == 210
    assert [(m["text"], m["type"]) for m in mentions] == [
        ("Anvisa", "ORG"),
        ("Santo Mato Farma", "ORG"),
        ("Calm Days", "PRODUCT"),
        ("Resolução (RE) 809/2026", "POLICY"),  # DECRETO -> POLICY
        ("Diário Oficial da União", "WORK"),
    ]
    assert mentions[1]["forma_canonica"] == "Santo Mato Farma LTDA"


def test_ner_partial_answer_keeps_the_valid_items_in_shape(taxonomy, anvisa):
    mentions, _usage, error = _ner(taxonomy, recorded("ner_partial")).extract(
        anvisa["title"], None, None, anvisa["content"]
    )
    assert error is None
    assert mentions == [
        {"text": "Anvisa", "type": "ORG", "count": 1, "forma_canonica": "Anvisa", "salience": 1.0},
        {
            "text": "Prêmio Boas Práticas",
            "type": "EVENT",  # PRÊMIO -> EVENT
            "count": 1,
            "forma_canonica": "Prêmio Boas Práticas",
            "salience": 0.0,
        },
    ]


@pytest.mark.parametrize(
    ("fixture", "says"),
    [
        ("ner_malformed", "ner malformed_llm_output: no JSON object with an entities list"),
        ("ner_truncated", "ner malformed_llm_output (cut off at the token limit)"),
    ],
)
def test_ner_malformed_or_cut_answer_falls_back_to_the_offline_entities(taxonomy, anvisa, fixture, says):
    ner = _ner(taxonomy, recorded(fixture))
    f = FeatureComputer(ner).compute(anvisa["title"], anvisa["content"])
    assert f.keys["entities_error"].startswith(says)
    assert f.keys["entities_method"] == "rules-pt-1" and f.entities_source == "rules"
    assert [m["text"] for m in f.mentions][:1] == ["Anvisa"]  # the article keeps its entities
    assert f.usage[0]["failures"] == 1 and f.usage[0]["calls"] == 1  # billed, in the ledger


def test_ner_throttled_throughout_backs_off_then_falls_back(taxonomy, anvisa):
    throttle = client_error("ThrottlingException")
    ner = _ner(taxonomy, throttle, throttle, throttle, throttle)
    f = FeatureComputer(ner).compute(anvisa["title"], anvisa["content"])
    assert ner.caller.sleep == [1.0, 2.0, 4.0]  # the classifier's backoff
    assert f.keys["entities_error"].startswith("ner throttled")
    assert f.usage[0]["throttled"] == 4 and f.mentions
