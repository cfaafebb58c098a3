"""The daily LLM usage ledger in the real PostgreSQL test database (migration 0002)."""

from __future__ import annotations

import json
import uuid
from datetime import date

import pytest

from dgb.enrich.base import ArticleText
from dgb.enrich.bedrock import BedrockClassifier
from dgb.enrich.ledger import record_usage
from dgb.taxonomy import load_taxonomy
from dgb_dev.bedrock_fake import FakeClient, converse_response


@pytest.fixture
def model_id(pg):
    """A model id of our own, so rows of other tests / runs never mix in (the pg fixture does not
    truncate this table)."""
    mid = f"test-model-{uuid.uuid4().hex[:8]}"
    yield mid
    with pg.cursor() as cur:
        cur.execute("DELETE FROM llm_usage_daily WHERE model_id LIKE %s", (mid + "%",))
    pg.commit()


def rows(pg, model_id):
    with pg.cursor() as cur:
        cur.execute(
            "SELECT day, model_id, calls, input_tokens, output_tokens, throttled, failures"
            " FROM llm_usage_daily WHERE model_id LIKE %s ORDER BY day, model_id",
            (model_id + "%",),
        )
        return cur.fetchall()


def test_table_shape(pg):
    with pg.cursor() as cur:
        cur.execute(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_name = 'llm_usage_daily' ORDER BY ordinal_position"
        )
        columns = dict(cur.fetchall())
        cur.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
            " AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'llm_usage_daily'::regclass AND i.indisprimary"
        )
        pk = {r[0] for r in cur.fetchall()}
    pg.rollback()
    assert columns["day"] == "date" and columns["model_id"] == "text"
    assert columns["calls"] == "integer" and columns["input_tokens"] == "bigint"
    assert columns["output_tokens"] == "bigint" and columns["throttled"] == "integer"
    assert columns["failures"] == "integer"
    assert pk == {"day", "model_id"}


def test_record_usage_upserts_and_accumulates(pg, model_id):
    day = date(2026, 11, 3)
    first = [
        {
            "day": day.isoformat(),
            "calls": 1,
            "input_tokens": 9000,
            "output_tokens": 80,
            "throttled": 0,
            "failures": 0,
        },
        {
            "day": day.isoformat(),
            "calls": 3,
            "input_tokens": 9100,
            "output_tokens": 85,
            "throttled": 2,
            "failures": 0,
        },
        {
            "day": day.isoformat(),
            "calls": 4,
            "input_tokens": 0,
            "output_tokens": 0,
            "throttled": 4,
            "failures": 1,
        },
    ]
    assert record_usage(pg, model_id, first) == 1
    assert rows(pg, model_id) == [(day, model_id, 8, 18100, 165, 6, 1)]

    # a second batch the same day adds to the row; another day / model get their own rows
    second = [
        {
            "day": day.isoformat(),
            "calls": 2,
            "input_tokens": 18000,
            "output_tokens": 150,
            "throttled": 0,
            "failures": 0,
        },
        {
            "day": "2026-11-04",
            "calls": 1,
            "input_tokens": 10,
            "output_tokens": 5,
            "throttled": 0,
            "failures": 0,
        },
        {
            "day": day.isoformat(),
            "model_id": model_id + "-b",
            "calls": 1,
            "input_tokens": 7,
            "output_tokens": 3,
            "throttled": 0,
            "failures": 0,
        },
        None,
    ]
    assert record_usage(pg, model_id, second) == 3
    assert rows(pg, model_id) == [
        (day, model_id, 10, 36100, 315, 6, 1),
        (day, model_id + "-b", 1, 7, 3, 0, 0),
        (date(2026, 11, 4), model_id, 1, 10, 5, 0, 0),
    ]
    assert record_usage(pg, model_id, []) == 0


def test_ledger_from_classifier_results(pg, model_id):
    """What the DAG does: classify a batch, then record the results' usage."""
    from botocore.exceptions import ClientError

    throttle = ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "Converse")
    good = json.dumps({"theme_l1": "03", "theme_l2": "03.02", "theme_l3": "03.02.01", "summary": "Resumo."})

    fake = FakeClient(
        converse_response(good, input_tokens=9000, output_tokens=70, latency=900),
        throttle,
        converse_response(good, input_tokens=9100, output_tokens=75, latency=900),
        converse_response('{"theme_l1": "99"}', input_tokens=9050, output_tokens=20, latency=900),
    )

    clf = BedrockClassifier(load_taxonomy(), client=fake, model_id=model_id, sleep=lambda s: None)
    article = ArticleText("u1", "Vacinação contra a dengue é ampliada", content="Texto.")
    results = clf.classify_batch([article, article, article])
    assert [r.ok for r in results] == [True, True, False]

    record_usage(pg, model_id, results)
    [(day, mid, calls, inp, out, throttled, failures)] = rows(pg, model_id)
    assert mid == model_id and day == results[0].enriched_at.date()
    assert (calls, inp, out, throttled, failures) == (4, 27150, 165, 1, 1)
