"""UmamiHook: owns the optional ``umami_db`` connection (the portal's Umami analytics PostgreSQL)
and opens it read-only. The view-count import runs only when the connection exists."""

from __future__ import annotations

from airflow.sdk.bases.hook import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException


class UmamiHook(BaseHook):
    """A read-only psycopg connection to Umami's database.

    :param umami_conn_id: Airflow connection (type postgres) of the Umami database.
    """

    conn_name_attr = "umami_conn_id"
    default_conn_name = "umami_db"
    conn_type = "postgres"
    hook_name = "Umami analytics (PostgreSQL)"

    def __init__(self, umami_conn_id: str = default_conn_name):
        super().__init__()
        self.umami_conn_id = umami_conn_id

    def configured(self) -> bool:
        """Whether the connection exists (the import is off without it)."""
        try:
            self.get_connection(self.umami_conn_id)
        except AirflowNotFoundException:
            return False
        return True

    def get_conn(self):
        from airflow.providers.postgres.hooks.postgres import PostgresHook

        conn = PostgresHook(postgres_conn_id=self.umami_conn_id).get_conn()
        conn.read_only = True  # the import only reads Umami's tables
        return conn
