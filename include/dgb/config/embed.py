"""The embedding model's own settings (``DGB_EMBEDDER``, ``DGB_MODEL_START_WAIT``,
``DGB_MODEL_THREADS``, the model service's ``DGB_MODEL_MAX_PENDING`` and
``DGB_MODEL_REQUEST_TIMEOUT``, and who may call it: ``DGB_MODEL_AUTH``, ``DGB_MODEL_TOKEN``,
``DGB_MODEL_AUDIENCE``, ``DGB_MODEL_INVOKERS``): read here and nowhere else.

The model's name, dimension, port and URL (``DGB_EMBEDDING_MODEL``, ``DGB_EMBEDDING_DIM``,
``DGB_MODEL_PORT``, ``DGB_MODEL_URL``) are connection-level settings of :class:`dgb.config.Settings`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dgb.config import env_number, env_str


def embedder_mode() -> str:
    """``DGB_EMBEDDER``: where the model runs, ``auto`` (default: the service if it answers),
    ``service`` or ``local`` (:func:`dgb.embed.get_embedder` checks the value)."""
    return env_str("DGB_EMBEDDER", "auto")


def model_start_wait() -> float:
    """``DGB_MODEL_START_WAIT``: seconds ``DGB_EMBEDDER=auto`` waits for a model service that
    answers "loading" before it loads the model in this process instead (a number >= 0, default
    60: the service loads the bundled model in a few seconds)."""
    return env_number("DGB_MODEL_START_WAIT", 60.0, minimum=0)


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


# -- who may call the model service (dgb.embed.auth) --------------------------------------------

MODEL_AUTH_MODES = ("token", "google_id", "none")


def model_auth() -> str:
    """``DGB_MODEL_AUTH``: how the model service checks its callers and how ``dgb`` calls it:
    ``token`` (default: a bearer token, ``DGB_MODEL_TOKEN``), ``google_id`` (a Google ID token
    whose audience is the service URL: Cloud Run) or ``none`` (no check; loopback only)."""
    mode = env_str("DGB_MODEL_AUTH", "token").strip().lower()
    if mode not in MODEL_AUTH_MODES:
        raise ValueError(f"DGB_MODEL_AUTH must be one of {', '.join(MODEL_AUTH_MODES)}, got {mode!r}")
    return mode


def model_token(state_dir: Path | None = None) -> str:
    """``DGB_MODEL_TOKEN``: the model service's bearer token; unset, the one `make up` generated
    into ``<state_dir>/secrets.env`` (default ``DGB_STATE_DIR``); "" when there is none."""
    value = env_str("DGB_MODEL_TOKEN", "").strip()
    if value:
        return value
    from dgb.config import Settings, read_env_file

    folder = state_dir if state_dir is not None else Settings.from_env().state_dir
    return read_env_file(folder / "secrets.env").get("DGB_MODEL_TOKEN", "").strip()


def model_audience() -> str:
    """``DGB_MODEL_AUDIENCE``: under ``google_id``, the audience of the ID tokens: the service's
    URL (``https://dgb-model-service-....run.app``), or several, comma-separated (a Cloud Run
    service has two). The service requires it; a client uses the first, else the URL it calls."""
    return env_str("DGB_MODEL_AUDIENCE", "").strip()


def model_invokers() -> frozenset[str]:
    """``DGB_MODEL_INVOKERS``: under ``google_id``, the e-mails (service accounts) whose ID tokens
    the service accepts, comma-separated; unset, any Google-signed token for the audience (Cloud
    Run's IAM, ``roles/run.invoker``, already decided who reaches the service)."""
    raw = env_str("DGB_MODEL_INVOKERS", "")
    return frozenset(e.strip().lower() for e in raw.split(",") if e.strip())


def on_cloud_run() -> bool:
    """Whether this process is a Cloud Run container (``K_SERVICE``, which Cloud Run sets): its
    front end verified an ID token's signature before the request arrived (``dgb.embed.auth``)."""
    return bool(env_str("K_SERVICE", ""))
