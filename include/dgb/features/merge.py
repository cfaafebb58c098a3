"""Merge two registry entities of the same type (``dgb features entities merge FROM INTO``).

One transaction, on the caller's cursor:

* FROM's aliases (``entity_alias``, keyed by (normalised alias, type)) move to INTO, and FROM's
  own names (its canonical name and its ``aliases`` list) become aliases of INTO where that key is
  free, so future mentions of any of them resolve to INTO; INTO's ``aliases`` list takes FROM's names;
* FROM's ``news_entities`` rows move to INTO (an article that had both keeps one row: counts added,
  the higher salience kept);
* every article whose ``news_features.features.entities`` names FROM gets INTO as that mention's
  ``canonical_id``, and its ``news.version`` is bumped so the index stage re-indexes it whole (as
  :mod:`dgb.features.backfill` does);
* FROM's registry row stays as a marker, ``extra.merged_into = INTO`` (with no alias and no article
  left): a proposed id that was merged resolves to INTO (:mod:`dgb.features.registry`), and running
  the merge again finds it done. Markers that pointed at FROM now point at INTO (one hop always).

Refused (:class:`MergeRefused`): FROM and INTO the same id, an id not in the registry, two types,
FROM merged into another entity already, INTO itself merged into another.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg.types.json import Jsonb

from dgb import db
from dgb.features.entities import normalize


class MergeRefused(ValueError):
    """The merge cannot be done as asked (the message says why)."""


@dataclass
class MergeResult:
    from_id: str
    into_id: str
    type: str
    aliases: int = 0  # alias rows moved or added
    articles: int = 0  # articles whose features were rewritten (version bumped)
    rows: int = 0  # news_entities rows moved
    already: bool = False  # FROM had been merged into INTO before

    def summary(self, dry_run: bool = False) -> str:
        verb = "would move" if dry_run else "moved"
        head = (
            f"entities merge{' (dry run)' if dry_run else ''}: {self.from_id} -> {self.into_id} ({self.type})"
        )
        done = "; already merged" if self.already else ""
        return (
            f"{head}{done}; {verb}: aliases {self.aliases}, news_entities rows {self.rows}, "
            f"articles (re-indexed) {self.articles}"
        )


_REWRITE = """
UPDATE news_features nf
   SET features = jsonb_set(nf.features, '{entities}', (
           SELECT jsonb_agg(CASE WHEN e.value ->> 'canonical_id' = %(from)s
                                 THEN jsonb_set(e.value, '{canonical_id}', to_jsonb(%(into)s::text))
                                 ELSE e.value END ORDER BY e.ordinality)
             FROM jsonb_array_elements(nf.features -> 'entities') WITH ORDINALITY AS e(value, ordinality)))
 WHERE nf.unique_id = ANY(%(ids)s::text[])
   AND jsonb_typeof(nf.features -> 'entities') = 'array'
   AND jsonb_array_length(nf.features -> 'entities') > 0
"""


def _entities(cur, ids: list[str]) -> dict[str, tuple]:
    cur.execute(
        "SELECT entity_id, type, canonical_name, aliases, extra ->> 'merged_into' FROM entity_registry"
        " WHERE entity_id = ANY(%s::text[]) ORDER BY entity_id FOR UPDATE",
        (ids,),
    )
    return {r[0]: r[1:] for r in cur.fetchall()}


def merge(cur, from_id: str, into_id: str) -> MergeResult:
    """Merge FROM into INTO on ``cur`` (module docstring); raises :class:`MergeRefused`."""
    if from_id == into_id:
        raise MergeRefused(f"FROM and INTO are the same id ({from_id}): nothing to merge")
    rows = _entities(cur, [from_id, into_id])
    for eid in (from_id, into_id):
        if eid not in rows:
            raise MergeRefused(f"no entity {eid!r} in entity_registry")
    (ftype, fname, faliases, fmerged), (itype, _, ialiases, imerged) = rows[from_id], rows[into_id]
    if ftype != itype:
        raise MergeRefused(f"{from_id} is {ftype} and {into_id} is {itype}: only one type merges")
    if imerged:
        raise MergeRefused(f"{into_id} was merged into {imerged}: merge into {imerged} instead")
    if fmerged and fmerged != into_id:
        raise MergeRefused(f"{from_id} was merged into {fmerged} already, not into {into_id}")
    out = MergeResult(from_id, into_id, ftype, already=fmerged == into_id)

    cur.execute("UPDATE entity_alias SET entity_id = %s WHERE entity_id = %s", (into_id, from_id))
    out.aliases = cur.rowcount
    names = [n for n in [fname, *(faliases if isinstance(faliases, list) else [])] if isinstance(n, str)]
    keys = sorted({normalize(n) for n in names if normalize(n)})
    if keys and not out.already:
        cur.execute(
            "INSERT INTO entity_alias (alias_norm, type, entity_id, source, confidence)"
            " SELECT k, %s, %s, 'manual', 1.0 FROM unnest(%s::text[]) AS k"
            " ON CONFLICT (alias_norm, type) DO NOTHING",
            (ftype, into_id, keys),
        )
        out.aliases += cur.rowcount
        have = ialiases if isinstance(ialiases, list) else []
        cur.execute(
            "UPDATE entity_registry SET aliases = %s,"
            " extra = jsonb_set(extra, '{merged_from}', COALESCE(extra -> 'merged_from', '[]') || %s)"
            " WHERE entity_id = %s",
            (Jsonb(list(dict.fromkeys([*have, *names]))), Jsonb([from_id]), into_id),
        )

    # the articles that name FROM: its news_entities rows and its mentions in the features
    cur.execute(
        "SELECT unique_id FROM news_entities WHERE entity_id = %(from)s UNION"
        " SELECT unique_id FROM news_features"
        " WHERE features -> 'entities'"
        " @> jsonb_build_array(jsonb_build_object('canonical_id', %(from)s::text))",
        {"from": from_id},
    )
    articles = sorted(r[0] for r in cur.fetchall())
    if articles:
        db.lock_articles(cur, articles)
    cur.execute(
        "INSERT INTO news_entities (unique_id, entity_id, type, count, salience, published_at)"
        " SELECT unique_id, %(into)s, type, count, salience, published_at FROM news_entities"
        " WHERE entity_id = %(from)s"
        " ON CONFLICT (unique_id, entity_id) DO UPDATE SET count = news_entities.count + EXCLUDED.count,"
        " salience = GREATEST(news_entities.salience, EXCLUDED.salience)",
        {"from": from_id, "into": into_id},
    )
    cur.execute("DELETE FROM news_entities WHERE entity_id = %s", (from_id,))
    out.rows = cur.rowcount
    if articles:
        cur.execute(_REWRITE, {"from": from_id, "into": into_id, "ids": articles})
        cur.execute(
            "UPDATE news SET version = version + 1, updated_at = now() WHERE unique_id = ANY(%s::text[])",
            (articles,),
        )
        out.articles = cur.rowcount

    cur.execute(
        "UPDATE entity_registry SET extra = extra || jsonb_build_object('merged_into', %s::text)"
        " WHERE entity_id = %s OR extra ->> 'merged_into' = %s",
        (into_id, from_id, from_id),
    )
    return out
