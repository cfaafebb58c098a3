"""Canonical entity ids in production's tables (migration 0014): ``entity_registry``,
``entity_alias`` (the resolver, keyed by (normalised alias, type)) and ``news_entities``.

:func:`resolve` gives each mention its ``canonical_id``: the alias table's answer for its
canonical form (then its text) when there is one, so an adopted database's Wikidata-linked ids
carry over; otherwise the id the extractor proposed (an agency's ``dgb_<key>``, a gazetteer QID);
otherwise a minted ``dgb_<type>_<slug>`` (:func:`dgb.features.entities.mint_id`). Ids not known yet
are registered with their aliases, so the next article resolves to the same id.
:func:`write_news_entities` replaces an article's rows. Everything runs on the caller's cursor (the
enrich chunk's transaction).

Every look-up and registration is keyed by (normalised alias, type): the same name under two types
is two entities. A proposed id is taken only when it fits the mention's type: a QID, an agency's
``dgb_<key>`` for an ORG (an agency of the ``agencies`` table), or a minted id in the type's
namespace; any other proposal (an LLM's ``dgb_planalto`` for a place) is ignored and an id minted.
A proposed id that was merged into another (``dgb features entities merge``: its registry row kept
with ``extra.merged_into``) resolves to the one it was merged into.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from psycopg.types.json import Jsonb

from dgb.features.entities import WORD_KEYS, is_qid, mint_id, minted_type, normalize

_LOOKUP = (
    "SELECT a.alias_norm, a.type, a.entity_id FROM entity_alias a"
    " JOIN unnest(%s::text[], %s::text[]) AS k(alias_norm, type)"
    " ON a.alias_norm = k.alias_norm AND a.type = k.type"
)
_REGISTER = (
    "INSERT INTO entity_registry (entity_id, canonical_name, type, aliases, wikidata_id, wikidata_url,"
    " agency_key, confidence, provenance)"
    " SELECT %s, %s, %s, %s, %s, %s, (SELECT key FROM agencies WHERE key = %s), %s, %s"
    " ON CONFLICT (entity_id) DO NOTHING"
)
_ALIAS = (
    "INSERT INTO entity_alias (alias_norm, type, entity_id, source, confidence)"
    " SELECT %s, %s, %s, %s, %s WHERE EXISTS (SELECT FROM entity_registry WHERE entity_id = %s)"
    " ON CONFLICT (alias_norm, type) DO NOTHING"
)
# each proposed id: is it an agency's id, and was it merged into another
_PROPOSED = (
    "SELECT k.id, a.key, r.extra ->> 'merged_into' FROM unnest(%s::text[]) AS k(id)"
    " LEFT JOIN agencies a ON 'dgb_' || a.key = k.id"
    " LEFT JOIN entity_registry r ON r.entity_id = k.id"
)


def _keys(mention: dict) -> list[tuple[str, str]]:
    forms = [mention.get("forma_canonica"), mention.get("text")]
    return list(dict.fromkeys((normalize(f), mention["type"]) for f in forms if f and normalize(f)))


def _proposals(cur, mentions: list[dict]) -> dict[str, tuple[str | None, str | None]]:
    """Proposed id -> (agency key or None, the id it was merged into or None)."""
    ids = sorted({m["canonical_id"] for m in mentions if m.get("canonical_id")})
    if not ids:
        return {}
    cur.execute(_PROPOSED, (ids,))
    return {i: (key, into) for i, key, into in cur.fetchall()}


def _proposed(mention: dict, proposals: dict[str, tuple[str | None, str | None]]) -> str | None:
    """The mention's proposed id when it fits its type (module docstring), merges followed."""
    pid = mention.get("canonical_id")
    if not pid:
        return None
    agency, into = proposals.get(pid, (None, None))
    fits = (
        is_qid(pid)
        or minted_type(pid) == mention["type"]
        or (agency is not None and mention["type"] == "ORG")
    )
    if not fits:
        return None
    return into or pid


def resolve(cur, mentions: list[dict], source: str = "rules") -> list[dict]:
    """The mentions with ``canonical_id`` set (new dicts); unknown ids registered (``source``:
    ``rules`` for the offline extractor, ``llm`` for Bedrock's)."""
    keys = sorted({k for m in mentions for k in _keys(m)})
    known: dict[tuple[str, str], str] = {}
    if keys:
        cur.execute(_LOOKUP, ([k[0] for k in keys], [k[1] for k in keys]))
        known = {(a, t): eid for a, t, eid in cur.fetchall()}
    proposals = _proposals(cur, mentions)
    out, new = [], {}
    for m in mentions:
        m = dict(m)
        hit = next((known[k] for k in _keys(m) if k in known), None)
        if hit is None:
            hit = _proposed(m, proposals) or mint_id(m.get("forma_canonica") or m["text"], m["type"])
            agency = proposals.get(hit, (None, None))[0] if m["type"] == "ORG" else None
            new.setdefault(hit, (m, source, agency))
        m["canonical_id"] = hit
        out.append(m)
    _register(cur, new)
    return out


def _register(cur, new: dict[str, tuple[dict, str, str | None]]) -> None:
    rows, aliases = [], []
    for entity_id, (m, source, agency) in sorted(new.items()):
        provenance = "wikidata" if is_qid(entity_id) else source
        forms = list(dict.fromkeys(f for f in (m.get("forma_canonica"), m["text"]) if f))
        qid = entity_id if is_qid(entity_id) else None
        url = f"https://www.wikidata.org/wiki/{qid}" if qid else None
        rows.append((entity_id, forms[0], m["type"], Jsonb(forms), qid, url, agency, 0.5, provenance))
        aliases += [(norm, t, entity_id, source, 0.5, entity_id) for norm, t in _keys(m)]
    if rows:
        cur.executemany(_REGISTER, rows)
        cur.executemany(_ALIAS, sorted(aliases))


def seed_agencies(cur) -> int:
    """Register every agency of the ``agencies`` table as ``dgb_<key>`` (ORG, provenance
    ``agencies_seed``) with its name, its name without a trailing parenthetical, that parenthetical
    and its key as aliases (not a key that is an ordinary word, :data:`WORD_KEYS`: "saude" is no
    name of the Ministry of Health); rows already there are left as they are. Returns the agencies
    seen."""
    cur.execute("SELECT key, name FROM agencies ORDER BY key")
    agencies = cur.fetchall()
    rows, aliases = [], []
    for key, name in agencies:
        forms = [name]
        if name.rstrip().endswith(")") and "(" in name:
            head, _, tail = name.rpartition("(")
            forms += [head.strip(), tail.rstrip(")").strip()]
        if key not in WORD_KEYS:
            forms.append(key)
        forms = list(dict.fromkeys(f for f in forms if normalize(f)))
        entity_id = f"dgb_{key}"
        rows.append((entity_id, name, "ORG", Jsonb(forms), None, None, key, 1.0, "agencies_seed"))
        aliases += [(normalize(f), "ORG", entity_id, "agencies_seed", 1.0, entity_id) for f in forms]
    cur.executemany(_REGISTER, rows)
    seen: set[tuple[str, str]] = set()
    unique = []
    for a in sorted(aliases):
        if (a[0], a[1]) not in seen:  # an alias two agencies share goes to the first (by key)
            seen.add((a[0], a[1]))
            unique.append(a)
    cur.executemany(_ALIAS, unique)
    return len(agencies)


def write_news_entities(cur, unique_id: str, mentions: Iterable[dict], published_at=None) -> int:
    """Replace the article's ``news_entities`` rows: one per canonical id (counts added,
    highest salience kept)."""
    return write_news_entities_many(cur, [(unique_id, mentions, published_at)])


def write_news_entities_many(cur, articles: Iterable[tuple[str, Iterable[dict], Any]]) -> int:
    """:func:`write_news_entities` for many ``(unique_id, mentions, published_at)`` in two
    statements (a chunk's articles). Returns the rows written."""
    params, ids = [], []
    for unique_id, mentions, published_at in articles:
        ids.append(unique_id)
        merged: dict[str, list] = {}
        for m in mentions:
            cid = m.get("canonical_id")
            if not cid:
                continue
            row = merged.setdefault(cid, [m["type"], 0, None])
            row[1] += int(m.get("count") or 1)
            s = m.get("salience")
            if s is not None and (row[2] is None or s > row[2]):
                row[2] = s
        params += [(unique_id, cid, t, c, s, published_at, cid) for cid, (t, c, s) in sorted(merged.items())]
    if not ids:
        return 0
    cur.execute("DELETE FROM news_entities WHERE unique_id = ANY(%s::text[])", (sorted(set(ids)),))
    if params:
        cur.executemany(
            "INSERT INTO news_entities (unique_id, entity_id, type, count, salience, published_at)"
            " SELECT %s, %s, %s, %s, %s, %s WHERE EXISTS (SELECT FROM entity_registry WHERE entity_id = %s)",
            params,
        )
    return len(params)
