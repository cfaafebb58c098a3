"""Migrations against a real PostgreSQL: fresh database, applied twice, schema as expected."""

import hashlib
import uuid

import psycopg
import pytest
from psycopg.types.json import Jsonb

from dgb import db
from dgb.agencies import load_agencies
from dgb.features import entities as entities_mod
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


# ----------------------------------------------------------------------------- under load


def _next_version(tmp_path, sql: str):
    """The migrations folder of a next version: today's files plus one more."""
    import shutil

    folder = tmp_path / "migrations"
    shutil.copytree(db.MIGRATIONS_DIR, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "9999_next_version.sql").write_text(sql, encoding="utf-8")
    return folder


def _insert_article(conn, uid):
    with conn.cursor() as cur:
        cur.execute("SELECT key FROM agencies LIMIT 1")
        row = cur.fetchone()
        agency = row[0] if row else None
        if agency is None:
            agency = "mec"
            cur.execute(
                "INSERT INTO agencies (key, name, url) VALUES (%s, %s, %s)",
                (agency, "MEC", "https://www.gov.br/mec"),
            )
        cur.execute(
            "INSERT INTO news (unique_id, agency_key, title, url, published_at)"
            " VALUES (%s, %s, 't', %s, now())",
            (uid, agency, f"https://www.gov.br/{agency}/{uid}"),
        )
    conn.commit()


def _until_waiting_for_a_lock(conn, query_start: str, tries: int = 600) -> None:
    """Until a backend running ``query_start...`` has been seen waiting for a lock."""
    import time

    with conn.cursor() as cur:
        for _ in range(tries):
            cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
                (query_start + "%",),
            )
            seen = cur.fetchone()[0]
            conn.commit()
            if seen:
                return
            time.sleep(0.01)
    raise AssertionError(f"no backend running {query_start!r} was seen waiting for a lock")


def test_a_migration_under_load_never_queues_the_stages_behind_it(fresh_db, tmp_path, monkeypatch):
    """A stage's open transaction holds a row of news; the next version's migration (ALTER TABLE
    news) needs a lock that waits for it. Its lock waits are bounded and retried, so a reader of
    news arriving meanwhile is served at once instead of queueing behind the migration: the
    blocking transaction only ends AFTER that reader got its answer, so a migration that waited
    without limit would leave the reader waiting until its statement_timeout and fail this."""
    import threading

    monkeypatch.setenv("DGB_MIGRATE_LOCK_TIMEOUT_S", "0.2")
    monkeypatch.setenv("DGB_MIGRATE_LOCK_RETRIES", "200")
    db.migrate_dsn(fresh_db)
    setup = db.connect(fresh_db)
    _insert_article(setup, "under_load_1")
    folder = _next_version(tmp_path, "ALTER TABLE news ADD COLUMN next_version_probe text;\n")

    stage = db.connect(fresh_db)  # a stage run in the middle of a chunk
    with stage.cursor() as cur:
        cur.execute("SELECT unique_id FROM news WHERE unique_id = 'under_load_1' FOR UPDATE")
    result = {}

    def upgrade():
        conn = db.connect(fresh_db)
        try:
            result["applied"] = db.migrate(conn, folder)
        except Exception as exc:  # reported by the assertion below
            result["error"] = exc
        finally:
            conn.close()

    t = threading.Thread(target=upgrade)
    t.start()
    try:
        reader = db.connect(fresh_db)
        with reader.cursor() as cur:
            cur.execute("SET statement_timeout = '20s'")
            _until_waiting_for_a_lock(reader, "ALTER TABLE news")
            for _ in range(5):  # spread over the migration's tries and its pauses between them
                cur.execute("SELECT count(*) FROM news")
                assert cur.fetchone()[0] == 1
                reader.commit()
        reader.close()
    finally:
        stage.commit()  # the chunk ends: the migration can take its lock now
        t.join(60)
    assert result.get("applied") == ["9999_next_version"], result
    assert "next_version_probe" in _columns(setup, "news")
    setup.close()
    stage.close()


def test_a_migration_that_never_gets_its_lock_fails_clearly_and_applies_nothing(
    fresh_db, tmp_path, monkeypatch
):
    monkeypatch.setenv("DGB_MIGRATE_LOCK_TIMEOUT_S", "0.1")
    monkeypatch.setenv("DGB_MIGRATE_LOCK_RETRIES", "1")
    db.migrate_dsn(fresh_db)
    setup = db.connect(fresh_db)
    _insert_article(setup, "under_load_2")
    folder = _next_version(
        tmp_path,
        "CREATE TABLE next_version_side (id int);\nALTER TABLE news ADD COLUMN next_version_probe text;\n",
    )
    blocker = db.connect(fresh_db)
    with blocker.cursor() as cur:
        cur.execute("SELECT 1 FROM news FOR UPDATE")
    conn = db.connect(fresh_db)
    try:
        with pytest.raises(
            db.MigrationError, match=r"9999_next_version\.sql.*not free within 0\.1s in 2 tries"
        ):
            db.migrate(conn, folder)
    finally:
        blocker.commit()
        conn.close()
        blocker.close()
    with setup.cursor() as cur:
        cur.execute("SELECT count(*) FROM schema_migrations WHERE version = '9999'")
        assert cur.fetchone()[0] == 0
        cur.execute("SELECT to_regclass('next_version_side')")
        assert cur.fetchone()[0] is None  # the whole migration rolled back, not half of it
    assert "next_version_probe" not in _columns(setup, "news")
    setup.close()


def test_0018_moves_the_ids_this_pipeline_minted_to_their_types_namespace(fresh_db, tmp_path):
    """Old-form minted ids (dgb_<slug>, provenance rules/llm, created since 0014) move to
    dgb_<type>_<slug> with their aliases, news_entities rows and the articles' features (version
    bumped); agency ids, Wikidata ids and rows older than 0014 (an adopted production's) stay."""
    for mig in db.discover():
        if mig.version < "0018":
            (tmp_path / mig.path.name).write_text(mig.sql)
    conn = db.connect(fresh_db)
    db.migrate(conn, tmp_path)
    db.upsert_agencies(conn, load_agencies().values())
    long_name = "Programa Nacional de Vigilância da Qualidade da Água para Consumo Humano no Brasil"
    old_long = (
        "dgb_programa-nacional-de-vigilancia-da-qualidade-da-agua_"
        + hashlib.sha1(long_name.encode()).hexdigest()[:6]
    )
    registry = [
        # (id, name, type, provenance, created_at or None for now)
        ("dgb_saude-da-familia", "Saúde da Família", "ORG", "rules", None),
        ("dgb_pe-de-meia", "Pé-de-Meia", "POLICY", "llm", None),
        (old_long, long_name, "POLICY", "rules", None),
        ("dgb_mec", "Ministério da Educação", "ORG", "rules", None),  # an agency's id
        ("Q155", "Brasil", "LOC", "wikidata", None),
        ("dgb_velho", "Velho", "ORG", "llm", "2020-01-01"),  # production's, from before adoption
    ]
    with db.transaction(conn) as cur:
        for eid, name, etype, prov, created in registry:
            cur.execute(
                "INSERT INTO entity_registry (entity_id, canonical_name, type, provenance, created_at)"
                " VALUES (%s, %s, %s, %s, COALESCE(%s::timestamptz, now()))",
                (eid, name, etype, prov, created),
            )
            cur.execute(
                "INSERT INTO entity_alias (alias_norm, type, entity_id, source) VALUES (%s, %s, %s, %s)",
                (name.lower(), etype, eid, prov),
            )
        cur.execute(
            "INSERT INTO news (unique_id, agency_key, title, url, published_at, version)"
            " VALUES ('a1', 'mec', 't', 'https://x/1', now(), 3), ('a2', 'mec', 't', 'https://x/2', now(), 1)"
        )
        entities = [
            {"text": "Saúde da Família", "type": "ORG", "canonical_id": "dgb_saude-da-familia"},
            {"text": "MEC", "type": "ORG", "canonical_id": "dgb_mec"},
            {"text": "Pé-de-Meia", "type": "POLICY", "canonical_id": "dgb_pe-de-meia"},
            {"text": "Brasil", "type": "LOC", "canonical_id": "Q155"},
        ]
        cur.execute(
            "INSERT INTO news_features (unique_id, features)"
            " VALUES ('a1', %s), ('a2', '{\"word_count\": 3}')",
            (Jsonb({"entities": entities, "word_count": 9}),),
        )
        for eid, etype in (("dgb_saude-da-familia", "ORG"), ("dgb_mec", "ORG"), ("dgb_pe-de-meia", "POLICY")):
            cur.execute(
                "INSERT INTO news_entities (unique_id, entity_id, type, count) VALUES ('a1', %s, %s, 2)",
                (eid, etype),
            )
    assert [m.split("_")[0] for m in db.migrate(conn, db.MIGRATIONS_DIR)][:1] == ["0018"]

    ids = {r[0]: r[1:] for r in _fetch(conn, "SELECT entity_id, provenance, extra FROM entity_registry")}
    new_long = (
        f"dgb_policy_{'programa-nacional-de-vigilancia-da-qualidade-da-agua'[: 64 - 11 - 7].rstrip('-')}"
    )
    new_long += f"_{old_long[-6:]}"
    assert set(ids) == {
        "dgb_org_saude-da-familia",
        "dgb_policy_pe-de-meia",
        new_long,
        "dgb_mec",
        "Q155",
        "dgb_velho",
    }
    assert len(new_long) <= 64 and new_long == entities_mod.mint_id(long_name, "POLICY")  # the same digest
    assert ids["dgb_policy_pe-de-meia"] == ("llm", {"former_id": "dgb_pe-de-meia"})
    aliases = dict(_fetch(conn, "SELECT alias_norm, entity_id FROM entity_alias"))
    assert aliases["saúde da família"] == "dgb_org_saude-da-familia" and aliases["velho"] == "dgb_velho"
    assert sorted(_fetch(conn, "SELECT entity_id, count FROM news_entities")) == [
        ("dgb_mec", 2),
        ("dgb_org_saude-da-familia", 2),
        ("dgb_policy_pe-de-meia", 2),
    ]
    features = dict(_fetch(conn, "SELECT unique_id, features FROM news_features"))
    assert [e["canonical_id"] for e in features["a1"]["entities"]] == [
        "dgb_org_saude-da-familia",
        "dgb_mec",
        "dgb_policy_pe-de-meia",
        "Q155",
    ]
    assert features["a1"]["word_count"] == 9 and features["a2"] == {"word_count": 3}
    assert dict(_fetch(conn, "SELECT unique_id, version FROM news")) == {"a1": 4, "a2": 1}
    assert db.migrate(conn, db.MIGRATIONS_DIR) == []
    conn.close()


def _fetch(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()
