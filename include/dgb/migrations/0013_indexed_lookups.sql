-- Two questions asked often of a ~300k-row news table, each a full scan until now:
-- * every index stage run compares Typesense's document count with the articles PostgreSQL has
--   marked indexed (dgb.reconcile.drift.restore_lost_documents): a count over this predicate,
--   now an index-only scan of the rows it counts;
-- * dgb status, the UI's pipeline view and the latency history read commit -> searchable times
--   of the last hours or days (a range of indexed_at).
CREATE INDEX news_indexed_docs_idx ON news (indexed_version)
    WHERE indexed_version IS NOT NULL AND removed_at IS NULL AND enriched_at IS NOT NULL;
CREATE INDEX news_indexed_at_idx ON news (indexed_at) WHERE indexed_at IS NOT NULL;
