"""Entity mentions: production's types and their mapping, alias normalisation, canonical id
minting, the Typesense entity fields, and the offline extractor on real gov.br text."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from dgb.agencies import load_agencies
from dgb.features import entities, rules_ner

NEWS = Path(__file__).resolve().parents[2] / "fixtures" / "classifier" / "real_news.jsonl"
MIGRATIONS = Path(entities.__file__).resolve().parents[1] / "migrations"


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("org", "ORG"),
        (" Programa ", "POLICY"),
        ("PROGRAMA", "POLICY"),
        ("DECRETO", "POLICY"),
        ("DECREE", "POLICY"),
        ("AWARD", "EVENT"),
        ("PRÊMIO", "EVENT"),
        ("PREMIO", "EVENT"),
        ("WORK", "WORK"),
        ("PRODUCT", "PRODUCT"),
        ("LAW", "LAW"),
        ("MISC", None),
        ("DATE", None),
        (None, None),
        (3, None),
    ],
)
def test_types_and_their_mapping(raw, want):
    assert entities.entity_type(raw) == want


def test_alias_normalisation_is_productions():
    assert entities.normalize("  Ministério   da\nEducação ") == "ministerio da educacao"
    assert entities.normalize("São  Paulo (SP)") == "sao paulo (sp)"
    assert entities.normalize(None) == ""


def test_minted_ids_are_namespaced_by_type_and_fit_64_characters():
    assert entities.mint_id("Pé-de-Meia", "POLICY") == "dgb_policy_pe-de-meia"
    assert entities.mint_id("Lei nº 14.133/2021", "LAW") == "dgb_law_lei-no-14-133-2021"  # º folds to o
    name = "Programa Nacional de Vigilância da Qualidade da Água para Consumo Humano no Brasil"
    digest = hashlib.sha1(name.encode()).hexdigest()[:6]
    slug = entities.slugify(name)
    for etype in entities.TYPES:
        got = entities.mint_id(name, etype)
        prefix = f"dgb_{etype.lower()}_"
        assert len(got) == 64 or (
            len(got) < 64 and got[len(prefix) : -7] == slug[: 64 - len(prefix) - 7].rstrip("-")
        )
        assert (
            got.startswith(prefix) and got.endswith(f"_{digest}") and slug.startswith(got[len(prefix) : -7])
        )
        assert entities.minted_type(got) == etype
    assert entities.is_qid("Q155") and not entities.is_qid("dgb_mec") and not entities.is_qid("Q0")
    with pytest.raises(ValueError, match="unknown entity type"):
        entities.mint_id("Saúde", "MISC")


def test_a_minted_id_is_never_an_agencys_id():
    # "Saúde" (an ORG named like the agency key "saude") and places named like agency keys
    keys = set(load_agencies())
    assert "saude" in keys and "planalto" in keys
    assert entities.mint_id("Saúde", "ORG") == "dgb_org_saude" != entities.agency_id("saude")
    assert entities.mint_id("Planalto", "LOC") == "dgb_loc_planalto" != entities.agency_id("planalto")
    for key in keys:
        for etype in entities.TYPES:
            assert entities.mint_id(key, etype) != entities.agency_id(key)
            # no agency key lies in a type's namespace, so no minted id can ever equal an agency's
            assert not entities.agency_id(key).startswith(entities.NAMESPACES[etype])
    # one name under two types: two ids
    assert entities.mint_id("Rio Branco", "LOC") != entities.mint_id("Rio Branco", "PER")


def test_the_word_keys_removed_by_migration_0018_are_the_word_keys():
    sql = (MIGRATIONS / "0018_namespaced_entity_ids.sql").read_text(encoding="utf-8")
    listed = re.search(r"alias_norm IN \(([^)]*)\)", sql).group(1)
    assert set(re.findall(r"'([a-z]+)'", listed)) == entities.WORD_KEYS


def test_clean_mention_shapes_an_extractors_item():
    assert entities.clean_mention({"text": " MEC ", "type": "org", "count": "2", "salience": 3}) == {
        "text": "MEC",
        "type": "ORG",
        "count": 2,
        "forma_canonica": "MEC",
        "salience": 1.0,
    }
    assert entities.clean_mention({"text": "x", "type": "MISC"}) is None
    assert entities.clean_mention("MEC") is None


def test_search_fields_dedup_in_first_occurrence_order_and_leave_empty_lists_out():
    mentions = [
        {"text": "MEC", "type": "ORG", "canonical_id": "dgb_mec"},
        {"text": "Brasil", "type": "LOC", "canonical_id": "Q155"},
        {"text": "MEC", "type": "ORG", "canonical_id": "dgb_mec"},
        {"text": "Lei nº 1", "type": "LAW", "canonical_id": "dgb_lei-n-1"},
        {"text": "Pix", "type": "PRODUCT"},
        {"text": "Enem", "type": "EVENT", "canonical_id": "dgb_enem"},
        {"text": "", "type": "ORG"},
        "junk",
    ]
    assert entities.search_fields(mentions) == {
        "entities": ["MEC", "Brasil", "Lei nº 1", "Pix", "Enem"],
        "entity_org": ["MEC"],
        "entity_loc": ["Brasil"],
        "entity_event": ["Enem"],
        "entity_misc": ["Lei nº 1", "Pix"],
        "entity_canonical": ["Q155", "dgb_enem", "dgb_lei-n-1", "dgb_mec"],
    }
    assert entities.search_fields([]) == {} and entities.search_fields(None) == {}


def test_offline_extractor_on_a_constructed_paragraph():
    text = (
        "A ministra da Saúde, Nísia Trindade, e o presidente Luiz Inácio Lula da Silva lançaram em "
        "Brasília o Programa Agora Tem Especialistas, com recursos do Novo PAC. O Instituto Nacional "
        "de Câncer (INCA) e a Fiocruz participam. A Lei nº 14.133/2021 rege as compras. O INCA "
        "atende no Rio de Janeiro. Casa em Colombo (PR) recebe visitas."
    )
    got = {(m["text"], m["type"]): m for m in rules_ner.extract("Saúde amplia atendimento", text)}
    assert ("Nísia Trindade", "PER") in got and ("Luiz Inácio Lula da Silva", "PER") in got
    assert got[("Brasília", "LOC")]["canonical_id"] == "Q2844"
    assert ("Programa Agora Tem Especialistas", "POLICY") in got and ("Novo PAC", "POLICY") in got
    inca = got[("Instituto Nacional de Câncer", "ORG")]
    assert inca["count"] == 3 and inca["canonical_id"] == "dgb_inca"  # name, (INCA), INCA
    # forma_canonica: the fullest name the article uses (production's key), the id the catalogue's
    assert got[("Fiocruz", "ORG")]["forma_canonica"] == "Fiocruz"
    assert got[("Fiocruz", "ORG")]["canonical_id"] == "dgb_org_fundacao-oswaldo-cruz"  # the entry's
    assert inca["forma_canonica"] == "Instituto Nacional de Câncer"
    assert ("Lei nº 14.133/2021", "LAW") in got
    # "Colombo (PR)": the city and the state, both places (the guide); "Casa em" is no name
    assert ("Colombo", "LOC") in got and got[("PR", "LOC")]["canonical_id"] == "dgb_loc_parana"
    assert not any(t.startswith("Casa em") for t, _ in got)
    for m in got.values():
        assert m["count"] >= 1 and 0 <= m["salience"] <= 1 and m["type"] in entities.TYPES


def test_offline_extractor_on_real_news_cleans_markdown():
    rows = [json.loads(line) for line in NEWS.read_text(encoding="utf-8").splitlines()]
    anvisa = next(r for r in rows if r["title"].startswith("Anvisa"))
    mentions = rules_ner.extract(anvisa["title"], anvisa["content"])
    assert mentions[0]["text"] == "Anvisa" and mentions[0]["canonical_id"] == "dgb_anvisa"
    assert not any(
        "http" in m["text"] or "](" in m["text"]
        for r in rows
        for m in rules_ner.extract(r["title"], r["content"])
    )


def test_a_long_run_of_capitalised_words_is_no_name():
    # 200 repetitions without punctuation: each one is the known name, never a 600-word "name"
    got = rules_ner.extract("", "Ministério da Saúde " * 200 + "Fundação Biblioteca Nacional abriu.")
    assert [(m["text"], m["count"]) for m in got] == [
        ("Ministério da Saúde", 200),
        ("Fundação Biblioteca Nacional", 1),
    ]


def test_the_roles_trie_finds_what_the_alternation_longest_first_finds():
    plain = "|".join(sorted(map(re.escape, rules_ner._ROLES), key=len, reverse=True))
    assert plain != rules_ner._ROLE  # a trie, not the alternation
    name = rules_ner._NAME
    after = (r"\b(?:{})\s+(?:(?:d[aoe]s?|em)\s+[^,.;:()\n]{{1,70}}?,\s+)?({})", rules_ner._PER_AFTER_ROLE)
    before = (r"({1}),\s+(?:(?:o|a)\s+)?(?:{0})\b", rules_ner._PER_BEFORE_ROLE)
    # every role before and after a name, with the endings that make another role or no role
    made = "\n".join(
        f"o {role}{tail} Ana Souza disse. Carlos Lima, {role}{tail}, disse."
        for role in rules_ner._ROLES
        for tail in ("", "a", "s", "-geral", "-chefe")
    )
    news = [json.loads(line) for line in NEWS.read_text(encoding="utf-8").splitlines()]
    texts = [made] + [f"{r['title']}\n\n{r['content']}" for r in news]
    for template, compiled in (after, before):
        reference = re.compile(template.format(plain, name))
        for text in texts:
            want = [(m.span(), m.groups()) for m in reference.finditer(text)]
            assert [(m.span(), m.groups()) for m in compiled.finditer(text)] == want
    assert len(list(rules_ner._PER_AFTER_ROLE.finditer(made))) >= len(rules_ner._ROLES)
