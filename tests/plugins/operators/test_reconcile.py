"""ReconcileOperator and ReplayOperator (dgb_airflow.operators.reconcile): ``execute`` on PostgreSQL,
the Pub/Sub emulator and Typesense: stuck work is re-announced through the outbox and relayed at
once; a seek replay runs the consuming stage on a new subscription. (RedriveOperator:
test_reconcile_redrive.py.)"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from dgb import db, outbox, topology
from dgb.fetch import Fetcher
from dgb.scraper.run import scrape_agency
from dgb_airflow.operators.reconcile import ReconcileOperator, ReplayOperator
from tests.support.airflow_context import task_context
from tests.support.articles import ARTICLES, mirrored_agency
from tests.support.fetch import FAST
from tests.support.pubsub import pull_all

MEC = [a for a in ARTICLES if a[0] == "mec"]


@pytest.fixture
def scraped(pg, mirror, project):
    """mec's articles scraped, their scraped events published (and consumed by nobody)."""
    _site, _server, base = mirror(ARTICLES)
    with Fetcher(FAST) as f:
        report = scrape_agency(pg, mirrored_agency(base, "mec"), f)
    from google.cloud import pubsub_v1

    outbox.relay(pg, pubsub_v1.PublisherClient(), project)
    pull_all(project, topology.SUB_ENRICHMENT, len(report.new))
    return report.new


def test_mode_is_checked_when_the_dag_is_built():
    with pytest.raises(ValueError, match="mode must be"):
        ReconcileOperator(task_id="r", mode="hourly")


def test_reconcile_re_announces_stuck_articles_and_relays(pg, scraped, project):
    out = ReconcileOperator(task_id="reconcile_sweep", mode="sweep").execute(
        task_context(conf={"older_than_s": 0, "drift": False})
    )
    assert out["relay"] == {"published": len(scraped), "failed": 0}
    with pg.cursor() as cur:
        cur.execute("SELECT mode FROM reconcile_runs")
        assert [r[0] for r in cur.fetchall()] == ["sweep"]
    got = pull_all(project, topology.SUB_ENRICHMENT, len(scraped))
    assert sorted(m.message.attributes["unique_id"] for m in got) == sorted(scraped)


def test_reconcile_dry_run_changes_nothing(pg, scraped, project):
    out = ReconcileOperator(task_id="reconcile_daily", mode="daily").execute(
        task_context(conf={"older_than_s": 0, "drift": False, "dry_run": True})
    )
    assert out["relay"] is None and outbox.pending_count(pg) == 0
    assert pull_all(project, topology.SUB_ENRICHMENT, 1, timeout=2) == []


def test_replay_republishes_a_window_from_postgresql(pg, scraped, project):
    now = datetime.now(UTC)
    conf = {
        "start": (now - timedelta(hours=1)).isoformat(),
        "end": (now + timedelta(minutes=1)).isoformat(),
        "topic": topology.TOPIC_SCRAPED,
    }
    out = ReplayOperator(task_id="replay_events").execute(task_context(conf=conf))
    assert out["enqueued"] == len(scraped) and out["relay"] == {"published": len(scraped), "failed": 0}
    assert len(pull_all(project, topology.SUB_ENRICHMENT, len(scraped))) == len(scraped)
    with pytest.raises(ValueError, match="start"):
        ReplayOperator(task_id="replay_events").execute(task_context(conf={"end": conf["end"]}))


@pytest.fixture
def index_alias(typesense_server, monkeypatch):
    """A fresh Typesense alias for the index stage (the typesense_default connection's server)."""
    from dataclasses import replace

    from dgb.search import schema

    alias = f"t_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("DGB_TYPESENSE_COLLECTION", alias)
    s = replace(typesense_server, typesense_collection=alias)
    ts = schema.client(s)
    schema.ensure_collection(s, ts)
    yield SimpleNamespace(ts=ts, alias=alias)
    target = ts.aliases[alias].retrieve()["collection_name"]
    ts.aliases[alias].delete()
    ts.collections[target].delete()


def test_replay_seek_runs_the_index_stage_on_a_new_subscription(pg, project, index_alias):
    """The enriched events were consumed (acked) on the index subscription but never indexed: the
    seek replay brings them back on a new subscription made from a snapshot, runs the index stage
    over them, relays, and removes the subscription and the snapshot; the DAGs' subscription is
    not seeked."""
    from google.cloud import pubsub_v1

    from dgb.reconcile import resend
    from dgb.taxonomy import load_taxonomy, themes_rows
    from tests.support.news import add

    db.upsert_themes(pg, themes_rows(load_taxonomy()))
    start = datetime.now(UTC)
    for uid in ("e1", "e2"):
        add(pg, uid, "enriched", age=timedelta(0))
    with db.transaction(pg) as cur:
        rows = resend.load_rows(cur, ["e1", "e2"])
        for uid in ("e1", "e2"):
            outbox.enqueue(cur, resend.event_for(rows[uid], topology.TOPIC_ENRICHED, "test"))
    outbox.relay(pg, pubsub_v1.PublisherClient(), project)
    assert len(pull_all(project, topology.SUB_TYPESENSE, 2)) == 2  # acked, never indexed
    conf = {
        "start": start.isoformat(),
        "end": (datetime.now(UTC) + timedelta(minutes=1)).isoformat(),
        "topic": topology.TOPIC_ENRICHED,
        "mode": "seek",
        "subscription": topology.SUB_TYPESENSE,
    }
    out = ReplayOperator(task_id="replay_events").execute(task_context(conf=conf))
    assert out["mode_used"] == "seek" and out["enqueued"] == 0 and out["fallback_reason"] is None
    [seek] = out["seek"]
    assert seek["stage"] == "index" and seek["in_window"] == 2 and seek["results"][0]["processed"] == 2
    assert index_alias.ts.collections[index_alias.alias].retrieve()["num_documents"] == 2
    with pg.cursor() as cur:
        cur.execute("SELECT count(*) FROM news WHERE indexed_version = version")
        assert cur.fetchone()[0] == 2
    sub = pubsub_v1.SubscriberClient()
    names = [s.name for s in sub.list_subscriptions(request={"project": f"projects/{project}"})]
    assert not [n for n in names if topology.REPLAY_SUFFIX in n]
    assert list(sub.list_snapshots(request={"project": f"projects/{project}"})) == []
    assert pull_all(project, topology.SUB_TYPESENSE, 1, timeout=2) == []


def test_replay_seek_fails_without_pubsub_unless_the_fallback_is_asked(pg, scraped, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_NO_TOPICS",
        '{"conn_type": "google_cloud_platform", "extra": {"is_anonymous": true, "project": "dgb-none"}}',
    )
    now = datetime.now(UTC)
    conf = {"start": (now - timedelta(hours=1)).isoformat(), "end": now.isoformat(), "mode": "seek"}
    from dgb.reconcile.replay import SeekUnavailable

    with pytest.raises(SeekUnavailable, match="cannot read topic"):
        ReplayOperator(task_id="replay_events", gcp_conn_id="no_topics").execute(task_context(conf=conf))
    assert outbox.pending_count(pg) == 0
    out = ReplayOperator(task_id="replay_events", gcp_conn_id="no_topics", relay=False).execute(
        task_context(conf={**conf, "fallback_republish": True})
    )
    assert out["mode_used"] == "republish" and out["enqueued"] == len(scraped) and out["fallback_reason"]


def test_the_cli_and_the_operator_replay_through_the_one_wiring(pg, monkeypatch):
    """``dgb replay`` and the replay_events DAG's operator hand the same ReplayRequest to
    dgb.reconcile.replay.replay_through_stages (replay is wired once)."""
    from dgb.cli import main
    from dgb.reconcile import replay as replay_module

    seen = []
    real = replay_module.replay_through_stages

    def recording(conn, request, build_stage, **clients):
        seen.append(request)
        return real(conn, request, build_stage, **clients)

    monkeypatch.setattr(replay_module, "replay_through_stages", recording)
    now = datetime.now(UTC)
    start, end = (now - timedelta(hours=1)).isoformat(), now.isoformat()
    assert main(["replay", "--start", start, "--end", end, "--limit", "5", "--dry-run", "--no-relay"]) == 0
    conf = {"start": start, "end": end, "limit": 5, "dry_run": True}
    ReplayOperator(task_id="replay_events").execute(task_context(conf=conf))
    assert len(seen) == 2 and seen[0] == seen[1]
    assert seen[0].limit == 5 and seen[0].dry_run and seen[0].mode == "republish"
