"""Sentence embeddings: one interface, two ways to reach the model.

* in-process (:func:`dgb.embed.model.load_model`): loads the model in this process (the bundled
  model without torch; a production model costs the torch import, ~8-10 s) — used by the model
  service itself, tests and benchmarks;
* the resident model service (:class:`dgb.embed.client.ServiceEmbedder`), started by
  `make up` and reached over HTTP — what Airflow tasks use, so no task pays the model load.

Both implement :class:`Embedder` (:mod:`dgb.embed.contract`, which both import, so neither needs
this package's factory). Vectors are float32, L2-normalised, shape (n, dim).
"""

from __future__ import annotations

import logging
import time

from dgb.embed.contract import Embedder, check_texts

__all__ = ["Embedder", "check_texts", "get_embedder"]

log = logging.getLogger(__name__)


def get_embedder(settings=None, *, prefer: str | None = None) -> Embedder:
    """The embedder for this process: ``DGB_EMBEDDER=service``, ``local`` (load in-process) or
    ``auto`` (the default: the service when it answers, else in-process). Under ``auto`` a
    service that is up but refuses this process's credentials is a configuration error
    (:class:`~dgb.embed.client.ModelServiceError` naming the fix), never a silent fallback to
    loading the model here; a service still loading its model is waited for, up to
    ``DGB_MODEL_START_WAIT`` seconds (a second copy of the model here would cost as long to
    load and its memory), then loaded here with a warning."""
    from dgb.config import settings as current
    from dgb.config.embed import embedder_mode, model_start_wait

    settings = settings or current()
    mode = prefer or embedder_mode()
    if mode not in ("auto", "service", "local"):
        raise ValueError(f"DGB_EMBEDDER must be auto, service or local, got {mode!r}")
    if mode in ("auto", "service"):
        from dgb.embed.auth import client_credentials
        from dgb.embed.client import ModelServiceError, ServiceEmbedder

        credentials = client_credentials(settings.model_url)
        client = ServiceEmbedder(settings.model_url, credentials=credentials)
        if mode == "service":
            return client
        state = client.probe()
        wait = 0.0
        if state == "loading":
            wait = model_start_wait()
            state = _wait_while_loading(client, wait)
        if state == "ok":
            return client
        client.close()
        if state == "refused":
            sent = "sent no credentials" if credentials is None else "sent credentials it does not accept"
            raise ModelServiceError(
                f"the model service at {settings.model_url} is up but refuses this process (it {sent}): "
                f"set DGB_MODEL_TOKEN to its token (the local stack keeps it in "
                f"{settings.state_dir / 'secrets.env'}) or DGB_MODEL_AUTH to its scheme, "
                f"or DGB_EMBEDDER=local to load the model in this process"
            )
        if state == "loading":
            log.warning(
                "the model service at %s is still loading its model after %.0f s "
                "(DGB_MODEL_START_WAIT): loading the model in this process instead",
                settings.model_url,
                wait,
            )
    from dgb.embed.model import load_model

    return load_model(settings.embedding_model, settings.embedding_dim)


LOADING_POLL_S = 0.5  # how often a loading service's health is asked again


def _wait_while_loading(client, wait: float) -> str:
    """``client``'s :meth:`~dgb.embed.client.ServiceEmbedder.probe` answer once it is no longer
    ``"loading"``, or ``"loading"`` after ``wait`` seconds."""
    deadline = time.monotonic() + wait
    state = "loading"
    while state == "loading" and time.monotonic() < deadline:
        time.sleep(min(LOADING_POLL_S, max(0.0, deadline - time.monotonic())))
        state = client.probe()
    return state
