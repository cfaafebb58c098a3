"""ModelServiceHook (dgb_airflow.hooks.model_service): the service URL comes from an Airflow
connection, and the embedder it builds talks to that URL (a loopback HTTP server here) with the
connection's credentials: its password as the bearer token, or a Google ID token (Cloud Run)."""

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


# -- credentials: the real service app on loopback, with its check on -------------------------


@pytest.fixture(scope="module")
def bundled_model():
    from dgb.embed.model import load_model

    return load_model("use-multilingual-v3", 512)


def test_the_hook_sends_the_connections_password_as_the_bearer_token(monkeypatch, bundled_model):
    from dgb.embed.auth import TOKEN, BearerToken, ServiceAuth
    from dgb.embed.client import ModelServiceError
    from dgb.embed.service import make_app
    from tests.support.model_service import ready_state, serving

    app = make_app(ready_state(bundled_model), auth=ServiceAuth(TOKEN, token="senha-do-servico"))
    with serving(app) as url:
        port = int(url.rsplit(":", 1)[1])
        _conn(
            monkeypatch, "svc_token", host="127.0.0.1", port=port, schema="http", password="senha-do-servico"
        )
        hook = ModelServiceHook("svc_token", timeout=10)
        assert hook.auth_mode() == "token" and isinstance(hook.credentials(), BearerToken)
        embedder = hook.get_conn()
        assert embedder.encode(["vacinação contra a gripe"]).shape == (1, 512)
        _conn(monkeypatch, "svc_wrong", host="127.0.0.1", port=port, schema="http", password="outra")
        with pytest.raises(ModelServiceError, match="HTTP 401"):
            ModelServiceHook("svc_wrong", timeout=10).get_conn().encode(["x"])


def test_a_cloud_run_connection_calls_with_a_google_id_token(monkeypatch, bundled_model):
    """``*.run.app`` (or extra auth=google_id): an ID token for the service URL from the google
    provider's default credentials; here those credentials are replaced by a local signer, and the
    service checks the token against the local key's certificate (nothing reaches Google)."""
    from airflow.providers.google.common.utils import id_token_credentials

    from dgb.embed.auth import GOOGLE_ID, GoogleIdToken, GoogleIdVerifier, ServiceAuth
    from dgb.embed.service import make_app
    from tests.support.model_service import LocalIssuer, ready_state, serving

    _conn(monkeypatch, "svc_run", host="dgb-model-service-123.a.run.app", schema="https", port=443)
    hook = ModelServiceHook("svc_run")
    creds = hook.credentials()
    assert hook.auth_mode() == GOOGLE_ID and isinstance(creds, GoogleIdToken)
    assert creds.audience == "https://dgb-model-service-123.a.run.app:443"

    issuer, asked = LocalIssuer(), []

    class ProviderCredentials:  # what get_default_id_token_credentials returns, refreshed by the hook
        def __init__(self, audience):
            self.audience, self.token = audience, None

        def refresh(self, request):
            asked.append(self.audience)
            self.token = issuer.token(self.audience)

    monkeypatch.setattr(
        id_token_credentials,
        "get_default_id_token_credentials",
        lambda target_audience, request=None: ProviderCredentials(target_audience),
    )
    audience = "https://dgb-model-service-123.a.run.app"
    verifier = GoogleIdVerifier(audience, certs=issuer.certs)
    with serving(make_app(ready_state(bundled_model), auth=ServiceAuth(GOOGLE_ID, verifier=verifier))) as url:
        port = int(url.rsplit(":", 1)[1])
        extra = {"auth": "google_id", "audience": audience}
        _conn(monkeypatch, "svc_google", host="127.0.0.1", port=port, schema="http", extra=extra)
        embedder = ModelServiceHook("svc_google", timeout=10).get_conn()
        assert embedder.encode(["leilão de energia"]).shape == (1, 512)
        assert embedder.encode(["outra vez"]).shape == (1, 512)
    assert asked == [audience]  # one token, cached across the calls
