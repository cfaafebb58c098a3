"""What every embedder is: the :class:`Embedder` protocol, the input check all of them apply, and
the text budget every model input obeys.

Its own module so the implementations (:mod:`dgb.embed.model`, :mod:`dgb.embed.client`) and the
factory that picks one (:func:`dgb.embed.get_embedder`) never import each other.

The text budget (one home, used by the embedders, the model service, :func:`dgb.embed.model.prepare_text`
and the classifiers' :class:`~dgb.enrich.contract.ArticleText`): a model's cost grows with the
length of each text (the bundled model's peak memory is ~3.3 kB per character of the longest
text: 24,000 characters ~80 MB, 400,000 ~1.3 GB), so no text reaches a model uncapped.
:func:`model_text` removes what no model can take (NUL, lone surrogates: the tokenizer's UTF-8
encode raises on one, which used to fail the whole batch) and cuts to a cap.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

TEXT_CAP = 24_000  # the most characters of one text any model reads (the embedded article text)
TITLE_CAP = 1_000  # a title longer than this is not a title (real ones: < 300 characters)

_UNENCODABLE = re.compile(r"[\x00\ud800-\udfff]")  # NUL and surrogates: never valid in UTF-8 text


def model_text(text: str | None, cap: int = TEXT_CAP) -> str:
    """``text`` made safe for a model: NUL and lone surrogates removed, at most ``cap`` characters
    (cut before the clean-up, so a huge input costs only its first ``cap`` characters)."""
    if not text:
        return ""
    text = text[:cap]
    if text.isascii():
        return text.replace("\x00", "") if "\x00" in text else text
    return _UNENCODABLE.sub("", text)


@runtime_checkable
class Embedder(Protocol):
    name: str  # model name, stored next to each vector
    dim: int

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed ``texts`` -> float32 array (len(texts), dim), rows L2-normalised."""
        ...


def check_texts(texts: Sequence[str], cap: int = TEXT_CAP) -> list[str]:
    """The texts to encode as a list, each through :func:`model_text` (so one bad or huge text
    never fails or swamps its batch); a single string or a non-string item is a TypeError."""
    if isinstance(texts, str):
        raise TypeError("encode() takes a sequence of strings, not a single string")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise TypeError(f"text {i} is {type(text).__name__}, not str")
        out[i] = model_text(text, cap)
    return out
