-- Core schema: reference data (agencies, themes), news with per-stage state, the event
-- outbox, dead letters, scrape runs, the change history (seed 001) and integrity state.

CREATE TABLE agencies (
    id              serial PRIMARY KEY,
    key             text NOT NULL UNIQUE,
    name            text NOT NULL,
    type            text,
    parent_key      text,
    url             text NOT NULL,
    site_kind       text NOT NULL DEFAULT 'html' CHECK (site_kind IN ('html', 'plone6_api', 'ebc')),
    active          boolean NOT NULL DEFAULT true,
    disabled_reason text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE themes (
    id          serial PRIMARY KEY,
    code        text NOT NULL UNIQUE CHECK (code ~ '^[0-9]{2}(\.[0-9]{2}){0,2}$'),
    label       text NOT NULL,
    full_name   text NOT NULL,
    level       smallint NOT NULL CHECK (level BETWEEN 1 AND 3),
    parent_code text REFERENCES themes (code),
    description text NOT NULL,
    keywords    text[] NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CHECK ((level = 1) = (parent_code IS NULL)),
    CHECK (level = 1 + length(code) / 3)
);

CREATE TABLE news (
    id                      bigserial PRIMARY KEY,
    unique_id               text NOT NULL UNIQUE,
    agency_id               integer REFERENCES agencies (id),
    agency_key              text NOT NULL,
    agency_name             text,
    theme_l1_id             integer REFERENCES themes (id),
    theme_l2_id             integer REFERENCES themes (id),
    theme_l3_id             integer REFERENCES themes (id),
    most_specific_theme_id  integer REFERENCES themes (id),
    title                   text NOT NULL,
    url                     text NOT NULL,
    image_url               text,
    video_url               text,
    category                text,
    tags                    text[] NOT NULL DEFAULT '{}',
    content                 text,
    editorial_lead          text,
    subtitle                text,
    summary                 text,
    published_at            timestamptz NOT NULL,
    updated_datetime        timestamptz,
    extracted_at            timestamptz NOT NULL DEFAULT now(),
    content_hash            text,
    -- embedding: model and dimension travel with the vector (no dimension is hard-coded)
    content_embedding       real[],
    embedding_model         text,
    embedding_dim           integer,
    embedding_generated_at  timestamptz,
    -- enrichment provenance
    classifier              text,
    classifier_version      text,
    theme_confidence        real,
    -- per-stage state: each stage's timestamp is NULL until done for the current version
    version                 integer NOT NULL DEFAULT 1,   -- bumped on every content change
    trace_id                uuid,
    scraped_at              timestamptz NOT NULL DEFAULT now(),
    enriched_at             timestamptz,
    embedded_at             timestamptz,
    indexed_at              timestamptz,
    indexed_version         integer,
    last_error              text,
    last_error_stage        text,
    last_error_at           timestamptz,
    attempts                integer NOT NULL DEFAULT 0,
    -- problem flags an operator can query (removed at source, broken image, stuck ...)
    problem                 text,
    problem_at              timestamptz,
    image_broken            boolean NOT NULL DEFAULT false,
    removed_at              timestamptz,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT news_agency_url_key UNIQUE (agency_key, url),
    CONSTRAINT news_embedding_dim_check CHECK (
        content_embedding IS NULL OR array_length(content_embedding, 1) = embedding_dim)
);
CREATE INDEX news_published_at_idx ON news (published_at DESC);
CREATE INDEX news_agency_published_idx ON news (agency_key, published_at DESC);
CREATE INDEX news_content_hash_idx ON news (content_hash);
-- work queues per stage (partial indexes stay small: only pending rows)
CREATE INDEX news_pending_enrich_idx ON news (scraped_at) WHERE enriched_at IS NULL;
CREATE INDEX news_pending_embed_idx ON news (enriched_at) WHERE enriched_at IS NOT NULL AND embedded_at IS NULL;
CREATE INDEX news_pending_index_idx ON news (updated_at)
    WHERE enriched_at IS NOT NULL AND (indexed_version IS DISTINCT FROM version);
CREATE INDEX news_problem_idx ON news (problem) WHERE problem IS NOT NULL;

CREATE TABLE outbox (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    topic         text NOT NULL,
    aggregate_id  text NOT NULL,          -- the article's unique_id
    payload       jsonb NOT NULL,
    attributes    jsonb NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now(),
    available_at  timestamptz NOT NULL DEFAULT now(),  -- next attempt (backoff)
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text,
    published_at  timestamptz,
    message_id    text
);
CREATE INDEX outbox_pending_idx ON outbox (available_at, created_at) WHERE published_at IS NULL;
CREATE INDEX outbox_aggregate_idx ON outbox (aggregate_id);

CREATE TABLE dead_letters (
    id            bigserial PRIMARY KEY,
    subscription  text NOT NULL,
    message_key   text NOT NULL,          -- unique_id when known, else the Pub/Sub message_id
    message_id    text,
    unique_id     text,
    trace_id      text,
    reason        text NOT NULL,
    error         text,
    payload       text,
    attributes    jsonb NOT NULL DEFAULT '{}',
    first_seen    timestamptz NOT NULL DEFAULT now(),
    last_seen     timestamptz NOT NULL DEFAULT now(),
    attempts      integer NOT NULL DEFAULT 1,
    status        text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'redriven', 'discarded')),
    resolved_at   timestamptz,
    resolution    text,
    CONSTRAINT dead_letters_sub_key UNIQUE (subscription, message_key, reason)
);
CREATE INDEX dead_letters_open_idx ON dead_letters (reason, first_seen) WHERE status = 'open';

CREATE TABLE scrape_runs (
    id                      bigserial PRIMARY KEY,
    agency_key              text NOT NULL,
    status                  text NOT NULL CHECK (status IN ('success', 'partial', 'failed')),
    error_category          text CHECK (error_category IN
        ('network_error', 'anti_bot', 'empty_content', 'url_broken', 'html_changed', 'unknown')),
    error_message           text,
    articles_scraped        integer NOT NULL DEFAULT 0,
    articles_saved          integer NOT NULL DEFAULT 0,
    articles_updated        integer NOT NULL DEFAULT 0,
    execution_time_seconds  real,
    started_at              timestamptz NOT NULL DEFAULT now(),
    scraped_at              timestamptz NOT NULL DEFAULT now(),
    run_id                  text
);
CREATE INDEX scrape_runs_agency_idx ON scrape_runs (agency_key, scraped_at DESC);

-- seed 001: one row per changed field
CREATE TABLE news_update_history (
    id             bigserial PRIMARY KEY,
    news_id        bigint NOT NULL REFERENCES news (id) ON DELETE CASCADE,
    field_changed  varchar(50) NOT NULL,
    old_value      text,
    new_value      text,
    detected_at    timestamptz NOT NULL DEFAULT now(),
    source         text NOT NULL DEFAULT 'scrape' CHECK (source IN ('scrape', 'integrity'))
);
CREATE INDEX news_update_history_news_idx ON news_update_history (news_id, detected_at);

-- integrity check state per article (seed 001)
CREATE TABLE integrity_state (
    news_id               bigint PRIMARY KEY REFERENCES news (id) ON DELETE CASCADE,
    tier                  text,
    last_checked_at       timestamptz,
    next_due_at           timestamptz NOT NULL DEFAULT '-infinity',
    checks                integer NOT NULL DEFAULT 0,
    etag                  text,
    last_modified         text,
    page_updated_at       timestamptz,
    image_status          text,
    content_status        text,
    http_status           integer,
    consecutive_failures  integer NOT NULL DEFAULT 0,
    last_error            text
);
CREATE INDEX integrity_state_due_idx ON integrity_state (next_due_at);
