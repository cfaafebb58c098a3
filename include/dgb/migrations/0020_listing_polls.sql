-- Listing polls per agency and hour (issue 36, "Visible"; dgb.scraper.polls): how many times the
-- scrape_dispatcher read an agency's listing, how many of those polls showed an unknown item
-- (found) and how many failed. Written by the dispatcher in the transaction that writes
-- scrape_cadence, read by `dgb status` and the pipeline view (polls, yield = articles / polls).
-- hour is the start of the UTC hour of the tick; rows older than 7 days are pruned by the dispatcher.
CREATE TABLE listing_polls (
    agency_key  text NOT NULL,
    hour        timestamptz NOT NULL,
    polls       integer NOT NULL DEFAULT 0,
    found       integer NOT NULL DEFAULT 0,
    failed      integer NOT NULL DEFAULT 0,
    PRIMARY KEY (agency_key, hour)
);
CREATE INDEX listing_polls_hour_idx ON listing_polls (hour);
