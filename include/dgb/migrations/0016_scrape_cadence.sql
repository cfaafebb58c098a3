-- Each agency's learnt scrape cadence (issue 27, dgb.scraper.dispatch): written by the
-- scrape_dispatcher DAG every minute, read by `dgb status` and the UI's pipeline view.
-- interval_s and reason come from dgb.scraper.cadence (reason: busy, recent, history, dormant,
-- budget); dispatched_at is when the dispatcher last emitted the agency's due asset event (a poll
-- in flight counts as a poll, so it is not dispatched twice); lag_p50_s is the median
-- publication -> first stored delay of the agency's articles stored in the last 24 hours.
CREATE TABLE scrape_cadence (
    agency_key     text PRIMARY KEY,
    interval_s     real NOT NULL,
    reason         text NOT NULL,
    rate_per_hour  real NOT NULL DEFAULT 0,
    last_poll_at   timestamptz,
    due_at         timestamptz,
    dispatched_at  timestamptz,
    lag_p50_s      real,
    lag_articles   integer NOT NULL DEFAULT 0,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
