-- One request budget per host, shared by every task on every worker (issue 14; dgb.hostbudget).
-- A request takes a token (requests/s, spaced by next_at) and an in-flight slot (a lease that
-- expires if its holder dies); a 429/503 Retry-After or a 5xx streak sets a host-wide backoff.

CREATE TABLE host_budgets (
    host            text PRIMARY KEY,           -- URL authority as requested: www.gov.br, 127.0.0.1:8090
    rate_per_s      double precision NOT NULL CHECK (rate_per_s > 0),
    max_in_flight   integer NOT NULL CHECK (max_in_flight >= 1),
    reserved        integer NOT NULL DEFAULT 0 CHECK (reserved >= 0),  -- slots only the top priority takes
    next_at         timestamptz NOT NULL DEFAULT '-infinity',  -- earliest time of the next token
    backoff_until   timestamptz,                -- host-wide: no token before this
    backoff_reason  text,
    error_streak    integer NOT NULL DEFAULT 0, -- consecutive 5xx / 408 / network errors
    granted         bigint NOT NULL DEFAULT 0,  -- tokens granted since the row exists
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- In-flight requests: one row per request being made; deleted when it ends, ignored (and swept)
-- after lease_until, so a killed worker never leaks a slot for longer than the lease.
CREATE TABLE host_slots (
    id           bigserial PRIMARY KEY,
    host         text NOT NULL REFERENCES host_budgets (host) ON DELETE CASCADE,
    priority     smallint NOT NULL,             -- 0 = scrape (listings, new articles), 1 = integrity
    holder       text NOT NULL,                 -- host:pid of the process, for operators
    acquired_at  timestamptz NOT NULL,
    lease_until  timestamptz NOT NULL
);
CREATE INDEX host_slots_host_idx ON host_slots (host, lease_until);

-- Requests waiting for a token or a slot; refreshed while they wait, ignored once expired.
CREATE TABLE host_waiters (
    id          bigserial PRIMARY KEY,
    host        text NOT NULL,
    priority    smallint NOT NULL,
    holder      text NOT NULL,
    since       timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX host_waiters_host_idx ON host_waiters (host, priority, expires_at);

-- The last minutes of grants per host: the measured rate shown by `dgb status` and used by
-- available_rate(); pruned as grants are made.
CREATE TABLE host_grants (
    host      text NOT NULL,
    at        timestamptz NOT NULL,
    priority  smallint NOT NULL
);
CREATE INDEX host_grants_host_at_idx ON host_grants (host, at);
