-- Integrity under a request budget (issue 14): what the budget scheduler
-- (dgb.integrity.tiers.choose) needs per article, and time to first modification measured from
-- the page's own dateModified.
--
--   last_changed_at   when the article last changed: the page's dateModified of the change when
--                     it has one, else when we detected it (edits come in bursts: the scheduler
--                     looks sooner after a change);
--   first_modified_at the first modification, dated the same way (the agency metrics' time to
--                     first modification; NULL until one is detected);
--   image_checked_at  the last image check (images are re-checked less often than text).
ALTER TABLE integrity_state
    ADD COLUMN last_changed_at   timestamptz,
    ADD COLUMN first_modified_at timestamptz,
    ADD COLUMN image_checked_at  timestamptz;

-- Existing history: detection times (the page's dateModified was not recorded with it).
UPDATE integrity_state s
   SET last_changed_at = h.last_at, first_modified_at = h.first_at
  FROM (SELECT news_id, min(detected_at) AS first_at, max(detected_at) AS last_at
          FROM news_update_history WHERE field_changed <> 'url' GROUP BY news_id) h
 WHERE h.news_id = s.news_id;
UPDATE integrity_state SET image_checked_at = last_checked_at WHERE image_status IS NOT NULL;

-- Per-agency metrics: as in 0007, time to first modification from first_modified_at.
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
           avg(EXTRACT(EPOCH FROM coalesce(s.first_modified_at, m.first_detected_at) - n.published_at)
               / 3600.0) FILTER (WHERE m.news_id IS NOT NULL)                         AS mean_hours_to_first_modification,
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
