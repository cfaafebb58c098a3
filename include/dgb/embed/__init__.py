"""Sentence embeddings: one interface, two ways to reach the model.

* in-process (:func:`dgb.embed.model.load_model`): loads the model in this process (the bundled
  model without torch; a production model costs the torch import, ~8-10 s) — used by the model
  service itself, tests and benchmarks;
* the resident model service (:class:`dgb.embed.client.ServiceEmbedder`), started by
  `make up` and reached over HTTP — what Airflow tasks use, so no task pays the model load.

Both implement :class:`Embedder`. Vectors are float32, L2-normalised, shape (n, dim).
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    name: str   # model name, stored next to each vector
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


def get_embedder(settings=None, *, prefer: str | None = None) -> Embedder:
    """The embedder for this process: ``DGB_EMBEDDER=service`` (default when a model service
    URL answers) or ``local`` (load in-process)."""
    import os

    from dgb.config import settings as current

    settings = settings or current()
    mode = prefer or os.environ.get("DGB_EMBEDDER", "auto")
    if mode not in ("auto", "service", "local"):
        raise ValueError(f"DGB_EMBEDDER must be auto, service or local, got {mode!r}")
    if mode in ("auto", "service"):
        from dgb.embed.client import ServiceEmbedder

        client = ServiceEmbedder(settings.model_url)
        if mode == "service" or client.available():
            return client
    from dgb.embed.model import load_model

    return load_model(settings.embedding_model, settings.embedding_dim)
