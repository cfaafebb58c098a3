-- One row per run of the portal-engagement jobs (dgb.engagement): the trending scores and the
-- Umami view-count import. Besides the report (what was scored, changed, pushed to Typesense),
-- a run's start is the watermark of the next one: every news_features row written, and every
-- article (re)indexed, since the last run that pushed everything is pushed again, so a push
-- that failed, or a whole-document upsert that raced a push, is repaired by the next run.
CREATE TABLE engagement_runs (
    id          bigserial PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('trending', 'views')),
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    status      text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'ok', 'failed')),
    figures     jsonb NOT NULL DEFAULT '{}',
    error       text
);
CREATE INDEX engagement_runs_kind_ok_idx ON engagement_runs (kind, started_at DESC) WHERE status = 'ok';
