"""ScrapeAgencyOperator (dgb_airflow.operators.scrape), and OutboxRelayOperator after it:
``execute`` on the real stack: the local gov.br site, PostgreSQL and the Pub/Sub emulator."""

from __future__ import annotations

import json

import pytest

from dgb import topology
from dgb_airflow.operators.outbox import OutboxRelayOperator
from dgb_airflow.operators.scrape import ScrapeAgencyOperator
from tests.support.airflow_context import task_context
from tests.support.articles import ARTICLES
from tests.support.pubsub import pull_all

MEC = [a for a in ARTICLES if a[0] == "mec"]


@pytest.fixture
def site(mirror, monkeypatch):
    _site, server, base = mirror(ARTICLES)
    monkeypatch.setenv("DGB_SOURCE_MODE", "mirror")
    monkeypatch.setenv("DGB_MIRROR_URL", base)
    monkeypatch.setenv("DGB_FETCH_MIN_INTERVAL", "0")
    monkeypatch.setenv("DGB_HOST_RPS", "100")  # the host budget's 2/s is tested in test_hostbudget
    monkeypatch.setenv("DGB_FETCH_RETRIES", "0")
    return server


def _count(conn, sql: str) -> int:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchone()[0]


def test_scrape_stores_articles_and_relays_their_events_at_once(pg, project, site):
    op = ScrapeAgencyOperator(task_id="scrape_mec", agency_keys=["mec"])
    reports = op.execute(task_context(run_id="scheduled__1"))
    assert [(r["agency"], r["status"], r["new"]) for r in reports] == [("mec", "success", len(MEC))]
    assert _count(pg, "SELECT count(*) FROM news WHERE agency_key = 'mec'") == len(MEC)
    assert _count(pg, "SELECT count(*) FROM outbox WHERE published_at IS NULL") == 0  # relayed
    got = pull_all(project, topology.SUB_ENRICHMENT, len(MEC))
    assert len(got) == len(MEC)
    # a second run finds nothing new and publishes nothing
    again = op.execute(task_context())
    assert again[0]["new"] == 0 and pull_all(project, topology.SUB_ENRICHMENT, 1, timeout=2) == []


def test_scrape_fails_only_when_every_agency_failed_on_the_network(pg, project, site):
    site.faults.add({"path_prefix": "/www.gov.br/mec/", "fault": "503", "count": None})
    with pytest.raises(RuntimeError, match="every agency failed on the network"):
        ScrapeAgencyOperator(task_id="scrape_mec", agency_keys=["mec"]).execute(task_context())
    assert _count(pg, "SELECT count(*) FROM scrape_runs WHERE status = 'failed'") == 1


def test_scrape_refuses_bad_params(pg, site):
    with pytest.raises(ValueError, match="start_date"):
        ScrapeAgencyOperator(task_id="s", agency_keys=["mec"]).execute(task_context(conf={"start_date": "x"}))


def test_relay_operator_publishes_what_a_scrape_left_and_reports_pending(pg, project, site, monkeypatch):
    # scrape with no such GCP connection: the relay after it fails, the rows stay in the outbox
    ScrapeAgencyOperator(task_id="s", agency_keys=["mec"], gcp_conn_id="missing").execute(task_context())
    assert _count(pg, "SELECT count(*) FROM outbox WHERE published_at IS NULL") == len(MEC)
    out = OutboxRelayOperator(task_id="relay_outbox", batch_size=2).execute(task_context())
    assert out == {"published": len(MEC), "pending": 0, "failed": 0, "purged": 0}
    assert len(pull_all(project, topology.SUB_ENRICHMENT, len(MEC))) == len(MEC)


def test_relay_operator_fails_when_a_publish_failed(pg, project, site, monkeypatch):
    ScrapeAgencyOperator(task_id="s", agency_keys=["mec"], gcp_conn_id="missing").execute(task_context())
    # a project without the topics: every publish fails, the task fails to be retried
    monkeypatch.setenv(
        "AIRFLOW_CONN_EMPTY_PROJECT",
        json.dumps(
            {"conn_type": "google_cloud_platform", "extra": {"is_anonymous": True, "project": "dgb-empty"}}
        ),
    )
    with pytest.raises(RuntimeError, match="outbox relay"):
        OutboxRelayOperator(task_id="relay_outbox", gcp_conn_id="empty_project").execute(task_context())
    assert _count(pg, "SELECT count(*) FROM outbox WHERE published_at IS NULL") == len(MEC)


def test_dispatch_polls_due_agencies_and_emits_the_due_assets_of_those_with_news(pg, site, monkeypatch):
    from airflow.sdk import AssetAlias
    from airflow.sdk.execution_time.context import OutletEventAccessors

    from dgb_airflow.operators.scrape import ScrapeDispatchOperator

    monkeypatch.setenv("DGB_SCRAPE_AGENCIES", "mec,mulheres")
    ScrapeAgencyOperator(task_id="scrape_mec", agency_keys=["mec"]).execute(task_context())  # mec stored

    def tick() -> tuple[dict, list[str]]:
        context = {**task_context(), "outlet_events": OutletEventAccessors()}
        result = ScrapeDispatchOperator(task_id="dispatch").execute(context)
        events = context["outlet_events"][AssetAlias("dgb_scrape_due")].asset_alias_events
        return result, [e.dest_asset_key.name for e in events]

    result, emitted = tick()
    # mulheres was never polled and has news; mec was just scraped (its run is its last poll)
    assert result["polled"] == 1 and emitted == ["scrape_mulheres_due"]
    assert result["started"] == ["scrape_mulheres"]
    result, emitted = tick()  # a moment later nobody is due: polled, not polled again
    assert (result["polled"], emitted) == (0, [])
    assert _count(pg, "SELECT count(*) FROM scrape_cadence") == 2
