"""The chaos upgrade's migration and evidence against a real PostgreSQL: the migration rewrites
``news`` (a new relfilenode) and keeps every text as it was, under the views that read ``news``;
the outbox tells events of the new version from the others (scripts/faultsuite/chaos_upgrade.py)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))

from faultsuite import chaos_upgrade  # noqa: E402
from faultsuite.plumbing import Db  # noqa: E402

pytestmark = pytest.mark.stack


def test_the_migration_rewrites_news_and_keeps_its_texts(pg, pg_server):
    now = datetime.now(UTC)
    contents = ["Texto com acentuação", "  espaços  ", "x" * 3000, None]
    with pg.cursor() as cur:
        for i, content in enumerate(contents):
            cur.execute(
                "INSERT INTO news (unique_id, agency_key, title, content, url, published_at) VALUES"
                " (%s, 'mec', 'Título', %s, %s, %s)",
                (f"u{i}", content, f"https://www.gov.br/mec/u{i}", now),
            )
    pg.commit()
    db = Db(pg_server.pg_dsn())
    try:
        before = chaos_upgrade.news_filenode(db)
        db.query(chaos_upgrade.REWRITE_SQL)
        rewritten = chaos_upgrade.news_filenode(db)
        assert rewritten != before  # the whole table rewritten
        db.query("ALTER TABLE news ALTER COLUMN content TYPE text USING content")
        assert chaos_upgrade.news_filenode(db) == rewritten  # a no-op USING rewrites nothing
        rows = db.query("SELECT content FROM news ORDER BY unique_id")
        assert [r[0] for r in rows] == contents
        assert db.query(
            "SELECT data_type FROM information_schema.columns"
            " WHERE table_name = 'news' AND column_name = 'content'"
        ) == [("text",)]
    finally:
        db.close()


def test_events_of_the_new_version_are_told_from_the_others(pg, pg_server):
    t = datetime.now(UTC)
    with pg.cursor() as cur:
        for uid, version, published, created in (
            ("a", "1.1", True, t),
            ("b", "1.1", False, t),  # not sent yet: not counted
            ("c", "1.0", True, t),
            ("d", "1.1", True, t - timedelta(minutes=5)),  # before the upgrade
        ):
            cur.execute(
                "INSERT INTO outbox (topic, aggregate_id, payload, attributes, created_at, published_at)"
                " VALUES ('dgb.news.scraped', %s, '{}', jsonb_build_object('event_version', %s::text),"
                " %s, CASE WHEN %s THEN now() END)",
                (uid, version, created, published),
            )
    pg.commit()
    db = Db(pg_server.pg_dsn())
    try:
        assert chaos_upgrade.events_since(db, "1.1", t - timedelta(seconds=1)) == (1, 1)
    finally:
        db.close()
