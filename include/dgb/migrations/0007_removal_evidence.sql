-- Removal needs evidence (issue 16): a single 404 only makes an article suspect; hiding it needs
-- the gone answer again after a delay, and pauses while its agency or host is failing broadly.
-- See dgb.integrity.evidence.

-- The current streak of gone answers (404/410) per article: NULL/0 after a normal answer.
ALTER TABLE integrity_state
    ADD COLUMN gone_since   timestamptz,
    ADD COLUMN gone_checks  integer NOT NULL DEFAULT 0,
    ADD COLUMN gone_status  integer;

-- The host each check went to, for the per-host breaker; both breakers count the last hour.
ALTER TABLE integrity_checks ADD COLUMN host text;
CREATE INDEX integrity_checks_agency_time_idx ON integrity_checks (agency_key, checked_at DESC);
CREATE INDEX integrity_checks_host_time_idx ON integrity_checks (host, checked_at DESC) WHERE host IS NOT NULL;

-- New check outcomes: suspect_removed (gone once, not hidden) and moved (found at a new URL).
ALTER TABLE integrity_checks DROP CONSTRAINT integrity_checks_outcome_check;
ALTER TABLE integrity_checks ADD CONSTRAINT integrity_checks_outcome_check CHECK (outcome IN
    ('unchanged', 'modified', 'moved', 'suspect_removed', 'removed', 'image_broken', 'error'));

-- Per agency / per host breaker: while tripped, removals there pause (rows exist only for scopes
-- that tripped at least once).
CREATE TABLE integrity_breakers (
    scope       text NOT NULL CHECK (scope IN ('agency', 'host')),
    key         text NOT NULL,
    tripped     boolean NOT NULL DEFAULT false,
    tripped_at  timestamptz,
    cleared_at  timestamptz,
    checks      integer,            -- checks in the window when it tripped
    bad_checks  integer,            -- ... of which answered 404/410/5xx
    trips       integer NOT NULL DEFAULT 1,
    reason      text,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key)
);
CREATE INDEX integrity_breakers_tripped_idx ON integrity_breakers (scope, key) WHERE tripped;

-- Articles hidden on a single gone answer before this migration were not confirmed: they become
-- suspects again (searchable: the index stage re-adds them), with that answer as the first
-- evidence, so the next gone answer after the delay confirms them and a normal one clears them.
UPDATE integrity_state s
   SET gone_since = n.removed_at, gone_checks = 1, gone_status = coalesce(s.http_status, 404),
       next_due_at = '-infinity'
  FROM news n
 WHERE n.id = s.news_id AND n.removed_at IS NOT NULL AND n.problem = 'removed';
UPDATE news
   SET removed_at = NULL, problem = 'suspect_removed', indexed_version = NULL, updated_at = now()
 WHERE removed_at IS NOT NULL AND problem = 'removed';

-- Per-agency metrics: a URL move is recorded in the history but is not a modification of the
-- article; suspects (gone once, still indexed) and moved articles are counted apart.
CREATE OR REPLACE VIEW integrity_agency_metrics AS
WITH mods AS (
    SELECT news_id,
           min(detected_at)                                   AS first_detected_at,
           count(*) FILTER (WHERE field_changed = 'title')     AS title_changes,
           count(*) FILTER (WHERE field_changed = 'content')   AS content_changes,
           count(*) FILTER (WHERE field_changed = 'image_url') AS image_changes,
           count(*) FILTER (WHERE field_changed = 'subtitle')  AS subtitle_changes,
           count(*) FILTER (WHERE source = 'integrity')        AS integrity_changes
    FROM news_update_history
    WHERE field_changed <> 'url'
    GROUP BY news_id
), checks AS (
    SELECT agency_key, sum(checks)::bigint AS checks,
           coalesce(sum(checks) FILTER (WHERE outcome = 'error'), 0)::bigint AS failed_checks
    FROM integrity_daily
    GROUP BY agency_key
), evidence AS (
    SELECT n.agency_key,
           count(DISTINCT n.id) FILTER (WHERE n.problem = 'suspect_removed')::bigint AS suspect_articles,
           count(DISTINCT h.news_id)::bigint                              AS moved_articles
    FROM news n
    LEFT JOIN news_update_history h ON h.news_id = n.id AND h.field_changed = 'url'
    WHERE n.problem = 'suspect_removed' OR h.news_id IS NOT NULL
    GROUP BY n.agency_key
), per_agency AS (
    SELECT n.agency_key,
           max(n.agency_name)                                                        AS agency_name,
           count(*)::bigint                                                          AS articles,
           count(*) FILTER (WHERE s.last_checked_at IS NOT NULL)::bigint             AS checked_articles,
           count(*) FILTER (WHERE s.last_checked_at IS NOT NULL
                            AND m.news_id IS NOT NULL)::bigint                       AS modified_articles,
           count(*) FILTER (WHERE m.news_id IS NOT NULL)::bigint                     AS modified_articles_all,
           avg(EXTRACT(EPOCH FROM m.first_detected_at - n.published_at) / 3600.0)    AS mean_hours_to_first_modification,
           coalesce(sum(m.title_changes), 0)::bigint                                 AS title_changes,
           coalesce(sum(m.content_changes), 0)::bigint                               AS content_changes,
           coalesce(sum(m.image_changes), 0)::bigint                                 AS image_changes,
           coalesce(sum(m.subtitle_changes), 0)::bigint                              AS subtitle_changes,
           coalesce(sum(m.integrity_changes), 0)::bigint                             AS integrity_detected_changes,
           count(*) FILTER (WHERE s.last_checked_at IS NOT NULL AND n.image_broken)::bigint AS image_broken_articles,
           count(*) FILTER (WHERE s.last_checked_at IS NOT NULL
                            AND n.removed_at IS NOT NULL)::bigint                    AS removed_articles,
           count(*) FILTER (WHERE s.last_checked_at IS NOT NULL
                            AND (n.image_broken OR n.removed_at IS NOT NULL))::bigint AS broken_articles
    FROM news n
    LEFT JOIN integrity_state s ON s.news_id = n.id
    LEFT JOIN mods m ON m.news_id = n.id
    GROUP BY n.agency_key
)
SELECT p.*,
       round(p.modified_articles::numeric / nullif(p.checked_articles, 0), 4) AS modification_rate,
       round(p.broken_articles::numeric / nullif(p.checked_articles, 0), 4)   AS broken_link_rate,
       coalesce(c.checks, 0)::bigint                                          AS checks,
       coalesce(c.failed_checks, 0)::bigint                                   AS failed_checks,
       coalesce(e.suspect_articles, 0)::bigint                                AS suspect_articles,
       coalesce(e.moved_articles, 0)::bigint                                  AS moved_articles
FROM per_agency p
LEFT JOIN checks c ON c.agency_key = p.agency_key
LEFT JOIN evidence e ON e.agency_key = p.agency_key;
