"""RedriveOperator.execute against the real PostgreSQL and the Pub/Sub emulator (the Airflow
connections of the test environment: dgb_db -> the test database, google_cloud_default -> a fresh
emulator project)."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from dgb import db, topology

pytestmark = pytest.mark.stack


@pytest.fixture
def project(pg, pubsub_server, monkeypatch):
    """A fresh emulator project with the declared topology, as the operators' GCP connection."""
    name = f"dgb-ops-{uuid.uuid4().hex[:8]}"
    topology.apply(name)
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT",
        json.dumps({"conn_type": "google_cloud_platform", "extra": {"is_anonymous": True, "project": name}}),
    )
    return name


def _rows(conn, sql: str, *args) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(sql, args or None)
        rows = cur.fetchall()
    conn.commit()
    return rows


def test_redrive_operator_republishes_and_records_trigger_rejects(pg, project):
    from google.cloud import pubsub_v1

    from dgb_airflow.operators.reconcile import RedriveOperator

    trace = str(uuid.uuid4())
    with db.transaction(pg) as cur:
        cur.execute(
            "INSERT INTO news (unique_id, agency_key, title, url, published_at, scraped_at,"
            " trace_id) VALUES ('art-1', 'mec', 't', %s, now(), now(), %s)",
            ("https://www.gov.br/mec/art-1", trace),
        )
        cur.execute(
            "INSERT INTO dead_letters (subscription, message_key, unique_id, trace_id, reason,"
            " payload) VALUES (%s, 'art-1', 'art-1', %s, 'retries_exhausted', '{}') RETURNING id",
            (topology.SUB_ENRICHMENT, trace),
        )
        letter = cur.fetchone()[0]
    # a message the trigger rejected, waiting on the subscription's dead-letter topic
    sub = topology.subscription(topology.SUB_ENRICHMENT)
    pubsub_v1.PublisherClient().publish(
        f"projects/{project}/topics/{sub.dead_letter_topic}",
        b"not json{",
        unique_id="poison-1",
        dgb_dead_letter_reason="malformed_json",
        dgb_source_message_id="m-9",
    ).result(timeout=10)

    op = RedriveOperator(task_id="redrive")
    out = op.execute({"params": {"reason": "retries_exhausted", "limit": 10}, "run_id": "manual__t1"})

    assert out["selected"] == 1 and [r["id"] for r in out["redriven"]] == [letter]
    assert out["redriven"][0]["topic"] == topology.TOPIC_SCRAPED and out["relay"]["published"] == 1
    status, resolution = _rows(pg, "SELECT status, resolution FROM dead_letters WHERE id = %s", letter)[0]
    assert status == "redriven" and resolution.startswith("redriven by airflow manual__t1")
    # the re-sent event left through the outbox to the emulator, with the article's trace_id
    assert _rows(pg, "SELECT count(*) FROM outbox WHERE published_at IS NULL") == [(0,)]
    subscriber = pubsub_v1.SubscriberClient()
    path = f"projects/{project}/subscriptions/{topology.SUB_ENRICHMENT}"
    got: list = []
    deadline = time.monotonic() + 20
    while not got and time.monotonic() < deadline:
        resp = subscriber.pull(request={"subscription": path, "max_messages": 10}, timeout=5)
        got = list(resp.received_messages)
    assert [json.loads(m.message.data)["unique_id"] for m in got] == ["art-1"]
    attrs = got[0].message.attributes
    assert attrs["trace_id"] == trace and attrs["dgb_source"] == "redrive"
    # and the trigger's reject was brought into dead_letters (what failed with AttributeError before)
    recorded = _rows(
        pg, "SELECT subscription, unique_id, reason, status FROM dead_letters WHERE message_id = 'm-9'"
    )
    assert recorded == [(topology.SUB_ENRICHMENT, "poison-1", "malformed_json", "open")]


def test_redrive_operator_dry_run_changes_nothing(pg, project):
    from dgb_airflow.operators.reconcile import RedriveOperator

    with db.transaction(pg) as cur:
        cur.execute(
            "INSERT INTO news (unique_id, agency_key, title, url, published_at, scraped_at)"
            " VALUES ('art-2', 'mec', 't', 'https://www.gov.br/mec/art-2', now(), now())"
        )
        cur.execute(
            "INSERT INTO dead_letters (subscription, message_key, unique_id, reason)"
            " VALUES (%s, 'art-2', 'art-2', 'unknown_id')",
            (topology.SUB_ENRICHMENT,),
        )
    out = RedriveOperator(task_id="redrive").execute({"params": {"dry_run": True}})
    assert out["dry_run"] and out["selected"] == 1 and len(out["redriven"]) == 1 and out["relay"] is None
    assert _rows(pg, "SELECT status FROM dead_letters") == [("open",)]
    assert _rows(pg, "SELECT count(*) FROM outbox") == [(0,)]
    assert _rows(pg, "SELECT count(*) FROM reconcile_runs") == [(0,)]
    with pytest.raises(ValueError, match="ids"):
        RedriveOperator(task_id="redrive").execute({"params": {"ids": ["1"]}})


def test_a_retry_of_the_same_run_reports_the_committed_redrive_instead_of_the_next_batch(pg, project):
    """The redrive and its reconcile_runs row commit together under the DAG run's key: a retry of
    the task after that commit (a worker lost while relaying) redrives nothing more."""
    from dgb_airflow.operators.reconcile import RedriveOperator

    with db.transaction(pg) as cur:
        for uid in ("art-a", "art-b"):
            cur.execute(
                "INSERT INTO news (unique_id, agency_key, title, url, published_at, scraped_at)"
                " VALUES (%s, 'mec', 't', %s, now(), now())",
                (uid, f"https://www.gov.br/mec/{uid}"),
            )
            cur.execute(
                "INSERT INTO dead_letters (subscription, message_key, unique_id, reason)"
                " VALUES (%s, %s, %s, 'retries_exhausted')",
                (topology.SUB_ENRICHMENT, uid, uid),
            )
    ctx = {"params": {"limit": 1}, "run_id": "manual__r1"}
    first = RedriveOperator(task_id="redrive").execute(ctx)
    assert [r["unique_id"] for r in first["redriven"]] == ["art-a"] and not first["already_done"]
    again = RedriveOperator(task_id="redrive").execute(ctx)  # Airflow's retry of the same run
    assert again["already_done"] and again["run_id"] == first["run_id"]
    assert [r["unique_id"] for r in again["redriven"]] == ["art-a"]
    assert _rows(pg, "SELECT unique_id, status FROM dead_letters ORDER BY unique_id") == [
        ("art-a", "redriven"),
        ("art-b", "open"),
    ]
    assert _rows(pg, "SELECT count(*) FROM reconcile_runs WHERE mode = 'redrive'") == [(1,)]
    # another run redrives the next one
    other = RedriveOperator(task_id="redrive").execute({"params": {"limit": 1}, "run_id": "manual__r2"})
    assert [r["unique_id"] for r in other["redriven"]] == ["art-b"]
