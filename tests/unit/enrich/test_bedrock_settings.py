"""The Bedrock classifier's settings, read in :mod:`dgb.config.enrich`: defaults, explicit
arguments winning over the environment, and the validation of the number."""

from __future__ import annotations

import pytest

from dgb.config.enrich import bedrock_aws_conn_id, bedrock_concurrency, bedrock_model_id, bedrock_region
from dgb.enrich.bedrock import BedrockClassifier

SETTINGS = ("DGB_BEDROCK_MODEL_ID", "DGB_AWS_CONN_ID", "DGB_BEDROCK_REGION", "DGB_BEDROCK_CONCURRENCY")


@pytest.fixture
def clean_env(monkeypatch):
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_defaults_when_unset_or_empty(clean_env):
    assert bedrock_model_id("the-default") == "the-default"
    assert bedrock_aws_conn_id() == "aws_default"
    assert bedrock_region() is None
    assert bedrock_concurrency() == 1
    for name in SETTINGS:
        clean_env.setenv(name, "")
    assert bedrock_model_id("the-default") == "the-default"
    assert (bedrock_aws_conn_id(), bedrock_region(), bedrock_concurrency()) == ("aws_default", None, 1)


def test_values_reach_the_classifier_unless_given(clean_env):
    clean_env.setenv("DGB_AWS_CONN_ID", "aws_prod")
    clean_env.setenv("DGB_BEDROCK_REGION", "us-east-1")
    clean_env.setenv("DGB_BEDROCK_CONCURRENCY", "4")
    clf = BedrockClassifier(client=object())
    assert (clf.aws_conn_id, clf.region_name, clf.concurrency) == ("aws_prod", "us-east-1", 4)
    clf = BedrockClassifier(client=object(), aws_conn_id="other", region_name="sa-east-1", concurrency=2)
    assert (clf.aws_conn_id, clf.region_name, clf.concurrency) == ("other", "sa-east-1", 2)


def test_concurrency_is_an_integer_and_at_least_one_call(clean_env):
    clean_env.setenv("DGB_BEDROCK_CONCURRENCY", "0")
    assert BedrockClassifier(client=object()).concurrency == 1
    clean_env.setenv("DGB_BEDROCK_CONCURRENCY", "many")
    with pytest.raises(ValueError, match="DGB_BEDROCK_CONCURRENCY"):
        bedrock_concurrency()
