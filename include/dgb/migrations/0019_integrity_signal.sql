-- Cheaper change signals (issue 36): a Plone 6 agency's @search sorted by modification date tells,
-- in one request, which of its articles changed (dgb.integrity.signal).
--
-- integrity_signal: per agency, the search read (url), the newest `modified` it has listed
-- (watermark: the next read must reach back to it), and since when every change is known
-- (covered_since, our clock: set when the first read succeeds, moved to the read's time when a
-- read cannot reach back to the watermark). An article checked at or after covered_since, and
-- not marked since, has not changed. Counters for `dgb status` and the run summaries.
CREATE TABLE integrity_signal (
    agency_key     text PRIMARY KEY,
    url            text NOT NULL,
    watermark      timestamptz,
    covered_since  timestamptz,
    last_read_at   timestamptz,
    last_error     text,
    last_error_at  timestamptz,
    reads          bigint NOT NULL DEFAULT 0,
    failures       bigint NOT NULL DEFAULT 0,
    changes        bigint NOT NULL DEFAULT 0,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- An article the signal listed as modified later than what we stored: signal_modified_at is the
-- listed `modified`, signal_seen_at when it was listed. It is checked at once (without validators);
-- a check that reads the page at least that new clears the mark (dgb.integrity.recording).
ALTER TABLE integrity_state
    ADD COLUMN signal_modified_at timestamptz,
    ADD COLUMN signal_seen_at     timestamptz;
CREATE INDEX integrity_state_signal_idx ON integrity_state (signal_seen_at) WHERE signal_modified_at IS NOT NULL;
