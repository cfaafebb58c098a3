"""TypesenseHook (dgb_airflow.hooks.typesense): the client built from ``typesense_default`` reaches
the real local Typesense."""

from __future__ import annotations

from dgb_airflow.hooks.typesense import TypesenseHook


def test_client_from_the_connection_reaches_typesense(typesense_server):
    client = TypesenseHook(timeout=5).get_conn()
    node = client.config.nodes[0]
    assert (node.host, int(node.port)) == (typesense_server.typesense_host, typesense_server.typesense_port)
    assert client.operations.is_healthy()
    assert isinstance(client.collections.retrieve(), list)
