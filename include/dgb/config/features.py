"""The article features' settings (``DGB_FEATURES*``, the NER model): read here and nowhere else.

* ``DGB_FEATURES`` (flag, default on): the enrich stage computes the article's features
  (dgb.features) and writes them to ``news_features`` with its classification.
* ``DGB_FEATURES_NER``: ``rules`` (the offline extractor) or ``bedrock`` (a Converse call of its
  own); unset: ``bedrock`` when the classifier is ``bedrock`` or ``hybrid``, else ``rules``.
* ``DGB_BEDROCK_NER_MODEL_ID``: the NER call's model (default: the classifier's model id).
"""

from __future__ import annotations

from dgb.config import env_flag, env_str

NER_BACKENDS = ("rules", "bedrock")


def features_enabled() -> bool:
    return env_flag("DGB_FEATURES", True)


def ner_backend(classifier_backend: str) -> str:
    default = "bedrock" if classifier_backend in ("bedrock", "hybrid") else "rules"
    value = env_str("DGB_FEATURES_NER", default).strip().lower()
    if value not in NER_BACKENDS:
        raise ValueError(f"DGB_FEATURES_NER must be one of {', '.join(NER_BACKENDS)}, not {value!r}")
    return value


def bedrock_ner_model_id(default: str) -> str:
    return env_str("DGB_BEDROCK_NER_MODEL_ID", default)
