-- Article features and the entity registry, in production's (DestaquesGovBr's) layout, so the
-- portal, the GraphQL API (`Article.features`) and production's jobs read them unchanged:
-- * news_features: one JSONB object per article (word_count, readability_flesch,
--   sentiment {label, score}, entities [{text, type, count, canonical_id, salience}], and the
--   trending/engagement figures of other jobs). Writers MERGE keys (`features || new`), never
--   replace the object: each job owns its keys (dgb.features.store.merge_features).
-- * entity_registry: one row per canonical entity (a Wikidata QID, or dgb_<slug>; agencies are
--   seeded as dgb_<agency key>); entity_alias: (normalised alias, type) -> entity id, the
--   deterministic resolver; news_entities: one row per article x canonical entity.
-- An adopted production database already has all four (its migrations 004, 015, 016, 018, 021)
-- and keeps its rows: every statement here only creates what is missing. Column types follow
-- production's, except news_features.unique_id and news_entities.unique_id, which take
-- news.unique_id's type on a new database (text; production's varchar(120) stays where adopted).

CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE IF NOT EXISTS news_features (
    unique_id  text PRIMARY KEY REFERENCES news (unique_id) ON DELETE CASCADE,
    features   jsonb NOT NULL DEFAULT '{}',
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS idx_news_features_gin ON news_features USING gin (features);
CREATE INDEX IF NOT EXISTS idx_news_features_updated_at ON news_features (updated_at DESC);
-- "articles that mention canonical entity X": features->'entities' @> '[{"canonical_id": "X"}]'
CREATE INDEX IF NOT EXISTS idx_features_entities_canonical
    ON news_features USING gin ((features -> 'entities') jsonb_path_ops);

-- updated_at follows every update (production's trigger and function names: an adopted database
-- keeps one trigger, not two)
CREATE OR REPLACE FUNCTION update_news_features_updated_at() RETURNS trigger AS $$
BEGIN
    NEW.updated_at = now();
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE OR REPLACE TRIGGER trg_news_features_updated_at
    BEFORE UPDATE ON news_features
    FOR EACH ROW EXECUTE FUNCTION update_news_features_updated_at();

CREATE TABLE IF NOT EXISTS entity_registry (
    entity_id      varchar(64) PRIMARY KEY,   -- Wikidata QID when linked, else dgb_<slug>
    canonical_name text NOT NULL,
    type           varchar(16) NOT NULL,      -- ORG|PER|LOC|EVENT|POLICY|LAW|WORK|PRODUCT
    aliases        jsonb NOT NULL DEFAULT '[]',
    wikidata_id    varchar(32),
    wikidata_url   text,
    description    text,
    agency_key     varchar(100) REFERENCES agencies (key),
    confidence     real NOT NULL DEFAULT 0.0,
    provenance     varchar(24) NOT NULL,      -- agencies_seed|wikidata|llm|manual|rules (ours)
    extra          jsonb NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS idx_entity_registry_type ON entity_registry (type);
CREATE INDEX IF NOT EXISTS idx_entity_registry_wikidata_id ON entity_registry (wikidata_id);
CREATE INDEX IF NOT EXISTS idx_entity_registry_agency_key ON entity_registry (agency_key);
CREATE INDEX IF NOT EXISTS idx_entity_registry_aliases_gin ON entity_registry USING gin (aliases);
CREATE INDEX IF NOT EXISTS idx_entity_registry_name_trgm
    ON entity_registry USING gin (canonical_name gin_trgm_ops);

CREATE OR REPLACE FUNCTION update_entity_registry_updated_at() RETURNS trigger AS $$
BEGIN
    NEW.updated_at = now();
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE OR REPLACE TRIGGER trg_entity_registry_updated_at
    BEFORE UPDATE ON entity_registry
    FOR EACH ROW EXECUTE FUNCTION update_entity_registry_updated_at();

CREATE TABLE IF NOT EXISTS entity_alias (
    alias_norm text NOT NULL,                 -- NFKD -> ASCII -> lowercase -> collapsed whitespace
    type       varchar(16) NOT NULL,
    entity_id  varchar(64) NOT NULL REFERENCES entity_registry (entity_id) ON DELETE CASCADE,
    source     varchar(24) NOT NULL,          -- agencies_seed|llm|wikidata|manual|rules (ours)
    confidence real NOT NULL DEFAULT 1.0,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (alias_norm, type)
);
CREATE INDEX IF NOT EXISTS idx_entity_alias_entity_id ON entity_alias (entity_id);

CREATE TABLE IF NOT EXISTS news_entities (
    unique_id    text NOT NULL REFERENCES news (unique_id) ON DELETE CASCADE,
    entity_id    varchar(64) NOT NULL REFERENCES entity_registry (entity_id) ON DELETE CASCADE,
    type         varchar(16) NOT NULL,
    count        integer NOT NULL DEFAULT 1,
    salience     real,
    published_at timestamptz,
    PRIMARY KEY (unique_id, entity_id)
);
CREATE INDEX IF NOT EXISTS idx_news_entities_entity_id ON news_entities (entity_id);
CREATE INDEX IF NOT EXISTS idx_news_entities_published_at ON news_entities (published_at);
