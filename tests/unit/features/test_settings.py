"""The features' settings: on by default, off with DGB_FEATURES=0; the NER backend follows the
classifier unless DGB_FEATURES_NER says otherwise; the NER model id has its own variable."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dgb.config.features import bedrock_ner_model_id, ner_backend
from dgb.enrich.bedrock import BedrockClassifier
from dgb.features.bedrock_ner import BedrockNer
from dgb.pipeline.stages import _feature_computer
from dgb_dev.bedrock_fake import FakeClient  # the one Bedrock fake


def test_defaults_follow_the_classifier(monkeypatch):
    monkeypatch.delenv("DGB_FEATURES_NER", raising=False)
    assert ner_backend("local") == "rules"
    assert ner_backend("bedrock") == "bedrock" and ner_backend("hybrid") == "bedrock"
    monkeypatch.setenv("DGB_FEATURES_NER", "rules")
    assert ner_backend("bedrock") == "rules"
    monkeypatch.setenv("DGB_FEATURES_NER", "spacy")
    with pytest.raises(ValueError, match="DGB_FEATURES_NER"):
        ner_backend("local")


def test_the_stage_builds_its_feature_computer_from_the_settings(monkeypatch):
    monkeypatch.delenv("DGB_FEATURES_NER", raising=False)
    monkeypatch.setenv("DGB_BEDROCK_NER_MODEL_ID", "us.anthropic.some-ner-model")
    bedrock = BedrockClassifier(client=FakeClient())
    computer = _feature_computer(SimpleNamespace(classifier_backend="bedrock"), bedrock)
    assert isinstance(computer.ner, BedrockNer) and computer.ner.caller is bedrock
    assert computer.ner.model_id == "us.anthropic.some-ner-model" == bedrock_ner_model_id("x")
    assert _feature_computer(SimpleNamespace(classifier_backend="local"), object()).ner is None
    monkeypatch.setenv("DGB_FEATURES", "0")
    assert _feature_computer(SimpleNamespace(classifier_backend="local"), object()) is None
