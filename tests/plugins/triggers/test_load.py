"""The load trigger (dgb_airflow.triggers.load), run directly against the real PostgreSQL: it keeps
waiting while the event pipeline has a backlog, then fires once the backlog is gone; it gives up
after its maximum wait."""

from __future__ import annotations

import asyncio
import json

import pytest

from dgb import db
from dgb_airflow.triggers.load import TRIGGER_PATH, PipelineLoadTrigger

LOADED = {"outbox_max_age_s": 60, "backlog_threshold": 0, "max_active": 0, "max_lock_waits": 0}


def _stale_outbox_row(pg) -> None:
    with db.transaction(pg) as cur:
        cur.execute("UPDATE outbox SET published_at = now()")
        cur.execute(
            "INSERT INTO outbox (topic, aggregate_id, payload, created_at) VALUES"
            " ('dgb.news.scraped', 'load-test', '{}', now() - interval '5 minutes')"
        )


def _publish_outbox(dsn: str) -> None:
    conn = db.connect(dsn)
    try:
        with db.transaction(conn) as cur:
            cur.execute("UPDATE outbox SET published_at = now() WHERE published_at IS NULL")
    finally:
        conn.close()


def test_serialize_round_trips():
    trigger = PipelineLoadTrigger(poll_interval=5, max_wait_s=60, thresholds=LOADED)
    path, kwargs = trigger.serialize()
    assert path == TRIGGER_PATH == f"{PipelineLoadTrigger.__module__}.{PipelineLoadTrigger.__qualname__}"
    assert json.loads(json.dumps(kwargs)) == kwargs
    again = PipelineLoadTrigger(**kwargs)
    assert again.serialize() == (path, kwargs)


def test_trigger_waits_while_the_pipeline_is_behind_then_fires(pg, pg_server):
    _stale_outbox_row(pg)
    trigger = PipelineLoadTrigger(poll_interval=0.1, thresholds=LOADED)

    async def scenario():
        stream = trigger.run()
        first = asyncio.ensure_future(stream.__anext__())
        for _ in range(600):  # let it poll (and find the backlog) three times
            if trigger.polls >= 3:
                break
            await asyncio.sleep(0.05)
        waited_polls = trigger.polls
        still_waiting = not first.done()
        await asyncio.to_thread(_publish_outbox, pg_server.pg_dsn())
        event = await asyncio.wait_for(first, timeout=60)
        return waited_polls, still_waiting, event

    waited_polls, still_waiting, event = asyncio.run(scenario())
    assert waited_polls >= 3 and still_waiting  # it waited: no event while the backlog was there
    assert event.payload["status"] == "clear"
    assert event.payload["polls"] > waited_polls - 1 and "outbox" in event.payload["last_reason"]


def test_trigger_gives_up_after_its_maximum_wait(pg):
    _stale_outbox_row(pg)
    trigger = PipelineLoadTrigger(poll_interval=0.05, max_wait_s=0.2, thresholds=LOADED)

    async def first_event():
        return await asyncio.wait_for(trigger.run().__anext__(), timeout=60)

    event = asyncio.run(first_event())
    assert event.payload["status"] == "timeout" and event.payload["polls"] >= 2
    assert "outbox" in event.payload["last_reason"]


@pytest.fixture(autouse=True)
def _published_afterwards(pg):
    yield
    with db.transaction(pg) as cur:
        cur.execute("UPDATE outbox SET published_at = now() WHERE published_at IS NULL")
