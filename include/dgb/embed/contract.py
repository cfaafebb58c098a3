"""What every embedder is: the :class:`Embedder` protocol and the input check all of them apply.

Its own module so the implementations (:mod:`dgb.embed.model`, :mod:`dgb.embed.client`) and the
factory that picks one (:func:`dgb.embed.get_embedder`) never import each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    name: str  # model name, stored next to each vector
    dim: int

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed ``texts`` -> float32 array (len(texts), dim), rows L2-normalised."""
        ...


def check_texts(texts: Sequence[str]) -> list[str]:
    """The texts to encode as a list; a single string or a non-string item is a TypeError."""
    if isinstance(texts, str):
        raise TypeError("encode() takes a sequence of strings, not a single string")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise TypeError(f"text {i} is {type(text).__name__}, not str")
    return out
