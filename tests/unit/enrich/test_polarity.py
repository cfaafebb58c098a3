"""The polarity lexicon (dgb.enrich.polarity): whole lemmas, direction, negation within the
clause, intensifiers, a score normalised by length, labels of clear headlines."""

from __future__ import annotations

import pytest

from dgb.enrich import polarity
from dgb.features import sentiment


@pytest.mark.parametrize(
    "title",
    ["Seção de atendimento abre em nova sede", "A premissa do edital foi mantida", "Lancha patrulha a costa"],
)
def test_words_that_only_start_like_a_polar_word_are_not_polar(title):
    """ "seção" is not "seca", "premissa" not "prêmio", "lancha" not "lançar": whole lemmas only."""
    assert polarity.tally(title).pos == polarity.tally(title).neg == 0
    assert sentiment.sentiment(title, "") == {"label": "neutral", "score": 0.0}


@pytest.mark.parametrize(
    ("title", "label"),
    [
        ("Mortalidade infantil cai 20% no país", "positive"),
        ("Inflação em queda pelo terceiro mês", "positive"),
        ("Desemprego sobe no trimestre", "negative"),
        ("Produção de emprego cresce no semestre", "positive"),
        ("Safra de grãos cai com a estiagem", "negative"),
        ("Enchente deixa 10 mortos e desabrigados no Sul", "negative"),
        ("Governo inaugura hospital e amplia atendimento", "positive"),
        ("Prazo de inscrições termina nesta sexta-feira", "neutral"),
    ],
)
def test_labels_of_clear_headlines(title, label):
    assert sentiment.sentiment(title, "")["label"] == label


def test_negation_flips_what_follows_it_in_its_clause_only():
    assert polarity.tally("Não houve mortes no feriado").net > 0
    assert polarity.tally("Houve mortes no feriado").net < 0
    # the negation ends with its clause: the deaths after "mas" still count against
    assert polarity.tally("Não choveu, mas houve mortes na estrada").net < 0


def test_intensifiers_and_attenuators_scale_the_next_polar_word():
    plain = polarity.tally("A situação é grave").neg
    assert polarity.tally("A situação é muito grave").neg == pytest.approx(1.5 * plain)
    assert polarity.tally("A situação é pouco grave").neg == pytest.approx(0.5 * plain)


def test_the_score_is_normalised_by_length():
    short = polarity.score("", "Houve um acidente na rodovia.")
    long = polarity.score("", "Houve um acidente na rodovia. " + "O órgão publicou a pauta da reunião. " * 40)
    assert short < long < 0  # the same one accident weighs less in a long text
    assert -1 < polarity.score("", "crime " * 5000) < -0.99


def test_title_counts_twice_and_accents_do_not_matter():
    assert polarity.score("Vitória", "") == polarity.score("", "vitoria vitória")


def test_a_malformed_lexicon_line_is_a_clear_error(tmp_path, monkeypatch):
    bad = tmp_path / "lexicon.tsv"
    bad.write_text("# header\nmorte\tpol\t-2\nvitoria\tbogus\t1\n", encoding="utf-8")
    monkeypatch.setattr(polarity, "LEXICON_PATH", bad)
    polarity.lexicon.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"lexicon.tsv:3: want <term>TAB<class>TAB<weight>"):
            polarity.lexicon()
    finally:
        polarity.lexicon.cache_clear()


def test_a_reloaded_lexicon_is_the_one_read_not_the_words_looked_up_before(tmp_path, monkeypatch):
    assert polarity.tally("Uma vitória histórica").pos > 0  # the shipped lexicon, words now looked up
    other = tmp_path / "lexicon.tsv"
    other.write_text("vitoria\tpol\t-2\n", encoding="utf-8")
    monkeypatch.setattr(polarity, "LEXICON_PATH", other)
    polarity.lexicon.cache_clear()
    try:
        t = polarity.tally("Uma vitória histórica")
        assert (t.pos, t.neg) == (0, 2)
    finally:
        polarity.lexicon.cache_clear()
