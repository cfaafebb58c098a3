-- Reconciliation (seed 000's daily safety net, plus a frequent sweep): bounded repair attempts per
-- article and one summary row per run. See dgb.reconcile.

-- How many times reconciliation re-sent an article's event since the article was last complete,
-- and when it last did. Past DGB_RECONCILE_MAX_ATTEMPTS the article is flagged
-- (news.problem = 'stuck') for an operator instead of being re-sent forever; both are reset once
-- the article is complete again (enriched, embedded with the current model, indexed at its version).
ALTER TABLE news
    ADD COLUMN reconcile_attempts integer NOT NULL DEFAULT 0,
    ADD COLUMN reconciled_at      timestamptz;

CREATE INDEX news_reconcile_idx ON news (reconciled_at) WHERE reconcile_attempts > 0;

-- One row per reconciliation / redrive / replay run: what was found, what was repaired.
CREATE TABLE reconcile_runs (
    id        bigserial PRIMARY KEY,
    run_at    timestamptz NOT NULL DEFAULT now(),
    mode      text NOT NULL CHECK (mode IN ('daily', 'sweep', 'manual', 'redrive', 'replay')),
    dry_run   boolean NOT NULL DEFAULT false,
    found     jsonb NOT NULL DEFAULT '{}',   -- {"enrich": n, "embed": n, "index": n, "outbox": n, "ts_missing": n, ...}
    repaired  jsonb NOT NULL DEFAULT '{}',   -- {"dgb.news.scraped": n, ..., "ts_deleted": n, "outbox_rescheduled": n}
    flagged   integer NOT NULL DEFAULT 0,    -- articles newly flagged 'stuck'
    seconds   real,
    detail    jsonb NOT NULL DEFAULT '{}'    -- parameters and samples of ids, for the operator
);
CREATE INDEX reconcile_runs_run_at_idx ON reconcile_runs (run_at DESC);
