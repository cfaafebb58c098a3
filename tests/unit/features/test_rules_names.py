"""The offline extractor's rules for people, places and exclusions (dgb.features.rules_ner with
dgb.features.rules_names), on constructed sentences that each rule must get right."""

from __future__ import annotations

from dgb.features import rules_ner


def _got(text: str, title: str = "") -> set[tuple[str, str]]:
    return {(m["text"], m["type"]) for m in rules_ner.extract(title, text)}


def test_a_person_after_a_role_word_without_the_role():
    got = _got("O operador financeiro Luiz Phelipe Andrade foi ouvido. A repórter Catarina Gomes explica.")
    assert ("Luiz Phelipe Andrade", "PER") in got and ("Catarina Gomes", "PER") in got
    assert not any("operador" in t or "repórter" in t for t, _ in got)


def test_a_person_in_a_photo_credit_and_the_credits_agency():
    got = _got("A ministra visitou a obra.\n\nFoto: Ruy Thalmann Ozório/Ascom-Iphan")
    assert ("Ruy Thalmann Ozório", "PER") in got and ("Ascom-Iphan", "ORG") in got
    # a credit with no one's name: no person, the agency still an ORG
    assert _got("Foto: Divulgação/MEC") == {("MEC", "ORG")}


def test_given_names_start_people_but_not_places_or_institutions():
    got = _got(
        "Participaram Natália Quintela e o reitor. A Rua José Bonifácio e São José dos Pinhais recebem obras."
    )
    assert ("Natália Quintela", "PER") in got
    assert not any(t.startswith("José") for t, _ in got)


def test_a_place_before_a_state_abbreviation_and_the_state():
    got = _got("A obra em Guaraqueçaba (PR) começa hoje, e Xique-Xique/BA recebe a equipe.")
    assert ("Guaraqueçaba", "LOC") in got and ("PR", "LOC") in got
    assert ("Xique-Xique", "LOC") in got and ("BA", "LOC") in got
    # an organisation named after the place stays one ORG; its state still counts
    got = _got("A Prefeitura de Guaraqueçaba (PR) assinou.")
    assert ("Prefeitura de Guaraqueçaba", "ORG") in got and ("PR", "LOC") in got
    assert ("Guaraqueçaba", "LOC") not in got


def test_places_after_municipio_and_before_a_known_country():
    got = _got(
        "Os municípios de Alvorada do Norte, Buritinópolis e Mambaí serão atendidos. "
        "Foi publicado em Tampere (Finlândia)."
    )
    assert {("Alvorada do Norte", "LOC"), ("Buritinópolis", "LOC"), ("Mambaí", "LOC")} <= got
    assert ("Tampere", "LOC") in got and ("Finlândia", "LOC") in got


def test_programmes_laws_and_events_are_never_org_per_or_loc():
    got = rules_ner.extract(
        "",
        "O Programa Luz para Todos chegou a Manaus. A Lei Maria da Penha completa 20 anos. "
        "A ação “Governo do Brasil na Rua” vai a Belém. Graduação em Agronomia.",
    )
    types = {m["text"]: m["type"] for m in got}
    assert types["Programa Luz para Todos"] == "POLICY" and types["Lei Maria da Penha"] == "LAW"
    assert types["Manaus"] == "LOC" and types["Belém"] == "LOC"
    assert not any(t in ("Governo do Brasil", "Brasil", "Maria da Penha", "Agronomia", "Luz") for t in types)
    assert not [m for m in got if m["type"] in ("ORG", "PER")]
