"""ModelServiceHook: owns the ``dgb_model_service`` connection (the resident embedding service,
:mod:`dgb.embed.service`) and builds the HTTP embedder Airflow tasks use, with its credentials."""

from __future__ import annotations

from typing import Any

from airflow.sdk.bases.hook import BaseHook

GOOGLE_ID, TOKEN = "google_id", "token"


class ModelServiceHook(BaseHook):
    """The model service named by an HTTP connection (``schema`` = scheme, ``host``, ``port``).

    Credentials (:mod:`dgb.embed.auth`), by the connection's extra ``auth``:

    * ``google_id`` (the default for a Cloud Run host, ``*.run.app``): a Google ID token whose
      audience is the extra's ``audience`` or else the service URL, from the google provider's
      default credentials (on Composer: the environment's service account, which needs
      ``roles/run.invoker`` on the service); cached and refreshed before it expires;
    * ``token`` (the default otherwise): the connection's password as a bearer token; a
      connection without a password falls back to the process's own setting
      (``DGB_MODEL_TOKEN``, the local stack's ``.state/secrets.env``).

    :param model_conn_id: Airflow connection of the model service.
    :param timeout: seconds one embedding request may take.
    """

    conn_name_attr = "model_conn_id"
    default_conn_name = "dgb_model_service"
    conn_type = "http"
    hook_name = "DGB model service"

    def __init__(self, model_conn_id: str = default_conn_name, timeout: float = 60.0) -> None:
        super().__init__()
        self.model_conn_id = model_conn_id
        self.timeout = timeout

    def base_url(self) -> str:
        """``scheme://host[:port]`` of the service, from the connection."""
        conn = self.get_connection(self.model_conn_id)
        if not conn.host:
            raise ValueError(f"connection {self.model_conn_id!r} has no host: it must name the model service")
        port = f":{conn.port}" if conn.port else ""
        return f"{conn.schema or 'http'}://{conn.host}{port}"

    def auth_mode(self) -> str:
        """``google_id`` or ``token`` (see the class docstring)."""
        conn = self.get_connection(self.model_conn_id)
        extra = conn.extra_dejson or {}
        mode = str(extra.get("auth") or "").strip().lower()
        if not mode:
            mode = GOOGLE_ID if (conn.host or "").lower().endswith(".run.app") else TOKEN
        if mode not in (GOOGLE_ID, TOKEN, "none"):
            raise ValueError(
                f"connection {self.model_conn_id!r}: extra auth must be google_id, token or none"
            )
        return mode

    def credentials(self) -> Any:
        """What the embedder sends: a ``GoogleIdToken``, a ``BearerToken`` or None."""
        from dgb.embed.auth import BearerToken, GoogleIdToken, client_credentials

        conn = self.get_connection(self.model_conn_id)
        mode = self.auth_mode()
        if mode == GOOGLE_ID:
            audience = str((conn.extra_dejson or {}).get("audience") or self.base_url())
            return GoogleIdToken(audience, fetch=provider_id_token)
        if mode == "none":
            return None
        if conn.password:
            return BearerToken(conn.password)
        return client_credentials(self.base_url())

    def get_conn(self):
        """A :class:`dgb.embed.client.ServiceEmbedder` on the service, with its credentials."""
        from dgb.embed.client import ServiceEmbedder

        return ServiceEmbedder(self.base_url(), timeout=self.timeout, credentials=self.credentials())


def provider_id_token(audience: str) -> str:
    """A fresh Google ID token for ``audience`` from the google provider's default credentials
    (a service account key, the metadata server on Composer, or gcloud's user credentials)."""
    from airflow.providers.google.common.utils.id_token_credentials import get_default_id_token_credentials
    from google.auth.transport.requests import Request

    credentials = get_default_id_token_credentials(target_audience=audience)
    credentials.refresh(Request())
    return credentials.token
