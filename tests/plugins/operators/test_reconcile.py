"""ReconcileOperator and ReplayOperator (dgb_airflow.operators.reconcile): ``execute`` on PostgreSQL
and the Pub/Sub emulator: stuck work is re-announced through the outbox and relayed at once.
(RedriveOperator's own test comes with its fix.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dgb import outbox, topology
from dgb.fetch import Fetcher
from dgb.scraper.run import scrape_agency
from dgb_airflow.operators.reconcile import ReconcileOperator, ReplayOperator

from ...integration.support import FAST
from ...integration.test_scrape import ARTICLES, _agency
from ..conftest import pull_all, task_context

MEC = [a for a in ARTICLES if a[0] == "mec"]


@pytest.fixture
def scraped(pg, mirror, project):
    """mec's articles scraped, their scraped events published (and consumed by nobody)."""
    _site, _server, base = mirror(ARTICLES)
    with Fetcher(FAST) as f:
        report = scrape_agency(pg, _agency(base, "mec"), f)
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
