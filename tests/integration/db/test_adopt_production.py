"""`dgb db migrate` on a database that already holds production's (DestaquesGovBr) schema and rows.

The production schema below is written from the facts of its published DDL (tables agencies, themes,
news, scrape_runs, its denormalising trigger). One deviation: pgvector is not packaged here, so the
embedding column is ``real[]`` (the adoption casts a ``vector`` column to ``real[]``; that branch
needs pgvector and is not exercised here).
"""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from dgb import db
from dgb.pipeline import stages
from dgb.pipeline.runner import RunOptions, run_stage
from dgb.search import schema
from dgb_dev.stack.postgres import Postgres, ensure_database

pytestmark = pytest.mark.stack

PRODUCTION_DDL = """
CREATE TABLE agencies (
    id SERIAL PRIMARY KEY, key VARCHAR(100) UNIQUE NOT NULL, name VARCHAR(500) NOT NULL,
    type VARCHAR(100), parent_key VARCHAR(100), url VARCHAR(1000),
    created_at TIMESTAMPTZ DEFAULT NOW(), updated_at TIMESTAMPTZ DEFAULT NOW());
CREATE TABLE themes (
    id SERIAL PRIMARY KEY, code VARCHAR(20) UNIQUE NOT NULL, label VARCHAR(500) NOT NULL,
    full_name VARCHAR(600), level SMALLINT NOT NULL CHECK (level IN (1, 2, 3)), parent_code VARCHAR(20),
    created_at TIMESTAMPTZ DEFAULT NOW(),
    CONSTRAINT fk_parent_theme FOREIGN KEY (parent_code) REFERENCES themes(code) ON DELETE SET NULL);
CREATE TABLE news (
    id SERIAL PRIMARY KEY, unique_id VARCHAR(120) UNIQUE NOT NULL,
    agency_id INTEGER NOT NULL REFERENCES agencies(id),
    theme_l1_id INTEGER REFERENCES themes(id), theme_l2_id INTEGER REFERENCES themes(id),
    theme_l3_id INTEGER REFERENCES themes(id), most_specific_theme_id INTEGER REFERENCES themes(id),
    title TEXT NOT NULL, url TEXT, image_url TEXT, video_url TEXT, category VARCHAR(500), tags TEXT[],
    content TEXT, editorial_lead TEXT, subtitle TEXT, summary TEXT,
    published_at TIMESTAMPTZ NOT NULL, updated_datetime TIMESTAMPTZ, extracted_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ DEFAULT NOW(), updated_at TIMESTAMPTZ DEFAULT NOW(),
    agency_key VARCHAR(100), agency_name VARCHAR(500), legacy_unique_id VARCHAR(32),
    content_embedding real[], embedding_generated_at TIMESTAMPTZ, content_hash VARCHAR(16));
CREATE INDEX idx_news_published_at ON news(published_at DESC);
CREATE FUNCTION denormalize_agency_info() RETURNS TRIGGER AS $$
BEGIN
    SELECT key, name INTO NEW.agency_key, NEW.agency_name FROM agencies WHERE id = NEW.agency_id;
    RETURN NEW;
END; $$ LANGUAGE plpgsql;
CREATE TRIGGER denormalize_news_agency BEFORE INSERT OR UPDATE OF agency_id ON news
    FOR EACH ROW EXECUTE FUNCTION denormalize_agency_info();
CREATE TABLE scrape_runs (
    id SERIAL PRIMARY KEY, agency_key VARCHAR(100) NOT NULL,
    status VARCHAR(20) NOT NULL CHECK (status IN ('success', 'error')), error_category VARCHAR(50),
    error_message TEXT, articles_scraped INTEGER DEFAULT 0, articles_saved INTEGER DEFAULT 0,
    execution_time_seconds REAL, scraped_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW());
CREATE TABLE news_features (
    unique_id VARCHAR(120) PRIMARY KEY REFERENCES news(unique_id) ON DELETE CASCADE,
    features JSONB NOT NULL DEFAULT '{}', updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW());
CREATE TABLE entity_registry (
    entity_id VARCHAR(64) PRIMARY KEY, canonical_name TEXT NOT NULL, type VARCHAR(16) NOT NULL,
    aliases JSONB NOT NULL DEFAULT '[]', wikidata_id VARCHAR(32), wikidata_url TEXT, description TEXT,
    agency_key VARCHAR(100) REFERENCES agencies(key), confidence REAL NOT NULL DEFAULT 0.0,
    provenance VARCHAR(24) NOT NULL, extra JSONB NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(), updated_at TIMESTAMPTZ NOT NULL DEFAULT NOW());
CREATE TABLE entity_alias (
    alias_norm TEXT NOT NULL, type VARCHAR(16) NOT NULL,
    entity_id VARCHAR(64) NOT NULL REFERENCES entity_registry(entity_id) ON DELETE CASCADE,
    source VARCHAR(24) NOT NULL, confidence REAL NOT NULL DEFAULT 1.0,
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(), PRIMARY KEY (alias_norm, type));
"""

PRODUCTION_ROWS = """
INSERT INTO agencies (key, name, type, url) VALUES
    ('mec', 'Ministério da Educação', 'Ministério', 'https://www.gov.br/mec/pt-br/assuntos/noticias');
INSERT INTO themes (code, label, full_name, level, parent_code) VALUES
    ('02', 'Educação', '02 - Educação', 1, NULL),
    ('02.01', 'Ensino Básico', '02.01 - Ensino Básico', 2, '02'),
    ('02.01.03', 'Alimentação Escolar', '02.01.03 - Alimentação Escolar', 3, '02.01');
INSERT INTO news (unique_id, agency_id, theme_l1_id, theme_l2_id, theme_l3_id, most_specific_theme_id,
                  title, url, tags, content, summary, published_at, extracted_at, content_hash,
                  content_embedding, embedding_generated_at)
SELECT 'merenda-escolar-recebe-reforco_a1b2c3', a.id, t1.id, t2.id, t3.id, t3.id,
       'Merenda escolar recebe reforço', 'https://www.gov.br/mec/pt-br/assuntos/noticias/merenda',
       ARRAY['PNAE'], 'O programa amplia os recursos.', 'Resumo de produção.',
       '2026-02-10 17:05:07-03', '2026-02-10 17:20:00-03', '0123456789abcdef',
       ARRAY[0.1, 0.2, 0.3]::real[], '2026-02-10 17:30:00-03'
  FROM agencies a, themes t1, themes t2, themes t3
 WHERE a.key = 'mec' AND t1.code = '02' AND t2.code = '02.01' AND t3.code = '02.01.03';
INSERT INTO news (unique_id, agency_id, title, url, content, published_at)
SELECT 'enem-abre-inscricoes_d4e5f6', id, 'Enem abre inscrições',
       'https://www.gov.br/mec/pt-br/assuntos/noticias/enem', 'Inscrições vão até sexta.',
       '2026-02-11 09:00:00-03'
  FROM agencies WHERE key = 'mec';
INSERT INTO scrape_runs (agency_key, status, error_category, articles_scraped)
VALUES ('mec', 'error', 'network_error', 0);
INSERT INTO entity_registry (entity_id, canonical_name, type, wikidata_id, provenance)
VALUES ('Q10345911', 'Ministério da Educação', 'ORG', 'Q10345911', 'wikidata');
INSERT INTO entity_alias (alias_norm, type, entity_id, source)
VALUES ('ministerio da educacao', 'ORG', 'Q10345911', 'wikidata');
INSERT INTO news_features (unique_id, features) VALUES ('merenda-escolar-recebe-reforco_a1b2c3',
    '{"word_count": 5, "sentiment": {"label": "positive", "score": 0.6},
      "entities": [{"text": "MEC", "type": "ORG", "count": 1, "canonical_id": "Q10345911"}]}');
"""


@pytest.fixture
def production_db(pg_server):
    name = f"dgb_adopt_{uuid.uuid4().hex[:8]}"
    pg = Postgres(pg_server)
    ensure_database(pg, name)
    dsn = pg_server.pg_dsn(name)
    conn = db.connect(dsn, autocommit=True)  # no transaction left open to block the ALTERs
    with db.transaction(conn) as cur:
        cur.execute(PRODUCTION_DDL)
        cur.execute(PRODUCTION_ROWS)
    yield conn, dsn
    conn.close()
    admin = db.connect(pg_server.pg_dsn("postgres"), autocommit=True)
    admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin.close()


def _rows(conn, sql, *args):
    with conn.cursor() as cur:
        cur.execute(sql, args or None)
        return cur.fetchall()


def test_migrate_adopts_production_rows_without_changing_them(production_db, typesense_server):
    conn, dsn = production_db
    before = _rows(
        conn,
        "SELECT unique_id, title, url, content, summary, content_hash, published_at,"
        " most_specific_theme_id, tags, agency_key FROM news ORDER BY id",
    )
    applied = db.migrate_dsn(dsn)
    assert applied[0] == "adopt_production" and "0001_core_schema" in applied
    assert db.migrate_dsn(dsn) == []  # idempotent from then on
    after = _rows(
        conn,
        "SELECT unique_id, title, url, content, summary, content_hash, published_at,"
        " most_specific_theme_id, tags, agency_key FROM news ORDER BY id",
    )
    assert after == before and len(after) == 2  # nothing lost, nothing rewritten
    assert _rows(conn, "SELECT status FROM scrape_runs") == [("error",)]

    # production's classification counts as done; the unthemed row waits for the enrich stage
    state = dict(_rows(conn, "SELECT unique_id, enriched_at IS NOT NULL FROM news"))
    assert state == {"merenda-escolar-recebe-reforco_a1b2c3": True, "enem-abre-inscricoes_d4e5f6": False}
    assert _rows(
        conn, "SELECT embedding_model, embedding_dim FROM news WHERE content_embedding IS NOT NULL"
    ) == [("production", 3)]

    # production's features and entity registry carry over as they are
    assert _rows(
        conn, "SELECT features->'sentiment'->>'label', features->'word_count' FROM news_features"
    ) == [("positive", 5)]
    assert _rows(conn, "SELECT entity_id FROM entity_alias WHERE alias_norm = 'ministerio da educacao'") == [
        ("Q10345911",)
    ]
    assert _rows(conn, "SELECT to_regclass('news_entities') IS NOT NULL") == [(True,)]

    # our tables exist and our writes work beside production's trigger
    for table in ("outbox", "dead_letters", "news_update_history", "integrity_state", "reconcile_runs"):
        assert _rows(conn, "SELECT to_regclass(%s) IS NOT NULL", table) == [(True,)]
    with db.transaction(conn) as cur:
        cur.execute("INSERT INTO scrape_runs (agency_key, status) VALUES ('mec', 'partial')")
        cur.execute(
            "INSERT INTO news (unique_id, agency_id, agency_key, title, url, published_at)"
            " SELECT 'nova_000001', id, key, 'Nova', 'https://www.gov.br/mec/nova', now()"
            " FROM agencies WHERE key = 'mec'"
        )
    assert _rows(conn, "SELECT agency_key, agency_name FROM news WHERE unique_id = 'nova_000001'") == [
        ("mec", "Ministério da Educação")
    ]
    # the (agency, url) dedup key now holds
    with pytest.raises(Exception, match="news_agency_url_key"), db.transaction(conn) as cur:
        cur.execute(
            "INSERT INTO news (unique_id, agency_id, agency_key, title, url, published_at)"
            " SELECT 'dup_000001', id, key, 'Dup', 'https://www.gov.br/mec/nova', now()"
            " FROM agencies WHERE key = 'mec'"
        )

    # the pipeline indexes production's rows (index stage sweep) with production's field names
    alias = f"t_{uuid.uuid4().hex[:8]}"
    s = replace(typesense_server, typesense_collection=alias, embedding_dim=3)
    ts = schema.client(s)
    schema.ensure_collection(s, ts)
    try:
        report = run_stage(stages.IndexStage(ts, alias, conn, 3), conn, [], RunOptions(sweep_limit=100))
        assert "merenda-escolar-recebe-reforco_a1b2c3" in report.processed
        doc = ts.collections[alias].documents["merenda-escolar-recebe-reforco_a1b2c3"].retrieve()
        assert doc["theme_1_level_3_label"] == "Alimentação Escolar"
        assert doc["content_hash"] == "0123456789abcdef" and doc["summary"] == "Resumo de produção."
        # production's own features reach the index with the article (its news_features row)
        assert (doc["sentiment_label"], doc["word_count"]) == ("positive", 5)
        assert doc["entity_org"] == ["MEC"] and doc["entity_canonical"] == ["Q10345911"]
    finally:
        target = ts.aliases[alias].retrieve()["collection_name"]
        ts.aliases[alias].delete()
        ts.collections[target].delete()


def test_adoption_refuses_duplicate_keys_and_leaves_the_database_untouched(production_db):
    conn, dsn = production_db
    with db.transaction(conn) as cur:
        cur.execute(
            "INSERT INTO news (unique_id, agency_id, title, url, published_at)"
            " SELECT 'merenda-copia_000002', id, 'Cópia', u.url, now() FROM agencies, "
            " (SELECT url FROM news WHERE unique_id = 'enem-abre-inscricoes_d4e5f6') u"
            " WHERE key = 'mec'"
        )
    with pytest.raises(Exception, match="same \\(agency_key, url\\)"):
        db.migrate_dsn(dsn)
    assert _rows(conn, "SELECT to_regclass('schema_migrations'), to_regclass('outbox')") == [(None, None)]
    assert _rows(
        conn,
        "SELECT count(*) FROM information_schema.columns"
        " WHERE table_name = 'news' AND column_name = 'enriched_at'",
    ) == [(0,)]
