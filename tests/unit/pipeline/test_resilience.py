"""The transient-or-permanent decision (dgb.pipeline.resilience.classify) for the errors each
dependency really raises: an outage must never look like poison, bad input must never look like an
outage."""

from __future__ import annotations

import httpx
import psycopg
import pytest
import typesense.exceptions as tse
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from dgb.embed.client import ModelServiceError, ModelServiceUnavailable
from dgb.enrich.bedrock import BedrockError
from dgb.pipeline.resilience import (
    BEDROCK,
    MODEL_SERVICE,
    PERMANENT,
    POSTGRESQL,
    TRANSIENT,
    TYPESENSE,
    UNKNOWN,
    classify,
)
from dgb.search.sync import IndexUnavailable


def _client_error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Converse"
    )


def _chained(outer: Exception, inner: Exception) -> Exception:
    try:
        try:
            raise inner
        except Exception as exc:
            raise outer from exc
    except Exception as exc:
        return exc


@pytest.mark.parametrize(
    ("exc", "kind", "dependency"),
    [
        # the model service: down, restarting (5xx / loading), slow, throttling; or refusing the input
        (ModelServiceUnavailable("model service at http://x: busy (HTTP 503)"), TRANSIENT, MODEL_SERVICE),
        (
            ModelServiceError("model service at http://x unavailable after 4 attempts: ConnectError"),
            TRANSIENT,
            MODEL_SERVICE,
        ),
        (
            ModelServiceError("model service at http://x did not answer POST /embed within 60s"),
            TRANSIENT,
            MODEL_SERVICE,
        ),
        (
            ModelServiceError("model service at http://x refused POST /embed: HTTP 429: busy"),
            TRANSIENT,
            MODEL_SERVICE,
        ),
        (
            ModelServiceError("model service at http://x refused POST /embed: HTTP 400: too long"),
            PERMANENT,
            MODEL_SERVICE,
        ),
        # wrong credentials (a rotated token): the service refuses every call, no article's fault
        (
            ModelServiceError("model service at http://x refused POST /embed: HTTP 401: unauthorized"),
            TRANSIENT,
            MODEL_SERVICE,
        ),
        (
            ModelServiceError("model service at http://x refused POST /embed: HTTP 403: forbidden"),
            TRANSIENT,
            MODEL_SERVICE,
        ),
        (
            ModelServiceError("model service at http://x refused POST /embed: HTTP 413: body"),
            PERMANENT,
            MODEL_SERVICE,
        ),
        (ModelServiceError("model service at http://x sent non-JSON: '<html>'"), UNKNOWN, MODEL_SERVICE),
        # Bedrock
        (_client_error("ThrottlingException", 429), TRANSIENT, BEDROCK),
        (_client_error("ServiceUnavailableException", 503), TRANSIENT, BEDROCK),
        (_client_error("InternalServerException", 500), TRANSIENT, BEDROCK),
        (_client_error("ValidationException", 400), PERMANENT, BEDROCK),
        (EndpointConnectionError(endpoint_url="https://bedrock"), TRANSIENT, BEDROCK),
        (ReadTimeoutError(endpoint_url="https://bedrock"), TRANSIENT, BEDROCK),
        (BedrockError("Bedrock AccessDeniedException for model m: no access"), TRANSIENT, BEDROCK),
        # Typesense
        (IndexUnavailable("typesense import: still unavailable after 5 retries"), TRANSIENT, TYPESENSE),
        (tse.ServiceUnavailable(503, "not ready"), TRANSIENT, TYPESENSE),
        (tse.Timeout("timed out"), TRANSIENT, TYPESENSE),
        (tse.HTTPStatus0Error("no status"), TRANSIENT, TYPESENSE),
        (tse.ServerError(500, "boom"), TRANSIENT, TYPESENSE),
        (tse.RequestMalformed(400, "bad field"), PERMANENT, TYPESENSE),
        (tse.ObjectUnprocessable(422, "bad document"), PERMANENT, TYPESENSE),
        # PostgreSQL
        (psycopg.OperationalError("connection refused"), TRANSIENT, POSTGRESQL),
        (psycopg.errors.AdminShutdown("terminating connection"), TRANSIENT, POSTGRESQL),
        (psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes"), PERMANENT, POSTGRESQL),
        # plain network errors, charged to the stage's own dependency
        (httpx.ConnectError("refused"), TRANSIENT, MODEL_SERVICE),
        (httpx.ReadTimeout("slow"), TRANSIENT, MODEL_SERVICE),
        (ConnectionRefusedError(111, "refused"), TRANSIENT, MODEL_SERVICE),
        (TimeoutError("timed out"), TRANSIENT, MODEL_SERVICE),
        # anything else is unknown: permanent only when isolated (decided by the stage run)
        (ValueError("cannot parse"), UNKNOWN, MODEL_SERVICE),
        (KeyError("theme"), UNKNOWN, MODEL_SERVICE),
        (RecursionError("maximum recursion depth exceeded"), UNKNOWN, MODEL_SERVICE),
    ],
)
def test_classify(exc, kind, dependency):
    v = classify(exc, MODEL_SERVICE)
    assert (v.kind, v.dependency) == (kind, dependency), v
    assert v.detail and v.reason


def test_the_cause_chain_is_followed_and_the_outer_message_kept():
    exc = _chained(RuntimeError("embedding chunk 3 failed"), httpx.ConnectError("refused"))
    v = classify(exc, MODEL_SERVICE)
    assert v.kind == TRANSIENT and "embedding chunk 3 failed" in v.detail
    # a wrapped data error stays permanent
    exc = _chained(RuntimeError("persist"), psycopg.DataError("NUL"))
    assert classify(exc).kind == PERMANENT
