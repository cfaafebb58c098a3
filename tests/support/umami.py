"""An Umami analytics database for the view-count tests: Umami's real tables (the DDL in
tests/fixtures/umami/schema.sql) in a database of its own on the test PostgreSQL server, and
pageviews written as Umami's tracker writes them (a session row, then one website_event row per
view)."""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path

from dgb import db

SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "umami" / "schema.sql"
PAGEVIEW, CUSTOM_EVENT = 1, 2


def fresh_umami(settings) -> str:
    """A database ``<test db>_umami`` holding Umami's empty tables; returns its DSN."""
    from dgb_dev import stack

    name = f"{settings.pg_db}_umami"
    stack.ensure_database(stack.Postgres(settings), name)
    dsn = settings.pg_dsn(name)
    conn = db.connect(dsn, autocommit=True)
    try:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")
        conn.execute(SCHEMA.read_text(encoding="utf-8"))
    finally:
        conn.close()
    return dsn


def add_website(conn, domain: str = "destaques.gov.br") -> str:
    site = str(uuid.uuid4())
    conn.execute("INSERT INTO website (website_id, name, domain) VALUES (%s, %s, %s)", (site, domain, domain))
    conn.commit()
    return site


def add_session(conn, website: str) -> str:
    session = str(uuid.uuid4())
    conn.execute(
        "INSERT INTO session (session_id, website_id, browser, os, device, country)"
        " VALUES (%s, %s, 'firefox', 'Linux', 'desktop', 'BR')",
        (session, website),
    )
    conn.commit()
    return session


def add_event(
    conn,
    website: str,
    session: str,
    path: str,
    at: datetime,
    *,
    event_type: int = PAGEVIEW,
    query: str | None = None,
) -> None:
    conn.execute(
        "INSERT INTO website_event (event_id, website_id, session_id, visit_id, created_at, url_path,"
        " url_query, page_title, event_type, event_name, hostname)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, 'Notícia', %s, %s, 'destaques.gov.br')",
        (
            str(uuid.uuid4()),
            website,
            session,
            str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session}/{at:%Y%m%d%H}")),
            at,
            path,
            query,
            event_type,
            "share" if event_type == CUSTOM_EVENT else None,
        ),
    )
    conn.commit()
