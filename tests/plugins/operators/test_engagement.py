"""TrendingOperator and EngagementImportOperator (dgb_airflow.operators.engagement): ``execute``
through the Airflow connections (dgb_db, typesense_default, umami_db) on the real PostgreSQL and
Typesense; the Umami import skips cleanly while its connection does not exist."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from dgb import db
from dgb_airflow.hooks.umami import UmamiHook
from dgb_airflow.operators.engagement import EngagementImportOperator, TrendingOperator
from tests.support.airflow_context import task_context
from tests.support.engagement import add_article, document, ensure_themes, index, make_index
from tests.support.umami import add_event, add_session, add_website, fresh_umami

H = timedelta(hours=1)

# trending runs here use small themes: production's formula alone
pytestmark = pytest.mark.usefixtures("production_trending_formula")


@pytest.fixture
def idx(pg, typesense_server, monkeypatch):
    """A fresh alias, the one the operators use (DGB_TYPESENSE_COLLECTION)."""
    ensure_themes(pg)
    ts, alias, cleanup = make_index(typesense_server)
    monkeypatch.setenv("DGB_TYPESENSE_COLLECTION", alias)
    yield ts, alias
    cleanup()


@pytest.fixture
def published(pg, idx):
    """Two indexed articles of one theme, published 2 and 1 hours ago."""
    ts, alias = idx
    with pg.cursor() as cur:
        cur.execute("SELECT now()")
        now = cur.fetchone()[0]
    pg.rollback()
    add_article(pg, "primeira_aaaaaa", now - 2 * H, "04")
    add_article(pg, "segunda_bbbbbb", now - H, "04")
    index(pg, ts, alias, ["primeira_aaaaaa", "segunda_bbbbbb"])
    return now


def test_trending_operator_scores_and_pushes_in_one_task(pg, idx, published):
    ts, alias = idx
    out = TrendingOperator(task_id="trending").execute(task_context())
    assert (out["live"], out["changed"], out["updated"], out["failed"]) == (2, 2, 2, 0)
    assert sorted(out["changed_sample"]) == ["primeira_aaaaaa", "segunda_bbbbbb"]
    assert document(ts, alias, "segunda_bbbbbb")["trending_score"] == 7.0
    json.dumps(out)  # the XCom is plain JSON


def test_import_skips_without_the_umami_connection(pg, idx, monkeypatch):
    from airflow.sdk.exceptions import AirflowSkipException

    monkeypatch.delenv("AIRFLOW_CONN_UMAMI_DB", raising=False)
    assert not UmamiHook().configured()
    with pytest.raises(AirflowSkipException, match="umami_db"):
        EngagementImportOperator(task_id="import_views").execute(task_context())
    with pg.cursor() as cur:
        cur.execute("SELECT count(*) FROM engagement_runs")
        assert cur.fetchone()[0] == 0  # nothing ran


def test_import_reads_umami_through_its_connection(pg, pg_server, idx, published, monkeypatch):
    ts, alias = idx
    dsn = fresh_umami(pg_server)
    umami = db.connect(dsn)
    site = add_website(umami)
    sess = add_session(umami, site)
    for _ in range(3):
        add_event(umami, site, sess, "/artigos/segunda_bbbbbb", published - 0.5 * H)
    umami.close()
    monkeypatch.setenv("AIRFLOW_CONN_UMAMI_DB", dsn)
    monkeypatch.setenv("DGB_UMAMI_WEBSITE_ID", site)

    hook = UmamiHook()
    conn = hook.get_conn()
    assert hook.configured() and conn.read_only
    conn.close()
    out = EngagementImportOperator(task_id="import_views").execute(task_context())
    assert (out["matched"], out["changed"], out["updated"]) == (1, 1, 1)
    assert document(ts, alias, "segunda_bbbbbb")["view_count"] == 3
    assert "view_count" not in document(ts, alias, "primeira_aaaaaa")
