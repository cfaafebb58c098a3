"""Migrations against a real PostgreSQL: fresh database, applied twice, schema as expected."""

import uuid

import psycopg
import pytest

from dgb import db
from dgb_dev.stack.postgres import Postgres, ensure_database

pytestmark = pytest.mark.stack


@pytest.fixture
def fresh_db(pg_server):
    name = f"dgb_migtest_{uuid.uuid4().hex[:8]}"
    pg = Postgres(pg_server)
    ensure_database(pg, name)
    dsn = pg_server.pg_dsn(name)
    yield dsn
    pg._psql_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _columns(conn, table):
    with conn.cursor() as cur:
        cur.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s", (table,)
        )
        return dict(cur.fetchall())


def test_apply_twice_is_a_noop(fresh_db):
    first = db.migrate_dsn(fresh_db)
    assert first == [f"{m.version}_{m.name}" for m in db.discover()]
    assert db.migrate_dsn(fresh_db) == []
    conn = db.connect(fresh_db)
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM schema_migrations")
        assert cur.fetchone()[0] == len(first)
    conn.close()


def test_schema_has_expected_tables_and_columns(fresh_db):
    db.migrate_dsn(fresh_db)
    conn = db.connect(fresh_db)
    news = _columns(conn, "news")
    for col in (
        "unique_id",
        "agency_key",
        "title",
        "url",
        "published_at",
        "content_hash",
        "tags",
        "theme_l1_id",
        "most_specific_theme_id",
        "summary",
        "content_embedding",
        "embedding_model",
        "embedding_dim",
        "scraped_at",
        "enriched_at",
        "embedded_at",
        "indexed_at",
        "last_error",
        "attempts",
        "version",
        "trace_id",
    ):
        assert col in news, col
    assert news["content_embedding"] == "ARRAY"  # dimension travels with the row, not the type
    assert news["tags"] == "ARRAY"
    for table, cols in {
        "agencies": ("key", "name", "type", "parent_key", "url", "site_kind", "active"),
        "themes": ("code", "label", "full_name", "level", "parent_code", "description"),
        "outbox": ("topic", "aggregate_id", "payload", "attributes", "published_at", "attempts"),
        "dead_letters": ("subscription", "reason", "trace_id", "first_seen", "last_seen", "attempts"),
        "scrape_runs": (
            "agency_key",
            "status",
            "error_category",
            "articles_scraped",
            "execution_time_seconds",
        ),
        "news_update_history": ("news_id", "field_changed", "old_value", "new_value", "detected_at"),
        "integrity_state": ("news_id", "last_checked_at", "next_due_at", "etag", "last_modified"),
    }.items():
        have = _columns(conn, table)
        assert set(cols) <= set(have), (table, set(cols) - set(have))
    conn.close()


def test_constraints_guard_identity_and_embedding_dimension(fresh_db):
    db.migrate_dsn(fresh_db)
    conn = db.connect(fresh_db)
    insert = (
        "INSERT INTO news (unique_id, agency_key, title, url, published_at, content_embedding, embedding_dim)"
        " VALUES (%s, 'mec', 't', %s, now(), %s, %s)"
    )
    with db.transaction(conn) as cur:
        cur.execute(insert, ("a_1", "https://x/1", [0.1, 0.2, 0.3], 3))
    # same (agency, url): one row per article
    with pytest.raises(psycopg.errors.UniqueViolation), db.transaction(conn) as cur:
        cur.execute(insert, ("a_2", "https://x/1", None, None))
    # vector length must match its declared dimension
    with pytest.raises(psycopg.errors.CheckViolation), db.transaction(conn) as cur:
        cur.execute(insert, ("a_3", "https://x/3", [0.1, 0.2], 3))
    conn.close()


def test_edited_applied_migration_is_refused(fresh_db, tmp_path):
    for mig in db.discover():
        (tmp_path / mig.path.name).write_text(mig.sql)
    conn = db.connect(fresh_db)
    assert db.migrate(conn, tmp_path)
    first = sorted(tmp_path.glob("*.sql"))[0]
    first.write_text(first.read_text() + "\n-- edited\n")
    with pytest.raises(db.MigrationError, match="changed after it was applied"):
        db.migrate(conn, tmp_path)
    conn.close()


def test_bad_migration_rolls_back_whole_file(fresh_db, tmp_path):
    (tmp_path / "0001_ok.sql").write_text("CREATE TABLE t1 (id int);")
    (tmp_path / "0002_bad.sql").write_text("CREATE TABLE t2 (id int); SELECT * FROM missing_table;")
    conn = db.connect(fresh_db)
    with pytest.raises(psycopg.errors.UndefinedTable):
        db.migrate(conn, tmp_path)
    with conn.cursor() as cur:
        cur.execute("SELECT to_regclass('t1') IS NOT NULL, to_regclass('t2') IS NOT NULL")
        assert cur.fetchone() == (True, False)
        cur.execute("SELECT version FROM schema_migrations")
        assert [r[0] for r in cur.fetchall()] == ["0001"]
    conn.close()


def test_a_real_array_parameter_stores_the_float32_values_exactly(fresh_db):
    """db.RealArray (the embed stage's binary vector parameter) lands as real[] with the same
    float32 bits, NaN included, under the dimension check; bad shapes are refused before SQL."""
    import numpy as np

    db.migrate_dsn(fresh_db)
    conn = db.connect(fresh_db)
    db.adapt_real_arrays(conn)
    vec = np.random.default_rng(7).standard_normal(512).astype(np.float32)
    vec[5] = np.nan
    insert = (
        "INSERT INTO news (unique_id, agency_key, title, url, published_at, content_embedding, embedding_dim)"
        " VALUES (%s, 'mec', 't', %s, now(), %s, %s)"
    )
    with db.transaction(conn) as cur:
        cur.execute(insert, ("a_1", "https://x/1", db.RealArray(vec), 512))
        cur.execute(
            "SELECT content_embedding, array_lower(content_embedding, 1), pg_typeof(content_embedding)::text"
            " FROM news WHERE unique_id = 'a_1'"
        )
        stored, lower, kind = cur.fetchone()
    assert (lower, kind) == (1, "real[]")
    assert np.array_equal(np.asarray(stored, dtype=np.float32), vec, equal_nan=True)
    with pytest.raises(psycopg.errors.CheckViolation), db.transaction(conn) as cur:
        cur.execute(insert, ("a_2", "https://x/2", db.RealArray(vec[:10]), 512))
    for bad in (np.zeros((2, 2)), []):
        with pytest.raises(ValueError, match="non-empty 1-d"):
            db.RealArray(bad)
    conn.close()


def test_the_index_runs_count_and_the_latency_history_have_indexes(fresh_db):
    """The count every index run makes (restore_lost_documents) and the latency history's range
    of indexed_at can be served by an index, so neither scans a production-sized news table."""
    db.migrate_dsn(fresh_db)
    conn = db.connect(fresh_db)

    def plan(sql: str) -> str:
        with conn.cursor() as cur:
            cur.execute("SET enable_seqscan = off")
            cur.execute("EXPLAIN " + sql)
            text = "\n".join(r[0] for r in cur.fetchall())
        conn.rollback()
        return text

    assert "news_indexed_docs_idx" in plan(
        "SELECT count(*) FROM news WHERE indexed_version IS NOT NULL AND removed_at IS NULL"
        " AND enriched_at IS NOT NULL"
    )
    assert "news_indexed_at_idx" in plan(
        "SELECT indexed_at - scraped_at FROM news WHERE indexed_at > now() - interval '24 hours'"
        " AND indexed_at <= now()"
    )
    conn.close()
