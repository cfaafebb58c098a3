-- Minted entity ids namespaced by type (dgb.features.entities.mint_id): dgb_<type>_<slug>
-- (dgb_org_saude, dgb_loc_planalto), so a minted id can no longer be an agency's dgb_<key> and one
-- name under two types is two ids. This moves the rows THIS pipeline minted earlier in the old form
-- dgb_<slug> to the new form, once, in this transaction:
-- * which rows: provenance rules or llm, id dgb_<...> not already namespaced, not an agency's id
--   (dgb_<key> of an agencies row, or a row with an agency_key), created since migration 0014 was applied (on an adopted
--   database that is the adoption: production's rows, its LLM-minted dgb_ ids and its Wikidata ids,
--   are older and are never renamed; on a database adopted in the same run as this migration no
--   row qualifies);
-- * the new id is dgb_<lower(type)>_ + the old slug; where that exceeds 64 characters the slug is
--   cut and a 6-hex digest added, as mint_id does: the old id's own digest (the SHA-1 of the same
--   name) when it had one, else md5's (PostgreSQL has no SHA-1 built in; ids are opaque and the
--   moved aliases resolve to them). A new id already taken is left alone (the row keeps its id);
-- * moved with it: its aliases (entity_alias), its news_entities rows, and the canonical_id of the
--   articles' news_features.features.entities, whose news.version is bumped so the index stage
--   re-indexes them (as `dgb features backfill` does); the registry row keeps every column, with
--   extra.former_id = the old id.
-- And the aliases this pipeline seeded from agency keys that are ordinary words ("saude",
-- "cultura": dgb.features.entities.WORD_KEYS) are removed: "Saúde" alone is no agency's name.

CREATE TEMP TABLE entity_id_moves ON COMMIT DROP AS
WITH ours AS (
    SELECT r.entity_id AS old_id, r.canonical_name, 'dgb_' || lower(r.type) || '_' AS prefix,
           substr(r.entity_id, 5) AS rest
      FROM entity_registry r
     WHERE r.provenance IN ('rules', 'llm')
       AND r.entity_id LIKE 'dgb\_%'
       AND r.entity_id !~ '^dgb_(org|per|loc|event|policy|law|work|product)_'
       AND r.type IN ('ORG', 'PER', 'LOC', 'EVENT', 'POLICY', 'LAW', 'WORK', 'PRODUCT')
       AND r.agency_key IS NULL
       AND NOT EXISTS (SELECT FROM agencies a WHERE 'dgb_' || a.key = r.entity_id)
       AND r.created_at >= (SELECT applied_at FROM schema_migrations WHERE version = '0014')
), named AS (
    SELECT old_id,
           CASE
               WHEN length(prefix || rest) <= 64 THEN prefix || rest
               WHEN rest ~ '_[0-9a-f]{6}$' THEN
                   prefix || rtrim(left(split_part(rest, '_', 1), 64 - length(prefix) - 7), '-')
                   || '_' || right(rest, 6)
               ELSE prefix || rtrim(left(rest, 64 - length(prefix) - 7), '-')
                   || '_' || left(md5(canonical_name), 6)
           END AS new_id
      FROM ours
)
SELECT DISTINCT ON (new_id) old_id, new_id
  FROM named
 WHERE NOT EXISTS (SELECT FROM entity_registry x WHERE x.entity_id = named.new_id)
 ORDER BY new_id, old_id;

INSERT INTO entity_registry (entity_id, canonical_name, type, aliases, wikidata_id, wikidata_url,
                             description, agency_key, confidence, provenance, extra, created_at)
SELECT m.new_id, r.canonical_name, r.type, r.aliases, r.wikidata_id, r.wikidata_url, r.description,
       r.agency_key, r.confidence, r.provenance, r.extra || jsonb_build_object('former_id', r.entity_id),
       r.created_at
  FROM entity_registry r JOIN entity_id_moves m ON m.old_id = r.entity_id;

UPDATE entity_alias a SET entity_id = m.new_id FROM entity_id_moves m WHERE a.entity_id = m.old_id;

-- the articles that mention a moved id (each canonical id this pipeline wrote has its news_entities row)
CREATE TEMP TABLE entity_id_articles ON COMMIT DROP AS
SELECT DISTINCT n.unique_id FROM news_entities n JOIN entity_id_moves m ON m.old_id = n.entity_id;

UPDATE news_entities n SET entity_id = m.new_id FROM entity_id_moves m WHERE n.entity_id = m.old_id;

UPDATE news_features nf
   SET features = jsonb_set(nf.features, '{entities}', (
           SELECT jsonb_agg(CASE WHEN m.new_id IS NULL THEN e.value
                                 ELSE jsonb_set(e.value, '{canonical_id}', to_jsonb(m.new_id)) END
                            ORDER BY e.ordinality)
             FROM jsonb_array_elements(nf.features -> 'entities') WITH ORDINALITY AS e(value, ordinality)
             LEFT JOIN entity_id_moves m ON m.old_id = e.value ->> 'canonical_id'))
 WHERE nf.unique_id IN (SELECT unique_id FROM entity_id_articles)
   AND jsonb_typeof(nf.features -> 'entities') = 'array'
   AND jsonb_array_length(nf.features -> 'entities') > 0;

UPDATE news SET version = version + 1, updated_at = now()
 WHERE unique_id IN (SELECT unique_id FROM entity_id_articles);

DELETE FROM entity_registry r USING entity_id_moves m WHERE r.entity_id = m.old_id;

DELETE FROM entity_alias a
 WHERE a.source = 'agencies_seed' AND a.type = 'ORG' AND a.entity_id = 'dgb_' || a.alias_norm
   AND a.alias_norm IN ('aids', 'cidades', 'compras', 'cultura', 'defesa', 'economia', 'esporte',
                        'fazenda', 'gestao', 'mulheres', 'museus', 'planalto', 'saude', 'servidor',
                        'turismo', 'tvbrasil', 'nfse', 'esocial', 'siscomex')
   AND a.created_at >= (SELECT applied_at FROM schema_migrations WHERE version = '0014');
