"""StageOperator (dgb_airflow.operators.stage): ``execute`` runs enrich -> embed -> index over the
messages of its triggering asset events, on the real stack: PostgreSQL, the Pub/Sub emulator,
the resident model service (a subprocess on a free loopback port) and Typesense."""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
import uuid
from types import SimpleNamespace

import pytest

from dgb import outbox, topology
from dgb.fetch import Fetcher
from dgb.scraper.run import scrape_agency
from dgb_airflow.operators.stage import StageOperator
from dgb_airflow.triggers.pubsub import raw_batch, raw_event
from tests.support.airflow_context import task_context
from tests.support.articles import ARTICLES, mirrored_agency
from tests.support.fetch import FAST
from tests.support.model_service import served_by_cli
from tests.support.pubsub import pull_all

MODEL_TOKEN = secrets.token_urlsafe(24)  # the model service's bearer token in this module


@pytest.fixture(scope="module")
def model_service(tmp_path_factory):
    """``dgb model serve`` with the bundled model, until the module's tests are done: its port."""
    log_path = tmp_path_factory.mktemp("model-service") / "service.log"
    with served_by_cli(log_path, MODEL_TOKEN) as url:
        yield int(url.rsplit(":", 1)[1])


@pytest.fixture
def stack_env(monkeypatch, model_service, typesense_server):
    """Connections at the model service and a fresh Typesense alias; the classifier is local."""
    from dataclasses import replace

    from dgb.search import schema

    monkeypatch.setenv(
        "AIRFLOW_CONN_DGB_MODEL_SERVICE",
        json.dumps(
            {
                "conn_type": "http",
                "host": "127.0.0.1",
                "port": model_service,
                "schema": "http",
                "password": MODEL_TOKEN,  # the service's bearer token, as the stack's connection has it
            }
        ),
    )
    alias = f"t_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("DGB_TYPESENSE_COLLECTION", alias)
    monkeypatch.setenv("DGB_CLASSIFIER", "local")
    s = replace(typesense_server, typesense_collection=alias, embedding_dim=512)
    ts = schema.client(s)
    schema.ensure_collection(s, ts)
    yield SimpleNamespace(ts=ts, alias=alias)
    target = ts.aliases[alias].retrieve()["collection_name"]
    ts.aliases[alias].delete()
    ts.collections[target].delete()


def _asset_events(project: str, subscription: str, want: int) -> dict:
    """Messages of ``subscription`` as Airflow hands them to the run (the shape
    ``context["triggering_asset_events"]`` has): the first in an asset event of its own as events
    stored before pulled batches held one message, the others in one batch as the trigger sends
    them now; the run reads both."""
    received = pull_all(project, subscription, want)
    assert len(received) == want >= 2
    asset = SimpleNamespace(name=subscription)
    events = [
        SimpleNamespace(asset=asset, extra={"payload": raw_event(received[0])}),
        SimpleNamespace(asset=asset, extra={"payload": raw_batch(received[1:])}),
    ]
    return {subscription: events}


def _count(conn, sql: str) -> int:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchone()[0]


def _scraped_and_relayed(pg, mirror, project) -> list[str]:
    """The local site's articles scraped (rows and scraped events committed), the themes loaded and
    the outbox relayed to the emulator: the new articles' ids."""
    from google.cloud import pubsub_v1

    from dgb import db
    from dgb.taxonomy import load_taxonomy, themes_rows

    _site, _server, base = mirror(ARTICLES)
    with Fetcher(FAST) as f:
        new = scrape_agency(pg, mirrored_agency(base, "mec"), f).new
    db.upsert_themes(pg, themes_rows(load_taxonomy()))
    outbox.relay(pg, pubsub_v1.PublisherClient(), project)
    return new


def test_stages_enrich_embed_index_from_their_triggering_events(pg, mirror, project, stack_env):
    n = len(_scraped_and_relayed(pg, mirror, project))

    ctx = task_context(triggering_asset_events=_asset_events(project, topology.SUB_ENRICHMENT, n))
    out = StageOperator(task_id="enrich", stage="enrich", sweep_limit=0).execute(ctx)
    assert out["processed"] == n
    assert _count(pg, "SELECT count(*) FROM news WHERE enriched_at IS NOT NULL") == n
    assert outbox.pending_count(pg) == 0  # relayed right after the commit

    ctx = task_context(triggering_asset_events=_asset_events(project, topology.SUB_EMBEDDINGS, n))
    out = StageOperator(task_id="embed", stage="embed", sweep_limit=0).execute(ctx)
    assert out["processed"] == n
    assert _count(pg, "SELECT count(*) FROM news WHERE array_length(content_embedding, 1) = 512") == n

    events = _asset_events(project, topology.SUB_TYPESENSE, n)
    events.update(_asset_events(project, topology.SUB_TYPESENSE_UPDATE, n))
    out = StageOperator(task_id="index", stage="index", sweep_limit=0).execute(
        task_context(triggering_asset_events=events)
    )
    assert out["processed"] == n
    assert stack_env.ts.collections[stack_env.alias].retrieve()["num_documents"] == n
    assert _count(pg, "SELECT count(*) FROM news WHERE indexed_version = version") == n


def test_a_manual_run_takes_unique_ids_and_refuses_bad_conf(pg, mirror, project, stack_env):
    _site, _server, base = mirror(ARTICLES)
    with Fetcher(FAST) as f:
        new = scrape_agency(pg, mirrored_agency(base, "mec"), f).new
    out = StageOperator(task_id="enrich", stage="enrich", sweep_limit=0).execute(
        task_context(conf={"unique_ids": new[:1]})
    )
    assert out["processed"] == 1
    with pytest.raises(ValueError, match="unique_ids"):
        StageOperator(task_id="enrich", stage="enrich").execute(task_context(conf={"unique_ids": "x"}))


def test_model_service_down_on_every_try_dead_letters_nothing(pg, mirror, project, stack_env, monkeypatch):
    """The outage path through ``execute``: retryable while tries remain; the last try ends
    normally with the work still pending; nothing is dead-lettered; after recovery it completes."""
    from dgb import db
    from dgb.pipeline.report import StageRetry
    from dgb.taxonomy import load_taxonomy, themes_rows

    _site, _server, base = mirror(ARTICLES)
    with Fetcher(FAST) as f:
        new = scrape_agency(pg, mirrored_agency(base, "mec"), f).new
    db.upsert_themes(pg, themes_rows(load_taxonomy()))
    up = os.environ["AIRFLOW_CONN_DGB_MODEL_SERVICE"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing listens there once closed
    monkeypatch.setenv(
        "AIRFLOW_CONN_DGB_MODEL_SERVICE",
        json.dumps({"conn_type": "http", "host": "127.0.0.1", "port": closed, "schema": "http"}),
    )
    op = StageOperator(task_id="enrich", stage="enrich", retries=2)
    with pytest.raises(StageRetry):
        op.execute(task_context(try_number=1))
    out = op.execute(task_context(try_number=3))  # the last try
    assert out["processed"] == 0 and out["dead_lettered"] == 0
    assert out["sweeps"] == 0  # an outage: the run does not linger
    assert _count(pg, "SELECT count(*) FROM dead_letters") == 0
    assert _count(pg, "SELECT count(*) FROM news WHERE hold_stage IS NOT NULL OR problem IS NOT NULL") == 0

    monkeypatch.setenv("AIRFLOW_CONN_DGB_MODEL_SERVICE", up)
    monkeypatch.setenv("DGB_BREAKER_COOLDOWN_S", "0")  # the probe may go at once
    monkeypatch.setenv("DGB_STAGE_LINGER_S", "1")
    t0 = time.monotonic()
    out = op.execute(task_context(try_number=1))
    assert out["processed"] == len(new) and out["dead_lettered"] == 0
    # once its work was done it went on sweeping (nothing new came) for about DGB_STAGE_LINGER_S
    assert out["sweeps"] >= 1 and time.monotonic() - t0 >= 1
    assert _count(pg, "SELECT count(*) FROM news WHERE enriched_at IS NOT NULL AND attempts = 0") == len(new)


def test_a_stage_woken_by_the_scraped_event_takes_the_work_once_enriched(
    pg, mirror, project, stack_env, monkeypatch
):
    """The embed DAG also runs on the scraped event (dgb.pipeline.dags): its run does none of those
    messages (they are the enrich stage's input: not counted, not skipped, not dead-lettered), waits
    warm, and embeds the articles as soon as the enrich stage commits them."""
    import threading
    from datetime import UTC, datetime

    n = len(_scraped_and_relayed(pg, mirror, project))
    wake = _asset_events(project, topology.SUB_ENRICHMENT, n)
    for ev in wake[topology.SUB_ENRICHMENT]:
        ev.timestamp = datetime.now(UTC)

    def enrich_later() -> None:
        time.sleep(1.0)  # the woken embed run is waiting by then
        StageOperator(task_id="enrich", stage="enrich", linger_s=0).execute(task_context())

    enricher = threading.Thread(target=enrich_later)
    enricher.start()
    try:
        out = StageOperator(task_id="embed", stage="embed", linger_s=5).execute(
            task_context(triggering_asset_events=wake)
        )
    finally:
        enricher.join()
    assert out["messages"] == 0 and out["skipped"] == 0 and out["dead_lettered"] == 0
    assert out["processed"] == n and out["sweeps"] >= 2
    assert _count(pg, "SELECT count(*) FROM news WHERE array_length(content_embedding, 1) = 512") == n
    assert _count(pg, "SELECT count(*) FROM dead_letters") == 0
