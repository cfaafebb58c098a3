"""Entity mentions in production's shape, canonical ids, and the Typesense entity fields.

A mention (one item of ``news_features.features.entities``) is
``{"text", "type", "count", "forma_canonica", "salience", "canonical_id"}``:

* ``type``: one of :data:`TYPES`; an extractor's variant is mapped by :func:`entity_type`
  (PROGRAM, PROGRAMA, DECRETO, DECREE -> POLICY; AWARD, PRÊMIO -> EVENT); any other type is dropped;
* ``count`` >= 1, ``salience`` in [0, 1], ``forma_canonica`` the entity's fullest name in the
  article (production's key), ``canonical_id`` (:mod:`dgb.features.registry` resolves it).

Canonical ids, three forms that cannot collide:

* a Wikidata QID (``Q155``);
* an agency's ``dgb_<agency key>`` (production's ids, ORG only);
* a minted id, namespaced by type: ``dgb_<type>_<slug>`` (``dgb_org_saude``, ``dgb_loc_saude``,
  ``dgb_policy_pe-de-meia``), so a name never takes an agency's id and one name under two types
  is two ids. No agency key starts with a type's name and ``_`` (a unit test holds it). Ids this
  pipeline minted before in the old form ``dgb_<slug>`` were moved by migration 0018.

Standard library only (and :mod:`dgb.textfold`): :mod:`dgb.search.documents` imports
:func:`search_fields`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from dgb.textfold import ascii_fold

TYPES = ("ORG", "PER", "LOC", "EVENT", "POLICY", "LAW", "WORK", "PRODUCT")
_TAIL = {
    "PROGRAM": "POLICY",
    "PROGRAMA": "POLICY",
    "DECRETO": "POLICY",
    "DECREE": "POLICY",
    "AWARD": "EVENT",
    "PREMIO": "EVENT",
    "PRÊMIO": "EVENT",
}
# Typesense field per type; the other types (LAW, WORK, PRODUCT) go to entity_misc
TYPE_FIELDS = {
    "ORG": "entity_org",
    "PER": "entity_per",
    "LOC": "entity_loc",
    "EVENT": "entity_event",
    "POLICY": "entity_policy",
}
SEARCH_FIELDS = ("entities", *TYPE_FIELDS.values(), "entity_misc", "entity_canonical")
ID_MAX = 64  # entity_registry.entity_id is varchar(64)
_DIGEST = 7  # "_" + 6 hex digits
# the namespace of the ids minted for each type: dgb_org_, dgb_per_, dgb_loc_, ...
NAMESPACES = {t: f"dgb_{t.lower()}_" for t in TYPES}
# agency keys that are ordinary words ("saude", "cultura"), not acronyms: an agency's id, never an
# alias of it (the mention "Saúde" is not the Ministry of Health by itself) and never matched as a
# name by the offline extractor
_WORD_KEYS = "aids cidades compras cultura defesa economia esporte fazenda gestao mulheres museus "
WORD_KEYS = frozenset((_WORD_KEYS + "planalto saude servidor turismo tvbrasil nfse esocial siscomex").split())
_QID = re.compile(r"^Q[1-9][0-9]*$")


def entity_type(raw: Any) -> str | None:
    """The sanctioned type for an extractor's ``raw`` type, or None (dropped)."""
    if not isinstance(raw, str):
        return None
    t = raw.strip().upper()
    t = _TAIL.get(t, t)
    return t if t in TYPES else None


def normalize(text: str | None) -> str:
    """Alias key: NFKD, non-ASCII dropped, lowercase, whitespace collapsed (production's rule,
    so keys match the rows of an adopted ``entity_alias``)."""
    if not text:
        return ""
    return re.sub(r"\s+", " ", ascii_fold(text).lower()).strip()


def slugify(text: str | None) -> str:
    return re.sub(r"[^a-z0-9]+", "-", normalize(text)).strip("-")


def mint_id(canonical_name: str, etype: str) -> str:
    """``dgb_<type>_<slug>`` of a name (type in lower case), at most 64 characters: a longer one
    keeps as much of the slug as fits and adds ``_`` + 6 hex digits of the SHA-1 of the name
    (production's digest rule)."""
    if etype not in NAMESPACES:
        raise ValueError(f"unknown entity type {etype!r}")
    prefix, slug = NAMESPACES[etype], slugify(canonical_name)
    candidate = f"{prefix}{slug}"
    if len(candidate) <= ID_MAX:
        return candidate
    digest = hashlib.sha1(canonical_name.encode("utf-8")).hexdigest()[:6]
    return f"{prefix}{slug[: ID_MAX - len(prefix) - _DIGEST].rstrip('-')}_{digest}"


def minted_type(entity_id: str | None) -> str | None:
    """The type whose namespace ``entity_id`` is in (a minted id), or None."""
    for etype, prefix in NAMESPACES.items():
        if entity_id and entity_id.startswith(prefix):
            return etype
    return None


def agency_id(agency_key: str) -> str:
    return f"dgb_{agency_key}"


def is_qid(entity_id: str | None) -> bool:
    return bool(entity_id and _QID.match(entity_id))


def clean_mention(raw: Any) -> dict | None:
    """A mention in the stored shape, or None when it has no text or no sanctioned type.
    ``count`` becomes an int >= 1, ``salience`` a float clamped to [0, 1] (None if absent)."""
    if not isinstance(raw, dict):
        return None
    text = raw.get("text")
    etype = entity_type(raw.get("type"))
    if not isinstance(text, str) or not text.strip() or etype is None:
        return None
    text = " ".join(text.split())
    try:
        count = max(1, int(raw.get("count", 1)))
    except (TypeError, ValueError):
        count = 1
    salience = raw.get("salience")
    try:
        salience = None if salience is None else min(1.0, max(0.0, float(salience)))
    except (TypeError, ValueError):
        salience = None
    canonical = raw.get("forma_canonica") or raw.get("canonical")
    canonical = " ".join(canonical.split()) if isinstance(canonical, str) and canonical.strip() else text
    out = {"text": text, "type": etype, "count": count, "forma_canonica": canonical, "salience": salience}
    if isinstance(raw.get("canonical_id"), str) and raw["canonical_id"].strip():
        out["canonical_id"] = raw["canonical_id"].strip()
    return out


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def search_fields(entities: Any) -> dict[str, list[str]]:
    """The Typesense entity fields of a stored ``entities`` list: ``entities`` (every text,
    de-duplicated, first occurrence first), ``entity_<type>`` per type (``entity_misc`` for LAW,
    WORK, PRODUCT and any unknown type), ``entity_canonical`` (sorted unique ids); empty lists left
    out. Malformed items are skipped."""
    if not isinstance(entities, list):
        return {}
    texts: list[str] = []
    by_field: dict[str, list[str]] = {}
    ids: set[str] = set()
    for e in entities:
        if not isinstance(e, dict) or not isinstance(e.get("text"), str) or not e["text"].strip():
            continue
        text = e["text"].strip()
        etype = e.get("type").strip().upper() if isinstance(e.get("type"), str) else ""
        texts.append(text)
        by_field.setdefault(TYPE_FIELDS.get(etype, "entity_misc"), []).append(text)
        cid = e.get("canonical_id")
        if isinstance(cid, str) and cid.strip():
            ids.add(cid.strip())
    out: dict[str, list[str]] = {}
    if texts:
        out["entities"] = _unique(texts)
    for field in (*TYPE_FIELDS.values(), "entity_misc"):
        if by_field.get(field):
            out[field] = _unique(by_field[field])
    if ids:
        out["entity_canonical"] = sorted(ids)
    return out
