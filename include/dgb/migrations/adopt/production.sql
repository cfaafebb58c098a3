-- Adoption of a DestaquesGovBr (production) database: run ONCE, before 0001, when `news` exists and
-- `schema_migrations` does not. It only ADDS (columns, constraints, tables come from 0001 with
-- IF NOT EXISTS) and backfills our per-stage state; no production row or column is deleted or
-- rewritten, except the embedding's column type (pgvector -> real[], the same numbers; see README,
-- "Switching from the production workers", for the rollback cast).

-- agencies: how to read each site, and whether it is scraped
ALTER TABLE agencies
    ADD COLUMN IF NOT EXISTS site_kind text NOT NULL DEFAULT 'html',
    ADD COLUMN IF NOT EXISTS active boolean NOT NULL DEFAULT true,
    ADD COLUMN IF NOT EXISTS disabled_reason text,
    ADD COLUMN IF NOT EXISTS created_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN IF NOT EXISTS updated_at timestamptz NOT NULL DEFAULT now();

-- themes: our descriptions and keywords (filled when the taxonomy is loaded)
ALTER TABLE themes
    ADD COLUMN IF NOT EXISTS description text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS keywords text[] NOT NULL DEFAULT '{}',
    ADD COLUMN IF NOT EXISTS updated_at timestamptz NOT NULL DEFAULT now();

-- news: provenance and per-stage state
ALTER TABLE news
    ADD COLUMN IF NOT EXISTS agency_key text,
    ADD COLUMN IF NOT EXISTS agency_name text,
    ADD COLUMN IF NOT EXISTS content_hash text,
    ADD COLUMN IF NOT EXISTS embedding_model text,
    ADD COLUMN IF NOT EXISTS embedding_dim integer,
    ADD COLUMN IF NOT EXISTS embedding_generated_at timestamptz,
    ADD COLUMN IF NOT EXISTS classifier text,
    ADD COLUMN IF NOT EXISTS classifier_version text,
    ADD COLUMN IF NOT EXISTS theme_confidence real,
    ADD COLUMN IF NOT EXISTS version integer NOT NULL DEFAULT 1,
    ADD COLUMN IF NOT EXISTS trace_id uuid,
    ADD COLUMN IF NOT EXISTS scraped_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN IF NOT EXISTS enriched_at timestamptz,
    ADD COLUMN IF NOT EXISTS embedded_at timestamptz,
    ADD COLUMN IF NOT EXISTS indexed_at timestamptz,
    ADD COLUMN IF NOT EXISTS indexed_version integer,
    ADD COLUMN IF NOT EXISTS last_error text,
    ADD COLUMN IF NOT EXISTS last_error_stage text,
    ADD COLUMN IF NOT EXISTS last_error_at timestamptz,
    ADD COLUMN IF NOT EXISTS attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS problem text,
    ADD COLUMN IF NOT EXISTS problem_at timestamptz,
    ADD COLUMN IF NOT EXISTS image_broken boolean NOT NULL DEFAULT false,
    ADD COLUMN IF NOT EXISTS removed_at timestamptz,
    ADD COLUMN IF NOT EXISTS tags text[],
    ADD COLUMN IF NOT EXISTS extracted_at timestamptz,
    ADD COLUMN IF NOT EXISTS created_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN IF NOT EXISTS updated_at timestamptz NOT NULL DEFAULT now();

-- production's denormalised agency columns, filled where its trigger did not
UPDATE news n SET agency_key = a.key, agency_name = coalesce(n.agency_name, a.name)
  FROM agencies a WHERE a.id = n.agency_id AND n.agency_key IS NULL;
-- NULL tags / extracted_at stay NULL on production's rows (our code reads NULL as "none");
-- rows written from now on get our defaults
ALTER TABLE news ALTER COLUMN tags SET DEFAULT '{}';
ALTER TABLE news ALTER COLUMN extracted_at SET DEFAULT now();

-- The embedding: production stores pgvector `vector(N)`; this pipeline stores real[] with the model
-- name and dimension beside it. The cast keeps every number. The model that made production's
-- vectors is not recorded there: they are marked 'production' so the embed stage replaces them with
-- the configured model's vectors through the normal path.
DO $$
DECLARE
    kind text;
BEGIN
    SELECT format_type(a.atttypid, a.atttypmod) INTO kind
      FROM pg_attribute a
     WHERE a.attrelid = 'news'::regclass AND a.attname = 'content_embedding' AND NOT a.attisdropped;
    IF kind IS NULL THEN
        ALTER TABLE news ADD COLUMN content_embedding real[];
    ELSIF kind LIKE 'vector%' THEN
        EXECUTE 'DROP INDEX IF EXISTS idx_news_content_embedding_hnsw';
        EXECUTE 'ALTER TABLE news ALTER COLUMN content_embedding TYPE real[] USING content_embedding::real[]';
    END IF;
END $$;
UPDATE news SET embedding_model = 'production', embedding_dim = array_length(content_embedding, 1),
                embedded_at = coalesce(embedding_generated_at, now())
 WHERE content_embedding IS NOT NULL AND embedding_model IS NULL;

-- Production already classified most rows (with Bedrock): they count as enriched, so adopting a
-- database never re-buys 300k classifications. Rows without a theme are enriched by the pipeline.
UPDATE news SET enriched_at = coalesce(updated_at, created_at, now()),
                classifier = coalesce(classifier, 'production')
 WHERE most_specific_theme_id IS NOT NULL AND enriched_at IS NULL;

-- content_hash: production's rows carry theirs already (same formula as ours); nothing to do.

-- constraints our code relies on (added only when the data allows; otherwise the adoption stops
-- with the offending rows named, and nothing has been changed: this file runs in one transaction)
DO $$
DECLARE
    dup text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'news_agency_url_key') THEN
        SELECT string_agg(agency_key || ' ' || url, ', ') INTO dup FROM (
            SELECT agency_key, url FROM news GROUP BY agency_key, url HAVING count(*) > 1 LIMIT 5) d;
        IF dup IS NOT NULL THEN
            RAISE EXCEPTION 'cannot adopt: news has several rows for the same (agency_key, url), e.g. %', dup;
        END IF;
        ALTER TABLE news ADD CONSTRAINT news_agency_url_key UNIQUE (agency_key, url);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'news_embedding_dim_check') THEN
        ALTER TABLE news ADD CONSTRAINT news_embedding_dim_check CHECK (
            content_embedding IS NULL OR array_length(content_embedding, 1) = embedding_dim);
    END IF;
END $$;
ALTER TABLE news ALTER COLUMN agency_key SET NOT NULL;

-- scrape_runs: production's table (statuses success/error) gains our columns and statuses
DO $$
BEGIN
    IF to_regclass('scrape_runs') IS NOT NULL THEN
        ALTER TABLE scrape_runs
            ADD COLUMN IF NOT EXISTS articles_updated integer NOT NULL DEFAULT 0,
            ADD COLUMN IF NOT EXISTS started_at timestamptz NOT NULL DEFAULT now(),
            ADD COLUMN IF NOT EXISTS run_id text;
        ALTER TABLE scrape_runs DROP CONSTRAINT IF EXISTS scrape_runs_status_check;
        ALTER TABLE scrape_runs ADD CONSTRAINT scrape_runs_status_check
            CHECK (status IN ('success', 'partial', 'failed', 'error'));
    END IF;
END $$;

-- news_features, entity_registry, entity_alias (production's migrations 004, 015, 016): kept as
-- they are, rows and Wikidata-linked ids included. Migration 0014 creates them (and news_entities,
-- production's 021) only where missing; our writers merge keys into news_features (`features ||
-- new`), so production's keys (has_image, publication_hour, content_annotations ...) stay.
