"""The article's ``sentiment`` feature: who answers it, in production's shape.

``features.sentiment`` is ``{"label": positive|neutral|negative, "score": -1..1}`` (production's
key, what the portal's "sentimento" filter and the index's ``sentiment_label`` / ``sentiment_score``
read) and ``features.sentiment_method`` (ours) says where it came from:

* ``bedrock``: Bedrock's combined theme + summary + sentiment call (production's method);
* ``local-head-1``: the local classifier's sentiment head (:mod:`dgb.enrich.sentiment`), trained
  to give the LLM's label and its score on the LLM's scale from the classifier's own vectors;
* ``lexicon-pt-2``: the polarity lexicon alone (:mod:`dgb.enrich.polarity`): the fallback when the
  classifier gave none (a Bedrock answer without a sentiment, a model without a trained head).

One scale for every method: -1 very negative, 0 neutral, 1 very positive; a neutral article's score
stays within +-0.2 (the labelling guide's band, ``evaluation/sentiment/guide.md``). The lexicon's
score is tanh of its net weight per 30 words: the same sign and bands, a rougher magnitude.
Figures on the labelled set: ``scripts/eval_features.py``.
"""

from __future__ import annotations

from dgb.enrich.polarity import METHOD as LEXICON_METHOD
from dgb.enrich.polarity import lexicon_sentiment

BEDROCK_METHOD = "bedrock"


def sentiment(title: str, content: str) -> dict:
    """The lexicon fallback's ``{"label", "score"}``."""
    return lexicon_sentiment(title, content)


def from_classifier(answer: dict | None) -> tuple[dict, str] | None:
    """(``{"label", "score"}``, method) of a classifier's sentiment answer, or None without one.
    Bedrock's answer carries no method (it is ``bedrock``); the local head's names its own."""
    if not answer:
        return None
    return {"label": answer["label"], "score": answer["score"]}, answer.get("method") or BEDROCK_METHOD


def features(title: str, content: str, classifier_answer: dict | None = None) -> dict:
    """The ``sentiment`` and ``sentiment_method`` keys of ``news_features``."""
    given = from_classifier(classifier_answer)
    if given is not None:
        value, method = given
    else:
        value, method = sentiment(title, content), LEXICON_METHOD
    return {"sentiment": value, "sentiment_method": method}
