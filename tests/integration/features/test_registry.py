"""Canonical ids in production's tables: the alias table answers first (an adopted registry's
Wikidata ids carry over), then the extractor's id (an agency's dgb_<key>, a gazetteer QID), then
a minted dgb_<slug>; new ids are registered with their aliases so the next article resolves to the
same id; agencies are seeded as dgb_<key>."""

from __future__ import annotations

import pytest

from dgb import db
from dgb.agencies import load_agencies
from dgb.features import registry
from tests.support import news

pytestmark = pytest.mark.stack


def _rows(pg, sql, *args):
    with pg.cursor() as cur:
        cur.execute(sql, args or None)
        return cur.fetchall()


def test_alias_table_first_then_proposed_then_minted(pg):
    db.upsert_agencies(pg, load_agencies().values())
    with db.transaction(pg) as cur:
        # an adopted registry: the MEC linked to Wikidata, under its normalised name
        cur.execute(
            "INSERT INTO entity_registry (entity_id, canonical_name, type, provenance)"
            " VALUES ('Q10345911', 'Ministério da Educação', 'ORG', 'wikidata')"
        )
        cur.execute(
            "INSERT INTO entity_alias (alias_norm, type, entity_id, source)"
            " VALUES ('ministerio da educacao', 'ORG', 'Q10345911', 'wikidata')"
        )
        got = registry.resolve(
            cur,
            [
                {
                    "text": "MEC",
                    "type": "ORG",
                    "forma_canonica": "Ministério da Educação",
                    "canonical_id": "dgb_mec",
                },
                {
                    "text": "Anvisa",
                    "type": "ORG",
                    "forma_canonica": "Agência Nacional de Vigilância Sanitária",
                    "canonical_id": "dgb_anvisa",
                },
                {"text": "Pé-de-Meia", "type": "POLICY", "forma_canonica": "Pé-de-Meia"},
                {"text": "Brasil", "type": "LOC", "forma_canonica": "Brasil", "canonical_id": "Q155"},
            ],
        )
    assert [m["canonical_id"] for m in got] == ["Q10345911", "dgb_anvisa", "dgb_policy_pe-de-meia", "Q155"]
    assert _rows(pg, "SELECT entity_id, agency_key, provenance FROM entity_registry ORDER BY entity_id") == [
        ("Q10345911", None, "wikidata"),
        ("Q155", None, "wikidata"),
        ("dgb_anvisa", "anvisa", "rules"),
        ("dgb_policy_pe-de-meia", None, "rules"),
    ]
    assert _rows(pg, "SELECT wikidata_url FROM entity_registry WHERE entity_id = 'Q155'") == [
        ("https://www.wikidata.org/wiki/Q155",)
    ]
    # the next article's surface form resolves through the aliases registered just now
    with db.transaction(pg) as cur:
        again = registry.resolve(
            cur, [{"text": "Pe de Meia", "type": "POLICY", "forma_canonica": "PÉ-DE-MEIA"}]
        )
    assert again[0]["canonical_id"] == "dgb_policy_pe-de-meia"
    # the same name under another type is another entity key
    with db.transaction(pg) as cur:
        other = registry.resolve(cur, [{"text": "Brasil", "type": "ORG", "forma_canonica": "Brasil"}])
    assert other[0]["canonical_id"] == "dgb_org_brasil"


def test_seed_agencies_and_news_entities(pg):
    db.upsert_agencies(pg, load_agencies().values())
    with db.transaction(pg) as cur:
        n = registry.seed_agencies(cur)
        registry.seed_agencies(cur)  # idempotent
    assert n == len(load_agencies())
    assert _rows(pg, "SELECT count(*) FROM entity_registry WHERE provenance = 'agencies_seed'") == [(n,)]
    assert _rows(pg, "SELECT entity_id FROM entity_alias WHERE alias_norm = 'mec' AND type = 'ORG'") == [
        ("dgb_mec",)
    ]
    news.add(pg, "a1")
    with db.transaction(pg) as cur:
        registry.write_news_entities(
            cur,
            "a1",
            [
                {"text": "MEC", "type": "ORG", "count": 2, "salience": 0.5, "canonical_id": "dgb_mec"},
                {
                    "text": "Ministério da Educação",
                    "type": "ORG",
                    "count": 1,
                    "salience": 0.9,
                    "canonical_id": "dgb_mec",
                },
                {"text": "x", "type": "ORG", "count": 1, "canonical_id": "dgb_not-registered"},
            ],
        )
    assert _rows(pg, "SELECT entity_id, count, salience FROM news_entities") == [("dgb_mec", 3, 0.9)]


def test_minted_ids_never_take_an_agencys_id_and_types_keep_names_apart(pg):
    db.upsert_agencies(pg, load_agencies().values())
    with db.transaction(pg) as cur:
        registry.seed_agencies(cur)
        got = registry.resolve(
            cur,
            [
                # "Saúde" alone as an ORG: the agency key "saude" is an ordinary word, no alias of it
                {"text": "Saúde", "type": "ORG", "forma_canonica": "Saúde"},
                # a place named like an agency key, even with an LLM proposing the agency's id
                {
                    "text": "Planalto",
                    "type": "LOC",
                    "forma_canonica": "Planalto",
                    "canonical_id": "dgb_planalto",
                },
                {"text": "Cultura", "type": "LOC", "forma_canonica": "Cultura"},
                # one name, two types
                {"text": "Rio Branco", "type": "LOC", "forma_canonica": "Rio Branco"},
                {"text": "Rio Branco", "type": "PER", "forma_canonica": "Rio Branco"},
                # a proposed id of another type's namespace is no id of this one
                {"text": "Enem", "type": "EVENT", "forma_canonica": "Enem", "canonical_id": "dgb_org_enem"},
                # an agency's acronym is still its alias
                {"text": "MEC", "type": "ORG", "forma_canonica": "MEC"},
            ],
        )
    ids = [m["canonical_id"] for m in got]
    assert ids == [
        "dgb_org_saude",
        "dgb_loc_planalto",
        "dgb_loc_cultura",
        "dgb_loc_rio-branco",
        "dgb_per_rio-branco",
        "dgb_event_enem",
        "dgb_mec",
    ]
    agency_ids = {f"dgb_{k}" for k in load_agencies()}
    assert not set(ids[:-1]) & agency_ids
    assert _rows(pg, "SELECT type, agency_key FROM entity_registry WHERE entity_id = 'dgb_org_saude'") == [
        ("ORG", None)
    ]
    assert _rows(pg, "SELECT count(*) FROM entity_alias WHERE alias_norm = 'rio branco'") == [(2,)]
