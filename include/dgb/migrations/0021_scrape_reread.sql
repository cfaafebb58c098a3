-- Where the next regular scrape of an agency must read down to (dgb.scraper.run): the listing date
-- of the oldest article a run listed but could not fetch (a 503 after retries, a timeout, a 404 of
-- an address moved while the run paged). Regular runs stop at the third consecutive known article;
-- without this mark the articles stored around a skipped one put it below every later run's stop,
-- and it was never read again. A run that reads past the mark with nothing skipped deletes the row;
-- a mark older than a day is given up with a warning (a backfill reads it).
CREATE TABLE scrape_reread (
    agency_key   text PRIMARY KEY,
    reread_from  timestamptz NOT NULL,
    marked_at    timestamptz NOT NULL DEFAULT now()
);
