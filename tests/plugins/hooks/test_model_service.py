"""ModelServiceHook (dgb_airflow.hooks.model_service): the service URL comes from an Airflow
connection, and the embedder it builds talks to that URL (a loopback HTTP server here)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from dgb_airflow.hooks.model_service import ModelServiceHook


def _conn(monkeypatch, conn_id: str, **fields) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "http", **fields}))


def test_base_url_from_the_connection(monkeypatch):
    _conn(monkeypatch, "svc_a", host="127.0.0.1", port=8123, schema="http")
    _conn(monkeypatch, "svc_b", host="models.internal", schema="https")
    _conn(monkeypatch, "svc_c", port=1)
    assert ModelServiceHook("svc_a").base_url() == "http://127.0.0.1:8123"
    assert ModelServiceHook("svc_b").base_url() == "https://models.internal"
    with pytest.raises(ValueError, match="no host"):
        ModelServiceHook("svc_c").base_url()


def test_the_embedder_reaches_the_service_of_the_connection(monkeypatch):
    seen = []

    class Health(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path)
            body = json.dumps({"status": "ok", "model": "m", "dim": 3}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        _conn(monkeypatch, "svc_live", host="127.0.0.1", port=server.server_address[1], schema="http")
        embedder = ModelServiceHook("svc_live", timeout=5).get_conn()
        assert embedder.base_url == f"http://127.0.0.1:{server.server_address[1]}"
        assert (embedder.name, embedder.dim) == ("m", 3) and seen == ["/health"]
    finally:
        server.shutdown()
        server.server_close()
