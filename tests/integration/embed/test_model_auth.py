"""Who may call the model service (dgb.embed.auth), against the real service: `dgb model serve`
with a bearer token (DGB_MODEL_AUTH=token), and the app with the Google ID token check
(google_id) on loopback, its tokens signed by a locally generated key (nothing reaches Google)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest

from dgb.config import REPO_ROOT
from dgb.embed.auth import (
    GOOGLE_ID,
    TOKEN,
    AuthConfigError,
    BearerToken,
    GoogleIdToken,
    GoogleIdVerifier,
    ServiceAuth,
    bearer,
    client_credentials,
)
from dgb.embed.client import ModelServiceError, ServiceEmbedder
from dgb.embed.model import load_model
from dgb.embed.service import make_app
from dgb.pipeline.resilience import classify
from tests.support.model_service import LocalIssuer, free_port, ready_state, served_by_cli, serving

pytestmark = pytest.mark.model

SECRET = secrets.token_urlsafe(32)
WRONG = "not-the-token-" + secrets.token_urlsafe(8)
TEXTS = ["vacinação contra a gripe", "leilão de energia eólica"]


@pytest.fixture(scope="module")
def model():
    return load_model("use-multilingual-v3", 512)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """`dgb model serve` on a free port, its token in DGB_MODEL_TOKEN."""
    log_path = tmp_path_factory.mktemp("model-auth") / "service.log"
    with served_by_cli(log_path, SECRET) as url:
        yield {"url": url, "log": log_path}


def _embed(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(f"{url}/embed", json={"texts": TEXTS}, headers=headers, timeout=30)


# --------------------------------------------------------------------------- bearer token


def test_no_or_a_wrong_token_is_401_and_logged_without_the_token(service):
    url = service["url"]
    refused = [
        _embed(url),
        _embed(url, {"Authorization": f"Bearer {WRONG}"}),
        _embed(url, {"Authorization": f"Bearer {SECRET[:-1]}"}),  # one character short
        _embed(url, {"Authorization": f"Basic {SECRET}"}),  # not a bearer token
        _embed(url, {"Authorization": "Bearer"}),  # the scheme alone
        httpx.get(f"{url}/nope", timeout=5),  # any path but the probe
    ]
    for resp in refused:
        assert resp.status_code == 401, resp.text
        assert resp.json() == {"error": "unauthorized"}
        assert resp.headers["www-authenticate"].startswith("Bearer")
    time.sleep(0.2)
    log = service["log"].read_text(errors="replace")
    lines = [line for line in log.splitlines() if " 401 refused: " in line]
    assert len(lines) >= len(refused)
    assert any("POST /embed 401 refused: no bearer credentials client=127.0.0.1" in line for line in lines)
    assert any("POST /embed 401 refused: wrong token" in line for line in lines)
    assert WRONG not in log and SECRET not in log and SECRET[:-1] not in log


def test_the_right_bearer_token_embeds(service, model):
    resp = _embed(service["url"], {"Authorization": f"Bearer {SECRET}"})
    assert resp.status_code == 200
    np.testing.assert_allclose(
        np.asarray(resp.json()["vectors"], dtype=np.float32), model.encode(TEXTS), atol=1e-5
    )
    lower = _embed(service["url"], {"Authorization": f"bearer {SECRET}"})  # the scheme is case-blind
    assert lower.status_code == 200


def test_health_answers_without_credentials_and_reveals_nothing(service):
    url = service["url"]
    for headers in (None, {"Authorization": f"Bearer {WRONG}"}):
        resp = httpx.get(f"{url}/health", headers=headers, timeout=5)
        assert resp.status_code == 200 and resp.json() == {"status": "ok"}
    full = httpx.get(f"{url}/health", headers={"Authorization": f"Bearer {SECRET}"}, timeout=5)
    assert full.json() == {"status": "ok", "model": "use-multilingual-v3", "dim": 512}


def test_the_client_sends_its_token_and_a_wrong_one_is_not_an_outage(service, model):
    with ServiceEmbedder(service["url"], credentials=BearerToken(SECRET)) as client:
        assert client.available() and client.dim == 512  # its health check is authenticated
        np.testing.assert_allclose(client.encode(TEXTS), model.encode(TEXTS), atol=1e-5)
    with ServiceEmbedder(service["url"], credentials=BearerToken(WRONG), backoff=5.0) as client:
        with pytest.raises(ModelServiceError, match="HTTP 401: unauthorized") as err:
            client.encode(TEXTS)
        assert type(err.value) is ModelServiceError  # refused at once, never retried as an outage
    # the pipeline holds the work (the breaker): wrong credentials are no article's fault
    verdict = classify(err.value)
    assert (verdict.kind, verdict.dependency, verdict.reason) == (
        "transient",
        "model_service",
        "model_service_refused",
    )
    with ServiceEmbedder(service["url"]) as anonymous:
        assert anonymous.available() is False  # health without credentials does not name the model


def test_the_cli_sends_the_configured_token(service, model, monkeypatch, tmp_path):
    """`dgb embed` (and every stack process through get_embedder) sends DGB_MODEL_TOKEN, else
    the one in <DGB_STATE_DIR>/secrets.env that `make up` generated."""
    (tmp_path / "secrets.env").write_text(f"DGB_MODEL_TOKEN={SECRET}\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("DGB_MODEL_TOKEN", "DGB_MODEL_AUTH")}
    env.update(DGB_MODEL_URL=service["url"], DGB_EMBEDDER="service", DGB_STATE_DIR=str(tmp_path))
    run = subprocess.run(
        [sys.executable, "-m", "dgb.cli", "embed"],
        input="\n".join(TEXTS) + "\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(REPO_ROOT),
    )
    assert run.returncode == 0, run.stderr
    assert len(run.stdout.splitlines()) == 2
    (tmp_path / "secrets.env").write_text("DGB_MODEL_TOKEN=stale\n", encoding="utf-8")
    stale = subprocess.run(
        [sys.executable, "-m", "dgb.cli", "embed"],
        input="x\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(REPO_ROOT),
    )
    assert stale.returncode == 1 and "401" in stale.stderr and "stale" not in stale.stderr


def test_auto_mode_names_refused_credentials_not_loading_the_model_here(service, monkeypatch, tmp_path):
    """DGB_EMBEDDER=auto with a service that is up but refuses this process: a clear error
    naming the fix, not a silent in-process model load; the right token gets the service."""
    from dgb.config import Settings
    from dgb.embed import get_embedder

    monkeypatch.setenv("DGB_MODEL_URL", service["url"])
    monkeypatch.setenv("DGB_STATE_DIR", str(tmp_path))  # no secrets.env there
    monkeypatch.setenv("DGB_EMBEDDER", "auto")
    monkeypatch.delenv("DGB_MODEL_AUTH", raising=False)
    for token, sent in ((WRONG, "sent credentials it does not accept"), (None, "sent no credentials")):
        if token is None:
            monkeypatch.delenv("DGB_MODEL_TOKEN", raising=False)
        else:
            monkeypatch.setenv("DGB_MODEL_TOKEN", token)
        with pytest.raises(ModelServiceError, match="is up but refuses this process") as err:
            get_embedder(Settings.from_env())
        assert sent in str(err.value) and "DGB_MODEL_TOKEN" in str(err.value)
        assert str(tmp_path / "secrets.env") in str(err.value) and WRONG not in str(err.value)
    monkeypatch.setenv("DGB_MODEL_TOKEN", SECRET)
    with ServiceEmbedder(service["url"], credentials=BearerToken(WRONG)) as client:
        assert client.probe() == "refused" and not client.available()
    embedder = get_embedder(Settings.from_env())
    assert isinstance(embedder, ServiceEmbedder) and embedder.probe() == "ok" and embedder.dim == 512


def test_token_mode_without_a_token_refuses_to_start(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DGB_MODEL_TOKEN"}
    env.update(DGB_STATE_DIR=str(tmp_path), DGB_MODEL_AUTH="token")  # no secrets.env there
    out = subprocess.run(
        [sys.executable, "-m", "dgb.cli", "model", "serve", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "no token" in out.stderr and "DGB_MODEL_AUTH=none" in out.stderr
    with pytest.raises(AuthConfigError):
        ServiceAuth(TOKEN, token="")
    with pytest.raises(AuthConfigError, match="DGB_MODEL_AUDIENCE"):
        GoogleIdVerifier("")


def test_bearer_header_parsing():
    assert bearer("Bearer abc") == "abc" and bearer("bearer  abc ") == "abc"
    assert bearer(None) is None and bearer("Bearer") is None and bearer("Basic abc") is None
    auth = ServiceAuth(TOKEN, token="s3cret")
    assert auth.refusal("Bearer s3cret") is None
    assert auth.refusal("Bearer s3cre") == "wrong token" and auth.refusal(None) == "no bearer credentials"
    assert "s3cret" not in repr(auth) and "s3cret" not in repr(BearerToken("s3cret"))


# --------------------------------------------------------------------------- Google ID token


AUDIENCE = "https://dgb-model-service-123456.southamerica-east1.run.app"


@pytest.fixture(scope="module")
def issuer():
    return LocalIssuer()


@pytest.fixture(scope="module")
def google_service(model, issuer):
    """The service app on loopback checking Google ID tokens for AUDIENCE, with the local key's
    certificates injected in place of Google's."""
    verifier = GoogleIdVerifier(f"{AUDIENCE},https://dgb-model-service-abc-rj.a.run.app", certs=issuer.certs)
    with serving(make_app(ready_state(model), auth=ServiceAuth(GOOGLE_ID, verifier=verifier))) as url:
        yield url


def test_a_google_id_token_for_the_service_url_is_accepted(google_service, issuer, model):
    token = issuer.token(AUDIENCE)
    resp = _embed(google_service, {"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200
    np.testing.assert_allclose(
        np.asarray(resp.json()["vectors"], dtype=np.float32), model.encode(TEXTS), atol=1e-5
    )
    # the service's other URL, and the URL with a trailing slash
    for aud in ("https://dgb-model-service-abc-rj.a.run.app", AUDIENCE + "/"):
        assert _embed(google_service, {"Authorization": f"Bearer {issuer.token(aud)}"}).status_code == 200


def test_bad_id_tokens_are_refused(google_service, issuer):
    stranger = LocalIssuer("another-key")  # not among the certificates the service trusts
    refused = {
        "no token": None,
        "wrong audience": issuer.token("https://another-service.run.app"),
        "expired": issuer.token(AUDIENCE, issued=time.time() - 7200, lifetime=3600),
        "not Google": issuer.token(AUDIENCE, issuer="https://evil.example"),
        "unknown key": stranger.token(AUDIENCE),
        "not a JWT": "abc.def",
        "the bearer secret": SECRET,
    }
    for label, token in refused.items():
        headers = {"Authorization": f"Bearer {token}"} if token else None
        resp = _embed(google_service, headers)
        assert resp.status_code == 401, label
    health = httpx.get(f"{google_service}/health", timeout=5)
    assert health.json() == {"status": "ok"}
    full = httpx.get(
        f"{google_service}/health", headers={"Authorization": f"Bearer {issuer.token(AUDIENCE)}"}
    )
    assert full.json()["dim"] == 512


def test_the_verifier_names_the_reason_without_the_token(issuer):
    verifier = GoogleIdVerifier(
        AUDIENCE, certs=issuer.certs, invokers=frozenset({"composer@proj-1.iam.gserviceaccount.com"})
    )
    assert verifier(issuer.token(AUDIENCE))["email"] == "composer@proj-1.iam.gserviceaccount.com"
    auth = ServiceAuth(GOOGLE_ID, verifier=verifier)
    other = issuer.token(AUDIENCE, email="intruder@proj-1.iam.gserviceaccount.com")
    assert "not in DGB_MODEL_INVOKERS" in auth.refusal(f"Bearer {other}")
    garbage = "eyJhbGciOiJSUzI1NiJ9.bm90LWpzb24.c2lnbmF0dXJl"
    reason = auth.refusal(f"Bearer {garbage}")
    assert reason.startswith("invalid ID token") and garbage not in reason
    assert all(part not in reason for part in garbage.split("."))


def test_the_caller_caches_its_id_token_and_refreshes_it_before_expiry(google_service, issuer, model):
    now = [time.time()]
    fetched = []

    def fetch(audience: str) -> str:
        fetched.append(audience)
        return issuer.token(audience, lifetime=3600)  # valid now (the service's clock is real)

    credentials = GoogleIdToken(AUDIENCE, fetch=fetch, clock=lambda: now[0])
    with ServiceEmbedder(google_service, credentials=credentials) as client:
        np.testing.assert_allclose(client.encode(TEXTS), model.encode(TEXTS), atol=1e-5)
        client.encode(TEXTS[:1])
        assert fetched == [AUDIENCE]  # health + two embeds on one token
        now[0] += 3600 - 299  # the caller's clock: in the last five minutes, a new token first
        client.encode(TEXTS[:1])
        assert fetched == [AUDIENCE, AUDIENCE]
    assert credentials.fetches == 2


def test_client_credentials_follow_the_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("DGB_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("DGB_MODEL_TOKEN", raising=False)
    monkeypatch.setenv("DGB_MODEL_AUTH", "token")
    assert client_credentials("http://127.0.0.1:1") is None  # no token anywhere: nothing sent
    monkeypatch.setenv("DGB_MODEL_TOKEN", SECRET)
    assert client_credentials("http://127.0.0.1:1").headers() == {"Authorization": f"Bearer {SECRET}"}
    monkeypatch.setenv("DGB_MODEL_AUTH", "google_id")
    creds = client_credentials(AUDIENCE)
    assert isinstance(creds, GoogleIdToken) and creds.audience == AUDIENCE
    monkeypatch.setenv("DGB_MODEL_AUTH", "none")
    assert client_credentials(AUDIENCE) is None
    monkeypatch.setenv("DGB_MODEL_AUTH", "open")
    with pytest.raises(ValueError, match="DGB_MODEL_AUTH"):
        client_credentials(AUDIENCE)


def test_on_cloud_run_a_token_whose_signature_the_front_end_removed_is_checked_by_its_claims(issuer):
    """Cloud Run's IAM verifies the signature and forwards the token with SIGNATURE_REMOVED_BY_GOOGLE
    in its place: inside Cloud Run (K_SERVICE) the claims are still checked; elsewhere refused."""

    def stripped(token: str) -> str:
        return token.rsplit(".", 1)[0] + ".SIGNATURE_REMOVED_BY_GOOGLE"

    on_run = ServiceAuth(
        GOOGLE_ID, verifier=GoogleIdVerifier(AUDIENCE, certs=issuer.certs, behind_cloud_run=True)
    )
    elsewhere = ServiceAuth(GOOGLE_ID, verifier=GoogleIdVerifier(AUDIENCE, certs=issuer.certs))
    good = stripped(issuer.token(AUDIENCE))
    assert on_run.refusal(f"Bearer {good}") is None
    assert elsewhere.refusal(f"Bearer {good}").startswith("invalid ID token")
    for bad, why in (
        (issuer.token("https://another.run.app"), "audience"),
        (issuer.token(AUDIENCE, issued=time.time() - 7200), "lifetime"),
        (issuer.token(AUDIENCE, issuer="https://evil.example"), "is not Google"),
    ):
        assert why in on_run.refusal(f"Bearer {stripped(bad)}")
    assert "unreadable claims" in on_run.refusal("Bearer a.%%%.SIGNATURE_REMOVED_BY_GOOGLE")


def test_the_service_knows_it_runs_on_cloud_run(monkeypatch):
    monkeypatch.setenv("DGB_MODEL_AUTH", "google_id")
    monkeypatch.setenv("DGB_MODEL_AUDIENCE", AUDIENCE)
    monkeypatch.delenv("K_SERVICE", raising=False)
    assert ServiceAuth.from_env().verifier.behind_cloud_run is False
    monkeypatch.setenv("K_SERVICE", "dgb-model-service")  # what Cloud Run sets in its containers
    assert ServiceAuth.from_env().verifier.behind_cloud_run is True
