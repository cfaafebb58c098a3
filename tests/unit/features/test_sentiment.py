"""The offline sentiment lexicon: label and score rules, negation, determinism."""

from __future__ import annotations

from dgb.features import sentiment


def test_favourable_news_is_positive_and_disasters_negative():
    good = sentiment.sentiment(
        "Governo amplia programa e inaugura escolas", "A conquista fortalece o ensino."
    )
    bad = sentiment.sentiment("Enchente deixa mortos e desabrigados", "A tragédia causou danos e vítimas.")
    assert good["label"] == "positive" and 0.15 <= good["score"] < 1
    assert bad["label"] == "negative" and -1 < bad["score"] <= -0.15


def test_no_polar_words_is_neutral_zero():
    assert sentiment.sentiment("Reunião ocorre na quarta", "O órgão publicou a pauta.") == {
        "label": "neutral",
        "score": 0.0,
    }


def test_negation_flips_the_next_words():
    assert sentiment.score_text("", "O evento ocorreu sem risco e sem danos.") > 0
    assert sentiment.score_text("", "O evento teve risco e danos.") < 0


def test_title_counts_twice_and_accents_do_not_matter():
    assert sentiment.score_text("Vitória", "") == sentiment.score_text("", "vitoria vitória")
    assert sentiment.sentiment("Sucesso", "x") == sentiment.sentiment("Sucesso", "x")  # deterministic


def test_the_score_stays_within_bounds_on_a_flood_of_words():
    assert -1 < sentiment.score_text("", "crime " * 5000) < -0.99
