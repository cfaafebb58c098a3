"""The local classifier's sentiment head (dgb.enrich.sentiment) through the real bundled model: it
is loaded for the model it was trained with, answers every classification, keeps the score in its
label's band, and labels clear news right. Texts written here (not in its training set)."""

from __future__ import annotations

import numpy as np
import pytest

from dgb.enrich import sentiment, sentiment_training
from dgb.enrich.contract import ArticleText
from dgb.enrich.local import LocalClassifier

pytestmark = pytest.mark.model

NEWS = [
    (
        "Chuvas fortes deixam 12 mortos e milhares de desabrigados no litoral",
        "Deslizamentos de terra atingiram casas durante a madrugada. A Defesa Civil confirmou 12 mortes "
        "e 3 mil pessoas desalojadas; equipes de resgate seguem buscando desaparecidos.",
        "negative",
    ),
    (
        "Governo inaugura hospital com 200 leitos e amplia atendimento gratuito no interior",
        "O novo hospital vai beneficiar 500 mil moradores da região, que antes viajavam horas para ter "
        "atendimento especializado. A obra recebeu investimento de R$ 120 milhões.",
        "positive",
    ),
    (
        "Edital de seleção para bolsas de mestrado recebe inscrições até o dia 30",
        "Os interessados devem enviar a documentação pelo sistema eletrônico. O resultado preliminar "
        "será publicado em 15 de maio, com prazo de dois dias para recursos.",
        "neutral",
    ),
]


@pytest.fixture(scope="module")
def classifier():
    from dgb.embed import get_embedder

    return LocalClassifier(get_embedder(prefer="local"))


def test_the_shipped_head_is_loaded_for_its_model(classifier):
    head = classifier.sentiment_head
    assert head is not None
    assert head.meta["embedder"] == classifier.embedder.name and head.meta["articles"] >= 300


def test_every_classification_carries_the_heads_sentiment(classifier):
    items = [ArticleText(f"n{i}", t, None, None, c) for i, (t, c, _) in enumerate(NEWS)]
    results = classifier.classify_batch(items)
    labels = [r.sentiment["label"] for r in results]
    assert labels == [label for _, _, label in NEWS]
    for r in results:
        assert r.sentiment["method"] == sentiment.METHOD
        assert r.sentiment["score"] == sentiment.band(r.sentiment["label"], r.sentiment["score"])
    assert results[0].sentiment["score"] < -0.2 < 0.2 < results[1].sentiment["score"]
    # the same answer when asked for sentiment alone (the backfill's path)
    assert classifier.sentiments(items) == [r.sentiment for r in results]


def test_a_head_trained_for_another_model_is_not_used():
    from dgb.embed import get_embedder

    embedder = get_embedder(prefer="local")
    other = sentiment.load_default()
    other = sentiment.SentimentHead(**{**other.__dict__, "meta": {**other.meta, "embedder": "another-model"}})
    sentiment.load_default.cache_clear()
    try:
        import dgb.enrich.local as local

        original = local.load_default_sentiment
        local.load_default_sentiment = lambda: other
        try:
            assert LocalClassifier(embedder).sentiment_head is None
        finally:
            local.load_default_sentiment = original
    finally:
        sentiment.load_default.cache_clear()


def test_band_keeps_the_score_inside_its_label():
    assert sentiment.band("neutral", 0.6) == 0.2 and sentiment.band("neutral", -0.9) == -0.2
    assert sentiment.band("positive", -0.3) == 0.05 and sentiment.band("negative", 0.4) == -0.05


def test_training_refuses_unknown_labels_and_saves_what_it_loads(tmp_path):
    x = sentiment.Inputs(
        np.random.default_rng(0).normal(size=(6, 4)),
        [["a"], ["a", "b"], ["b"], ["c"], ["c", "a"], ["b", "c"]],
        [["x"], ["y"], ["x", "y"], ["z"], ["z"], ["y"]],
        np.zeros((6, 5)),
    )
    labels = ["positive", "neutral", "negative", "positive", "neutral", "negative"]
    with pytest.raises(ValueError, match="labels \\['happy'\\]"):
        sentiment_training.fit(x, [*labels[:5], "happy"], np.zeros(6))
    head = sentiment_training.fit(x, labels, np.array([0.5, 0, -0.5, 0.5, 0, -0.5]), meta={"k": 1})
    head.save(tmp_path / "h.npz")
    again = sentiment.SentimentHead.load(tmp_path / "h.npz")
    assert again.predict(x) == head.predict(x) and again.meta == {"k": 1}
