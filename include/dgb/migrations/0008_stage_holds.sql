-- Poison work never wedges a stage (issue 13). See dgb.pipeline.stage and dgb.pipeline.resilience.
--
-- An article whose processing failed PERMANENTLY in a stage (bad input, a 4xx validation error, an
-- unparseable answer; never an outage) is held out of that stage's sweep: hold_stage names the
-- stage, hold_failures counts its permanent failures there, hold_reason is the last reason. After
-- DGB_STAGE_MAX_FAILURES of them the row is parked (parked_at): only an operator's redrive (or a
-- manual run naming it) takes it up again. A later success clears all four.
ALTER TABLE news
    ADD COLUMN hold_stage     text,
    ADD COLUMN hold_reason    text,
    ADD COLUMN hold_failures  integer NOT NULL DEFAULT 0,
    ADD COLUMN parked_at      timestamptz;

-- The sweeps' queues without the held rows, so ORDER BY ... LIMIT reaches real work however many
-- poison rows there are. Each predicate is the stage's sweep rule (dgb.pipeline.definitions) as
-- PostgreSQL normalises it. (Embed's current-model rule takes a parameter, which no partial index
-- can imply; its sweep keeps using the plain scan of news_pending_embed_idx and similar.)
CREATE INDEX news_sweep_enrich_idx ON news (scraped_at)
    WHERE removed_at IS NULL AND enriched_at IS NULL AND hold_stage IS DISTINCT FROM 'enrich';
CREATE INDEX news_sweep_index_idx ON news (updated_at)
    WHERE enriched_at IS NOT NULL AND indexed_version IS DISTINCT FROM version
      AND hold_stage IS DISTINCT FROM 'index';
CREATE INDEX news_held_idx ON news (hold_stage, hold_reason) WHERE hold_stage IS NOT NULL;

-- A dead letter whose article a later run processed is closed as 'resolved' (not redriven by hand).
ALTER TABLE dead_letters DROP CONSTRAINT IF EXISTS dead_letters_status_check;
ALTER TABLE dead_letters ADD CONSTRAINT dead_letters_status_check
    CHECK (status IN ('open', 'redriven', 'discarded', 'resolved'));

-- One circuit breaker per dependency (model_service, bedrock, typesense, postgresql), shared by
-- every stage run: after DGB_BREAKER_THRESHOLD consecutive transient failures it opens until
-- open_until; then one probe (half-open) closes it again or re-opens it for longer.
CREATE TABLE stage_breakers (
    name         text PRIMARY KEY,
    failures     integer NOT NULL DEFAULT 0,     -- consecutive transient failures
    opens        integer NOT NULL DEFAULT 0,     -- consecutive openings (grows the cool-down)
    open_until   timestamptz,
    last_error   text,
    updated_at   timestamptz NOT NULL DEFAULT now()
);
