-- Outbox states (issue 13): pending (published_at and failed_at NULL), published (published_at),
-- and the terminal failed (failed_at, with the error in last_error) for a publish Pub/Sub refuses
-- for good (too large, invalid, topic not found / permission denied): the relay stops retrying it
-- and `dgb status` / the reconcile report count it. See dgb.outbox.
ALTER TABLE outbox ADD COLUMN failed_at timestamptz;
ALTER TABLE outbox ADD CONSTRAINT outbox_one_final_state CHECK (published_at IS NULL OR failed_at IS NULL);

-- The relay's due rows: pending only.
DROP INDEX IF EXISTS outbox_pending_idx;
CREATE INDEX outbox_pending_idx ON outbox (available_at, created_at)
    WHERE published_at IS NULL AND failed_at IS NULL;
CREATE INDEX outbox_failed_idx ON outbox (failed_at) WHERE failed_at IS NOT NULL;
-- The purge of published rows past the retention (DGB_OUTBOX_RETENTION_DAYS).
CREATE INDEX outbox_published_idx ON outbox (published_at) WHERE published_at IS NOT NULL;
