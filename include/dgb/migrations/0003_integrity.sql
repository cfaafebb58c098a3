-- Integrity service (seed 001): every article enrolled for checks, the indexed due set per
-- tier, a log of checks with a daily roll-up, and the metrics views operators read.

-- Every article gets a state row when it is inserted (tier NULL = not placed yet; the service
-- places it by age, see dgb.integrity.tiers.assign_tiers). Statement-level, so bulk inserts
-- pay one INSERT ... SELECT.
CREATE FUNCTION integrity_enrol_news() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO integrity_state (news_id)
    SELECT id FROM enrolled_news
    ON CONFLICT (news_id) DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER news_integrity_enrol
    AFTER INSERT ON news
    REFERENCING NEW TABLE AS enrolled_news
    FOR EACH STATEMENT EXECUTE FUNCTION integrity_enrol_news();

INSERT INTO integrity_state (news_id) SELECT id FROM news ON CONFLICT (news_id) DO NOTHING;

-- The due set of one tier: never checked (-infinity) first, then the most overdue.
CREATE INDEX integrity_state_tier_due_idx ON integrity_state (tier, next_due_at, news_id);
-- Articles not placed in a tier yet (new ones): stays tiny.
CREATE INDEX integrity_state_unplaced_idx ON integrity_state (news_id) WHERE tier IS NULL;

-- One row per check (kept DGB_INTEGRITY_LOG_DAYS days, default 14).
CREATE TABLE integrity_checks (
    id              bigserial PRIMARY KEY,
    news_id         bigint NOT NULL REFERENCES news (id) ON DELETE CASCADE,
    agency_key      text NOT NULL,
    tier            text,
    checked_at      timestamptz NOT NULL DEFAULT now(),
    outcome         text NOT NULL CHECK (outcome IN ('unchanged', 'modified', 'removed', 'image_broken', 'error')),
    content_status  text,
    image_status    text,
    http_status     integer,
    bytes           integer NOT NULL DEFAULT 0,
    changed_fields  text[] NOT NULL DEFAULT '{}',
    duration_ms     integer,
    error           text
);
CREATE INDEX integrity_checks_checked_at_idx ON integrity_checks (checked_at);
CREATE INDEX integrity_checks_news_idx ON integrity_checks (news_id, checked_at DESC);

-- Daily roll-up of checks (kept for good): the per-tier / per-agency counts read from here.
CREATE TABLE integrity_daily (
    day         date NOT NULL,
    tier        text NOT NULL,
    agency_key  text NOT NULL,
    outcome     text NOT NULL,
    checks      bigint NOT NULL DEFAULT 0,
    bytes       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (day, tier, agency_key, outcome)
);

-- Check counts and outcomes per tier (all time and the last 24 h of days).
CREATE VIEW integrity_tier_outcomes AS
SELECT tier,
       outcome,
       sum(checks)::bigint                                              AS checks,
       coalesce(sum(checks) FILTER (WHERE day >= current_date - 1), 0)::bigint AS checks_recent,
       sum(bytes)::bigint                                               AS bytes
FROM integrity_daily
GROUP BY tier, outcome;

-- Modification types: one row per agency, field and detection source.
CREATE VIEW integrity_modification_types AS
SELECT n.agency_key, h.field_changed, h.source, count(*)::bigint AS changes
FROM news_update_history h
JOIN news n ON n.id = h.news_id
GROUP BY n.agency_key, h.field_changed, h.source;

-- Per-agency metrics (seed 001):
--   modification_rate = checked articles with at least one recorded modification / checked articles
--   mean_hours_to_first_modification = mean(first detection of a change - publication), hours
--   broken_link_rate = checked articles removed at the source or with a broken image / checked
-- Modifications count whoever detected them (scraper re-read or integrity check): an edit is an
-- edit; integrity_modification_types splits by source.
CREATE VIEW integrity_agency_metrics AS
WITH mods AS (
    SELECT news_id,
           min(detected_at)                                   AS first_detected_at,
           count(*) FILTER (WHERE field_changed = 'title')     AS title_changes,
           count(*) FILTER (WHERE field_changed = 'content')   AS content_changes,
           count(*) FILTER (WHERE field_changed = 'image_url') AS image_changes,
           count(*) FILTER (WHERE field_changed = 'subtitle')  AS subtitle_changes,
           count(*) FILTER (WHERE source = 'integrity')        AS integrity_changes
    FROM news_update_history
    GROUP BY news_id
), checks AS (
    SELECT agency_key, sum(checks)::bigint AS checks,
           coalesce(sum(checks) FILTER (WHERE outcome = 'error'), 0)::bigint AS failed_checks
    FROM integrity_daily
    GROUP BY agency_key
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
       coalesce(c.failed_checks, 0)::bigint                                   AS failed_checks
FROM per_agency p
LEFT JOIN checks c ON c.agency_key = p.agency_key;

-- Articles an operator should look at (removed at the source, broken image, ...).
CREATE VIEW integrity_problems AS
SELECT n.unique_id, n.agency_key, n.title, n.url, n.problem, n.problem_at, n.image_broken, n.removed_at,
       s.tier, s.last_checked_at, s.content_status, s.image_status, s.http_status,
       s.consecutive_failures, s.last_error
FROM news n
LEFT JOIN integrity_state s ON s.news_id = n.id
WHERE n.problem IS NOT NULL OR n.image_broken OR n.removed_at IS NOT NULL OR s.consecutive_failures > 0;
