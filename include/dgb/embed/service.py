"""The resident embedding model service: loads the model once, answers over HTTP.

Airflow tasks reach it through :class:`dgb.embed.client.ServiceEmbedder`, so no task process
pays the model load (and, for a production model, the torch import, ~8-10 s). `make up` starts it with
``python -m dgb.cli model serve --host 127.0.0.1 --port N``.

API (JSON):

* ``GET /health`` -> 200 ``{"status": "ok", "model": name, "dim": dim}`` once the model is
  loaded; 503 ``{"status": "loading", ...}`` before (the port is bound first, so a health
  check can tell "starting" from "not running").
* ``POST /embed`` ``{"texts": [str, ...], "batch_size"?: int}`` -> ``{"model", "dim",
  "vectors": [[float, ...], ...]}`` (float32 values, rows L2-normalised). At most
  ``MAX_TEXTS`` texts of at most ``MAX_TEXT_CHARS`` characters each; bad input -> 400 with
  ``{"error": "..."}``; 503 while loading.

Requests are accepted concurrently (one thread each) but encodes are serialised under one
lock: the model is CPU-bound and already uses the configured BLAS threads. One log line per
request. Binding a non-loopback address needs ``allow_remote`` (``--allow-remote``): the
service has no authentication.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import logging
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

log = logging.getLogger("dgb.embed.service")

MAX_TEXTS = 512
MAX_TEXT_CHARS = 100_000
MAX_BATCH_SIZE = 512
MAX_BODY_BYTES = 64 * 1024 * 1024


class ServiceConfigError(ValueError):
    """The service was asked to start in a way it refuses (e.g. a public address)."""


class BadRequest(ValueError):
    """Invalid request: answered with ``status`` (400 unless said otherwise) and the message."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` resolves to is a loopback address."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addrs = {info[4][0] for info in infos}
    return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs)


def parse_embed_request(body: bytes) -> tuple[list[str], int, str]:
    """Validate a POST /embed body -> (texts, batch_size, encoding); BadRequest with a clear message.

    ``encoding`` is ``json`` (default: ``vectors`` as lists of floats) or ``base64``
    (``vectors_b64``: the float32 little-endian bytes of the (n, dim) matrix, base64-encoded,
    with ``shape``): about 4x smaller and much cheaper to produce and parse.
    """
    try:
        payload = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"body is not valid UTF-8 JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise BadRequest('body must be a JSON object like {"texts": ["..."]}')
    texts = payload.get("texts")
    if not isinstance(texts, list):
        raise BadRequest('"texts" must be a list of strings')
    if len(texts) > MAX_TEXTS:
        raise BadRequest(f'"texts" has {len(texts)} items; at most {MAX_TEXTS} per request')
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise BadRequest(f'"texts"[{i}] is {type(text).__name__}, not a string')
        if len(text) > MAX_TEXT_CHARS:
            raise BadRequest(f'"texts"[{i}] has {len(text)} characters; at most {MAX_TEXT_CHARS}')
    batch_size = payload.get("batch_size", 32)
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int)
        or not 1 <= batch_size <= MAX_BATCH_SIZE
    ):
        raise BadRequest(f'"batch_size" must be an integer from 1 to {MAX_BATCH_SIZE}')
    encoding = payload.get("encoding", "json")
    if encoding not in ("json", "base64"):
        raise BadRequest('"encoding" must be "json" or "base64"')
    unknown = set(payload) - {"texts", "batch_size", "encoding"}
    if unknown:
        raise BadRequest(f"unknown field(s): {', '.join(sorted(unknown))}")
    return texts, batch_size, encoding


class ModelState:
    """The loaded model (or None while loading) and the lock that serialises encodes."""

    def __init__(self, model_name: str, dim: int | None) -> None:
        self.model_name = model_name
        self.wanted_dim = dim
        self.embedder = None
        self.encode_lock = threading.Lock()

    def load(self) -> None:
        from dgb.embed.model import load_model

        self.embedder = load_model(self.model_name, self.wanted_dim)

    def health(self) -> tuple[int, dict[str, Any]]:
        if self.embedder is None:
            return 503, {"status": "loading", "model": self.model_name, "dim": self.wanted_dim}
        return 200, {"status": "ok", "model": self.embedder.name, "dim": self.embedder.dim}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive for the client's connection pool
    disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms delayed-ACK stall
    server_version = "dgb-model-service/1"
    state: ModelState  # set on the subclass made by make_server()

    # -- plumbing ---------------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request is written by _log()

    def _log(self, status: int, count: int | str, t0: float, level: int = logging.INFO) -> None:
        ms = (time.perf_counter() - t0) * 1000
        log.log(
            level,
            "%s %s %d count=%s ms=%.1f client=%s",
            self.command,
            self.path,
            status,
            count,
            ms,
            self.client_address[0],
        )

    def _send(self, status: int, payload: dict[str, Any] | bytes) -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _read_body(self) -> bytes:
        raw = self.headers.get("Content-Length")
        if raw is None:
            self.close_connection = True
            raise BadRequest("Content-Length header required")
        try:
            length = int(raw)
        except ValueError:
            self.close_connection = True
            raise BadRequest("Content-Length is not an integer") from None
        if length < 0 or length > MAX_BODY_BYTES:
            self.close_connection = True  # we do not read it: the connection cannot be reused
            raise BadRequest(f"body of {length} bytes; at most {MAX_BODY_BYTES}", status=413)
        return self.rfile.read(length)

    # -- routes -------------------------------------------------------------------------
    def do_GET(self) -> None:
        t0 = time.perf_counter()
        route = self.path.split("?", 1)[0]
        if route == "/health":
            status, body = self.state.health()
        else:
            status, body = 404, {"error": f"no route GET {self.path}; try GET /health or POST /embed"}
        self._send(status, body)
        # health polls (every 0.3 s while the stack waits for start-up) go to DEBUG
        self._log(status, "-", t0, level=logging.DEBUG if route == "/health" else logging.INFO)

    def do_POST(self) -> None:
        t0 = time.perf_counter()
        count: int | str = "-"
        try:
            if self.path.split("?", 1)[0] != "/embed":
                self._read_body()
                status, body = 404, {"error": f"no route POST {self.path}; try POST /embed"}
            else:
                texts, batch_size, encoding = parse_embed_request(self._read_body())
                count = len(texts)
                embedder = self.state.embedder
                if embedder is None:
                    status, body = 503, {"error": "model is loading; retry shortly"}
                else:
                    with self.state.encode_lock:
                        vectors = embedder.encode(texts, batch_size=batch_size)
                    answer = {"model": embedder.name, "dim": embedder.dim}
                    if encoding == "base64":
                        matrix = np.ascontiguousarray(vectors, dtype="<f4")
                        answer.update(
                            vectors_b64=base64.b64encode(matrix.tobytes()).decode("ascii"),
                            shape=list(matrix.shape),
                        )
                    else:
                        answer["vectors"] = vectors.tolist()
                    body = json.dumps(answer).encode("utf-8")
                    status = 200
        except BadRequest as exc:
            status, body = exc.status, {"error": str(exc)}
        except Exception as exc:  # never let one request take the server down
            log.exception("embed failed")
            status, body = 500, {"error": f"embedding failed: {type(exc).__name__}: {exc}"}
        try:
            self._send(status, body)
        except OSError:
            self.close_connection = True
        self._log(status, count, t0)

    def do_PUT(self) -> None:
        self.close_connection = True
        self._send(405, {"error": "method not allowed"})

    do_DELETE = do_PATCH = do_PUT


class ModelHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


def make_server(host: str, port: int, state: ModelState) -> ModelHTTPServer:
    handler = type("BoundHandler", (Handler,), {"state": state})
    return ModelHTTPServer((host, port), handler)


def serve(
    host: str,
    port: int,
    model_name: str,
    dim: int | None = None,
    *,
    allow_remote: bool = False,
    ready: threading.Event | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Run the service until SIGTERM/SIGINT (or ``stop`` is set); returns an exit code.

    The port is bound first (health answers 503 "loading"), then the model is loaded once.
    A model that cannot be loaded ends the process with exit code 1."""
    if not allow_remote and not is_loopback(host):
        raise ServiceConfigError(
            f"refusing to bind {host}: the model service has no authentication; bind a loopback "
            f"address (127.0.0.1) or pass --allow-remote (containers behind a private network)"
        )
    if not logging.getLogger().handlers:
        # ours at INFO; libraries (torch, transformers) only from WARNING up
        logging.basicConfig(
            level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    log.setLevel(logging.INFO)
    state = ModelState(model_name, dim)
    server = make_server(host, port, state)
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():

        def _on_signal(signum: int, _frame: Any) -> None:
            stop.set()
            if state.embedder is None:  # still loading: do not make `make down` wait for it
                raise SystemExit(0)

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, _on_signal)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="model-http", daemon=True
    )
    thread.start()
    log.info("listening on http://%s:%d; loading model %s", host, server.server_address[1], model_name)
    try:
        t0 = time.perf_counter()
        try:
            state.load()
        except Exception as exc:
            log.error("model %s could not be loaded: %s: %s", model_name, type(exc).__name__, exc)
            return 1
        log.info(
            "model %s (%d-d) loaded in %.1fs; ready",
            state.embedder.name,
            state.embedder.dim,
            time.perf_counter() - t0,
        )
        if ready is not None:
            ready.set()
        stop.wait()
        log.info("stopping")
        return 0
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
