"""The DGB UI app of the Airflow UI: one FastAPI app (mounted by the plugin in
``plugins/dgb_airflow_plugins.py`` under ``/dgb-integrity``) serving the integrity page
(:mod:`dgb_airflow.ui.integrity`), the pipeline view (:mod:`dgb_airflow.ui.pipeline`) and
``GET /health`` (liveness).

Data comes from PostgreSQL through the ``dgb_db`` Airflow connection, read with the postgres
provider's hook (falling back to the ``DGB_PG_*`` settings). Inside the API server the routes
require an authenticated Airflow user (the UI's session cookie or a bearer token), like the rest
of the UI.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import Depends, FastAPI, HTTPException

from dgb.config.ui import ui_require_auth
from dgb_airflow.ui.integrity import router as integrity_router
from dgb_airflow.ui.pipeline import router as pipeline_router

log = logging.getLogger(__name__)

UI_CONN_ID = "dgb_db"


def default_dsn() -> str:
    """Conninfo of the ``dgb_db`` Airflow connection (resolved by the postgres provider's hook,
    encoded by psycopg), else of the DGB_PG_* settings (outside Airflow, or no such connection)."""
    try:
        from airflow.providers.postgres.hooks.postgres import PostgresHook
        from psycopg.conninfo import make_conninfo

        hook = PostgresHook(postgres_conn_id=UI_CONN_ID)
        c = hook.connection
        if c.host:
            return make_conninfo(
                host=c.host,
                port=c.port or 5432,
                user=c.login or None,
                password=c.password or None,
                dbname=hook.database or c.schema or "dgb",
            )
    except Exception as exc:
        log.debug("%s connection unavailable (%s); using DGB_PG_* settings", UI_CONN_ID, exc)
    from dgb.config import Settings

    return Settings.from_env().pg_dsn()


def default_connect():
    from dgb import db

    return db.connect(default_dsn(), connect_timeout=5)


def _auth_dependencies(require_auth: bool) -> list:
    """The routes' auth: Airflow's ``get_user`` (401/403 for anonymous requests). FAILS CLOSED:
    when Airflow's auth cannot be imported, every route answers 503 and serves no data (only an
    explicit ``require_auth=False`` / ``DGB_UI_REQUIRE_AUTH=0`` opens the page)."""
    if not require_auth:
        return []
    try:
        from airflow.api_fastapi.core_api.security import get_user
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
        log.error("dgb integrity UI: Airflow auth unavailable (%s); refusing every request", reason)

        def auth_unavailable() -> None:
            raise HTTPException(
                status_code=503,
                detail="authentication unavailable: the integrity page is closed until Airflow's auth loads",
            )

        return [Depends(auth_unavailable)]
    return [Depends(get_user)]


def create_app(connect: Callable[[], Any] | None = None, *, require_auth: bool | None = None) -> FastAPI:
    """The DGB UI app: the integrity page and the pipeline view. ``connect`` returns a psycopg
    connection (default: the ``dgb_db`` connection's database)."""
    connect = connect or default_connect
    if require_auth is None:
        require_auth = ui_require_auth()
    app = FastAPI(
        title="DGB integrity",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        dependencies=_auth_dependencies(require_auth),
    )

    app.include_router(integrity_router(connect))  # GET /, /api/report
    app.include_router(pipeline_router(connect))  # GET /pipeline, /api/pipeline (issue 14)

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", "service": "dgb-integrity-ui"}

    return app
