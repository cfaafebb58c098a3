"""The Bedrock fake over loopback HTTP, driven by a real boto3 ``bedrock-runtime`` client and the
production classifier: valid answers, and 429 ThrottlingException while throttling is on."""

from __future__ import annotations

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from dgb.enrich.base import ArticleText, Classification, ClassificationFailure
from dgb.enrich.bedrock import BedrockClassifier
from dgb.taxonomy import load_taxonomy
from dgb_dev.bedrock_fake import FakeBedrockServer

ARTICLE = ArticleText(
    unique_id="fake1",
    title="Governo anuncia novas vagas em escolas técnicas federais",
    content="O programa amplia a oferta de cursos técnicos integrados ao ensino médio.",
)


@pytest.fixture(scope="module")
def taxonomy():
    return load_taxonomy()


@pytest.fixture
def fake(taxonomy):
    server = FakeBedrockServer(0, taxonomy).start()
    yield server
    server.stop()


def client(fake):
    conn = fake.aws_conn()
    return boto3.client(
        "bedrock-runtime",
        region_name=conn["extra"]["region_name"],
        endpoint_url=conn["extra"]["endpoint_url"],
        aws_access_key_id=conn["login"],
        aws_secret_access_key=conn["password"],
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )


def test_answers_a_valid_code_and_summary(fake, taxonomy):
    clf = BedrockClassifier(taxonomy, client=client(fake), sleep=lambda s: None)
    [result] = clf.classify_batch([ARTICLE])
    assert isinstance(result, Classification), result
    assert taxonomy.get(result.theme_l3) is not None
    assert result.theme_l3.startswith(result.theme_l2 + ".") and result.theme_l2.startswith(result.theme_l1)
    assert result.summary and result.usage["calls"] == 1
    [again] = clf.classify_batch([ARTICLE])
    assert again.theme_l3 == result.theme_l3  # deterministic per article
    assert fake.calls == 2 and fake.throttled == 0


def test_throttling_is_a_429_throttling_exception_until_switched_off(fake, taxonomy):
    c = client(fake)
    fake.throttle(60)
    with pytest.raises(ClientError) as err:
        c.converse(modelId="m", messages=[{"role": "user", "content": [{"text": "x"}]}])
    assert err.value.response["Error"]["Code"] == "ThrottlingException"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 429

    sleeps: list[float] = []
    clf = BedrockClassifier(taxonomy, client=c, sleep=sleeps.append)
    [result] = clf.classify_batch([ARTICLE])
    assert isinstance(result, ClassificationFailure) and result.retryable
    assert result.reason == "throttled" and len(sleeps) == 3
    assert fake.throttled == 5

    fake.throttle(None)
    [ok] = clf.classify_batch([ARTICLE])
    assert isinstance(ok, Classification)


def test_serves_loopback_only(taxonomy):
    with pytest.raises(ValueError):
        FakeBedrockServer(0, taxonomy, host="0.0.0.0")
