"""TypesenseHook: owns the `typesense_default` connection and builds the client."""

from __future__ import annotations

from airflow.sdk.bases.hook import BaseHook


class TypesenseHook(BaseHook):
    conn_name_attr = "typesense_conn_id"
    default_conn_name = "typesense_default"
    conn_type = "http"
    hook_name = "Typesense"

    def __init__(self, typesense_conn_id: str = default_conn_name, timeout: float = 10.0):
        super().__init__()
        self.typesense_conn_id = typesense_conn_id
        self.timeout = timeout

    def get_conn(self):
        import typesense

        conn = self.get_connection(self.typesense_conn_id)
        return typesense.Client(
            {
                "nodes": [
                    {"host": conn.host, "port": str(conn.port or 8108), "protocol": conn.schema or "http"}
                ],
                "api_key": conn.password,
                "connection_timeout_seconds": self.timeout,
                "num_retries": 2,
                "retry_interval_seconds": 0.5,
            }
        )
