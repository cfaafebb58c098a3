"""The DGB UI app (dgb_airflow.ui.app): data through the ``dgb_db`` Airflow connection (the
postgres provider's hook), the integrity page and JSON served from the real database, and the
routes closed to anonymous requests when Airflow auth is on. (Chart contents are checked in
tests/integration/integrity/test_integrity.py and tests/integration/observe/test_pipeline_overview.py.)"""

from __future__ import annotations

import json

import psycopg
import pytest
from fastapi.testclient import TestClient

from dgb_airflow.ui import app as ui


def test_dsn_comes_from_the_dgb_db_connection(monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_DGB_DB",
        json.dumps(
            {
                "conn_type": "postgres",
                "host": "db.internal",
                "port": 6432,
                "login": "reader one",
                "password": "p@ss:w/rd é",
                "schema": "news",
            }
        ),
    )
    parsed = psycopg.conninfo.conninfo_to_dict(ui.default_dsn())
    assert parsed == {
        "host": "db.internal",
        "port": "6432",
        "user": "reader one",
        "password": "p@ss:w/rd é",
        "dbname": "news",
    }


def test_dsn_falls_back_to_the_settings_without_a_connection(monkeypatch, settings):
    monkeypatch.delenv("AIRFLOW_CONN_DGB_DB", raising=False)
    assert ui.default_dsn() == settings.pg_dsn()


def test_default_app_serves_the_report_from_the_connections_database(pg, monkeypatch, pg_server):
    # tests/conftest.py points dgb_db at the test database
    with pg.cursor() as cur:
        cur.execute("SELECT count(*) FROM news")
        articles = cur.fetchone()[0]
    client = TestClient(ui.create_app(require_auth=False))
    assert client.get("/api/report").json()["totals"]["articles"] == articles
    page = client.get("/")
    assert page.status_code == 200 and "<h1>News integrity</h1>" in page.text
    # the connection, not the DGB_PG_* settings, decides: pointed at a missing database, the page says so
    monkeypatch.setenv(
        "AIRFLOW_CONN_DGB_DB",
        json.dumps(
            {
                "conn_type": "postgres",
                "host": pg_server.pg_host,
                "port": pg_server.pg_port,
                "login": pg_server.pg_user,
                "password": pg_server.pg_password,
                "schema": "dgb_no_such_database",
            }
        ),
    )
    resp = TestClient(ui.create_app(require_auth=False)).get("/")
    assert resp.status_code == 503 and "dgb_no_such_database" in resp.text


def test_routes_need_an_airflow_user_when_auth_is_on():
    client = TestClient(ui.create_app(lambda: None, require_auth=True))
    assert client.get("/health").status_code in (401, 403)
    assert TestClient(ui.create_app(lambda: None, require_auth=False)).get("/health").json()["status"] == "ok"


def test_routes_fail_closed_when_airflow_auth_cannot_be_imported(monkeypatch):
    """Auth required but Airflow's security module unimportable: every route refuses with 503
    and the report is never read (no data served unauthenticated)."""
    import sys

    monkeypatch.setitem(sys.modules, "airflow.api_fastapi.core_api.security", None)  # import fails
    reads = []

    def connect():
        reads.append(1)
        raise AssertionError("the report must not be read")

    client = TestClient(ui.create_app(connect, require_auth=True))
    for path in ("/", "/api/report", "/health"):
        resp = client.get(path)
        assert resp.status_code == 503, (path, resp.text)
        assert "authentication unavailable" in resp.json()["detail"]
    assert reads == []


def test_dgb_ui_require_auth_decides_when_not_given(monkeypatch):
    """``DGB_UI_REQUIRE_AUTH`` (dgb.config.ui): on by default, only an explicit off opens the
    routes, and a value that is no flag is refused rather than read as either."""
    monkeypatch.delenv("DGB_UI_REQUIRE_AUTH", raising=False)
    assert TestClient(ui.create_app(lambda: None)).get("/health").status_code in (401, 403)
    for off in ("0", "false", "no", "off"):
        monkeypatch.setenv("DGB_UI_REQUIRE_AUTH", off)
        assert TestClient(ui.create_app(lambda: None)).get("/health").status_code == 200
    monkeypatch.setenv("DGB_UI_REQUIRE_AUTH", "sometimes")
    with pytest.raises(ValueError, match="DGB_UI_REQUIRE_AUTH"):
        ui.create_app(lambda: None)
