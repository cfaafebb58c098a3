"""The model service app under uvicorn in the test process (on loopback), and Google-style ID
tokens signed by a locally generated RSA key (never Google's: nothing reaches Google)."""

from __future__ import annotations

import datetime as dt
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ready_state(model):
    """A :class:`dgb.embed.service.ModelState` serving ``model`` (already loaded)."""
    from dgb.embed.service import ModelState

    class Loaded(ModelState):
        def load(self) -> None:
            self.embedder = model

    return Loaded(model.name, model.dim)


@contextmanager
def serving(app, *, loaded: bool = True) -> Iterator[str]:
    """Run ``app`` on a free loopback port until the block ends; yields its base URL once its
    health answers 200 (``loaded=False``: once it answers at all, e.g. 503 "loading")."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    try:
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200 or not loaded:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the service app did not start"
            time.sleep(0.05)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class LocalIssuer:
    """An RSA key pair and a self-signed certificate: signs ID tokens the way Google's look
    (``iss``, ``aud``, ``email``, ``iat``, ``exp``) and offers ``certs()`` ({key id: PEM})."""

    def __init__(self, kid: str = "local-test-key") -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.x509.oid import NameOID
        from google.auth import crypt

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, kid)])
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .sign(key, hashes.SHA256())
        )
        self.kid = kid
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        self.signer = crypt.RSASigner.from_string(pem, key_id=kid)
        self.cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode("ascii")

    def certs(self) -> dict[str, str]:
        return {self.kid: self.cert_pem}

    def token(
        self,
        audience: str,
        *,
        email: str = "composer@proj-1.iam.gserviceaccount.com",
        issuer: str = "https://accounts.google.com",
        lifetime: int = 3600,
        issued: float | None = None,
    ) -> str:
        from google.auth import jwt

        iat = int(issued if issued is not None else time.time())
        claims = {
            "iss": issuer,
            "aud": audience,
            "email": email,
            "sub": "1234",
            "iat": iat,
            "exp": iat + lifetime,
        }
        return jwt.encode(self.signer, claims).decode("ascii")


@contextmanager
def served_by_cli(log_path, token: str, model: str = "use-multilingual-v3", dim: int = 512) -> Iterator[str]:
    """``dgb model serve`` as its own process on a free loopback port, with bearer ``token``
    (``DGB_MODEL_AUTH=token``), its output in ``log_path``; yields its base URL once /health
    answers 200 (at most 120 s: loading the model), stops its process group at the end."""
    import os
    import subprocess
    import sys

    from dgb.config import REPO_ROOT
    from tests.support.processes import stop_process_group

    port = free_port()
    env = dict(
        os.environ,
        DGB_EMBEDDING_MODEL=model,
        DGB_EMBEDDING_DIM=str(dim),
        DGB_MODEL_AUTH="token",
        DGB_MODEL_TOKEN=token,
    )
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dgb.cli", "model", "serve", "--host", "127.0.0.1", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=str(REPO_ROOT),
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, log_path.read_text(errors="replace")[-2000:]
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log_path.read_text(errors="replace")[-2000:]
            time.sleep(0.1)
        yield url
    finally:
        stop_process_group(proc)
