-- Conditional listing polls (issue 27, dgb.scraper.conditional): per agency and listing URL, the
-- validators of the last full answer whose items were all known (etag, else last_modified), when
-- they were stored, and how many 304s in a row they have earned since (streak). The dispatcher
-- sends them as If-None-Match / If-Modified-Since; they are dropped (a full request) after
-- DGB_SCRAPE_VALIDATOR_MAX_HITS 304s in a row or DGB_SCRAPE_VALIDATOR_MAX_AGE seconds, so a
-- validator that fails to change can hide news for that long at most. hits / misses / full count
-- every poll (304 / 200 to a conditional request / unconditional request) for `dgb status`.
CREATE TABLE listing_validators (
    agency_key     text NOT NULL,
    url            text NOT NULL,
    etag           text,
    last_modified  text,
    stored_at      timestamptz,
    streak         integer NOT NULL DEFAULT 0,
    hits           bigint NOT NULL DEFAULT 0,
    misses         bigint NOT NULL DEFAULT 0,
    full_polls     bigint NOT NULL DEFAULT 0,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agency_key, url)
);
