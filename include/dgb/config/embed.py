"""The embedding model's own settings (``DGB_EMBEDDER``, ``DGB_MODEL_THREADS``, the model service's
``DGB_MODEL_MAX_PENDING`` and ``DGB_MODEL_REQUEST_TIMEOUT``): read here and nowhere else.

The model's name, dimension, port and URL (``DGB_EMBEDDING_MODEL``, ``DGB_EMBEDDING_DIM``,
``DGB_MODEL_PORT``, ``DGB_MODEL_URL``) are connection-level settings of :class:`dgb.config.Settings`.
"""

from __future__ import annotations

import os
from typing import Any

from dgb.config import env_number, env_str


def embedder_mode() -> str:
    """``DGB_EMBEDDER``: where the model runs, ``auto`` (default: the service if it answers),
    ``service`` or ``local`` (:func:`dgb.embed.get_embedder` checks the value)."""
    return env_str("DGB_EMBEDDER", "auto")


def model_threads() -> int:
    """``DGB_MODEL_THREADS``: the BLAS threads of an in-process model, a positive integer (default
    the machine's CPU count)."""
    return env_number("DGB_MODEL_THREADS", max(1, os.cpu_count() or 1), integer=True, minimum=1)


def service_limits() -> dict[str, Any]:
    """``DGB_MODEL_MAX_PENDING`` (an integer >= 1) and ``DGB_MODEL_REQUEST_TIMEOUT`` (seconds, > 0):
    the ones set, as keyword arguments of :class:`dgb.embed.service.Limits` (whose fields hold the
    defaults)."""
    values = {
        "max_pending": env_number("DGB_MODEL_MAX_PENDING", None, integer=True, minimum=1),
        "request_timeout": env_number("DGB_MODEL_REQUEST_TIMEOUT", None, above=0),
    }
    return {name: value for name, value in values.items() if value is not None}
