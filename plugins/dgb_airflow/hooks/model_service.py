"""ModelServiceHook: owns the ``dgb_model_service`` connection (the resident embedding service,
:mod:`dgb.embed.service`) and builds the HTTP embedder Airflow tasks use."""

from __future__ import annotations

from airflow.sdk.bases.hook import BaseHook


class ModelServiceHook(BaseHook):
    """The model service named by an HTTP connection (``schema`` = scheme, ``host``, ``port``).

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

    def get_conn(self):
        """A :class:`dgb.embed.client.ServiceEmbedder` on the service."""
        from dgb.embed.client import ServiceEmbedder

        return ServiceEmbedder(self.base_url(), timeout=self.timeout)
