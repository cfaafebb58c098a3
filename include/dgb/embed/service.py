"""The resident embedding model service: loads the model once, answers over HTTP.

Airflow tasks reach it through :class:`dgb.embed.client.ServiceEmbedder`, so no task process
pays the model load (and, for a production model, the torch import, ~8-10 s). `make up` starts it with
``python -m dgb.cli model serve --host 127.0.0.1 --port N``; the container image
(``docker/model-service.Dockerfile``, Cloud Run) runs the same command on ``$PORT``.

The HTTP stack is FastAPI on uvicorn (one process: the model is loaded once per process).

API (JSON):

* ``GET /health`` -> 200 ``{"status": "ok", "model": name, "dim": dim}`` once the model is
  loaded; 503 ``{"status": "loading", ...}`` before (the port is bound first, so a health
  check can tell "starting" from "not running"). No credentials needed: without valid ones the
  answer is only ``{"status": "ok"}`` / ``{"status": "loading"}``.
* ``POST /embed`` ``{"texts": [str, ...], "batch_size"?: int, "encoding"?: "json"|"base64"}``
  -> ``{"model", "dim", "vectors": [[float, ...], ...]}`` (float32 values, rows L2-normalised;
  ``encoding: "base64"`` -> ``vectors_b64`` + ``shape`` instead). Errors are ``{"error": "..."}``:

  - 400: the body is not the JSON above (its type, a field, an unknown field);
  - 413: too large: a body over :attr:`Limits.max_body_bytes` (refused before it is read), more
    than :attr:`Limits.max_texts` texts, a text over :attr:`Limits.max_text_chars` characters or
    more than :attr:`Limits.max_request_chars` in all — the limits that keep one request's memory
    bounded (the bundled model's peak grows ~3.3 kB per character of a text);
  - 408: the body did not arrive within :attr:`Limits.body_timeout` seconds;
  - 503 with ``Retry-After``: the model is loading, :attr:`Limits.max_pending` requests are
    already admitted (excess requests are refused at once, never queued without bound), or the
    request could not be answered within :attr:`Limits.request_timeout` seconds.

Every other path needs credentials (:mod:`dgb.embed.auth`, ``DGB_MODEL_AUTH``): a bearer
token (``token``, the default) or a Google ID token for the service URL (``google_id``, Cloud
Run); without valid ones: 401 ``{"error": "unauthorized"}``, logged (never the credentials).

Encodes run one at a time on one worker thread (the model is CPU-bound and already uses the
configured BLAS threads), off the event loop, so health checks answer during a long encode.
One log line per request. Binding a non-loopback address needs ``allow_remote``
(``--allow-remote``: containers, with authentication on).
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import logging
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from dgb.config.embed import service_limits
from dgb.embed.auth import GOOGLE_ID, AuthConfigError, ServiceAuth
from dgb.embed.contract import TEXT_CAP

log = logging.getLogger("dgb.embed.service")

MAX_TEXTS = 512  # texts per request
MAX_TEXT_CHARS = TEXT_CAP  # characters per text: the text budget every model input obeys
MAX_REQUEST_CHARS = 2_000_000  # characters per request, all texts together (~30 s of encode)
MAX_BATCH_SIZE = 512
MAX_BODY_BYTES = 16 * 1024 * 1024  # 2M characters as JSON \uXXXX escapes fit (6 bytes each)
RETRY_AFTER_S = 2  # what a refused (busy / loading) request is told to wait
OPEN_PATHS = frozenset({"/health"})  # the probes: answered without credentials


@dataclass(frozen=True)
class Limits:
    """What one service process admits. ``max_pending``: embed requests admitted at once (one
    encoding, the others waiting their turn); ``request_timeout``: seconds from admission to
    answer (waiting included) before a 503; ``body_timeout``: seconds to receive a body."""

    max_texts: int = MAX_TEXTS
    max_text_chars: int = MAX_TEXT_CHARS
    max_request_chars: int = MAX_REQUEST_CHARS
    max_body_bytes: int = MAX_BODY_BYTES
    max_pending: int = 16
    request_timeout: float = 120.0
    body_timeout: float = 30.0
    max_connections: int = 128

    @classmethod
    def from_env(cls) -> Limits:
        """``DGB_MODEL_MAX_PENDING`` and ``DGB_MODEL_REQUEST_TIMEOUT`` override the defaults."""
        return cls(**service_limits())


class ServiceConfigError(ValueError):
    """The service was asked to start in a way it refuses (e.g. a public address)."""


class BadRequest(ValueError):
    """A refused request: answered with ``status`` (400 unless said otherwise) and the message;
    ``retry_after`` (seconds) is sent as ``Retry-After`` when set."""

    def __init__(self, message: str, status: int = 400, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


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


def parse_embed_request(body: bytes, limits: Limits = Limits()) -> tuple[list[str], int, str]:
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
    if len(texts) > limits.max_texts:
        raise BadRequest(
            f'"texts" has {len(texts)} items; at most {limits.max_texts} per request', status=413
        )
    total = 0
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise BadRequest(f'"texts"[{i}] is {type(text).__name__}, not a string')
        if len(text) > limits.max_text_chars:
            raise BadRequest(
                f'"texts"[{i}] has {len(text)} characters; at most {limits.max_text_chars}', status=413
            )
        total += len(text)
    if total > limits.max_request_chars:
        raise BadRequest(
            f'"texts" have {total} characters in all; at most {limits.max_request_chars} per request'
            f" (send fewer texts per request)",
            status=413,
        )
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
    """The loaded model (or None while loading), what went wrong loading it, and the one worker
    thread encodes run on (serialised: the model is CPU-bound and multi-threaded itself)."""

    def __init__(self, model_name: str, dim: int | None) -> None:
        self.model_name = model_name
        self.wanted_dim = dim
        self.embedder = None
        self.load_error: str | None = None
        self.encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model-encode")
        self.pending = 0  # embed requests admitted and not answered yet (event-loop thread only)

    def load(self) -> None:
        from dgb.embed.model import load_model

        self.embedder = load_model(self.model_name, self.wanted_dim)

    def health(self, full: bool = True) -> tuple[int, dict[str, Any]]:
        """Status and body of GET /health; ``full=False`` (a caller without credentials): the
        status word alone."""
        if self.embedder is None:
            body = {"status": "loading", "model": self.model_name, "dim": self.wanted_dim}
        else:
            body = {"status": "ok", "model": self.embedder.name, "dim": self.embedder.dim}
        return (503 if self.embedder is None else 200), (body if full else {"status": body["status"]})

    def embed(self, texts: list[str], batch_size: int, encoding: str) -> bytes:
        """The JSON answer to one embed request (runs on the encode thread)."""
        embedder = self.embedder
        vectors = embedder.encode(texts, batch_size=batch_size)
        answer: dict[str, Any] = {"model": embedder.name, "dim": embedder.dim}
        if encoding == "base64":
            matrix = np.ascontiguousarray(vectors, dtype="<f4")
            answer.update(
                vectors_b64=base64.b64encode(matrix.tobytes()).decode("ascii"), shape=list(matrix.shape)
            )
        else:
            answer["vectors"] = vectors.tolist()
        return json.dumps(answer).encode("utf-8")


def _json(status: int, payload: dict[str, Any] | bytes, retry_after: int | None = None):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return Response(body, status_code=status, media_type="application/json", headers=headers)


async def _read_body(request, limits: Limits) -> bytes:
    """The request body, refused (413) past ``max_body_bytes`` — by its Content-Length before
    reading anything, else while it streams in — and (408) when it does not arrive in time."""
    raw = request.headers.get("content-length")
    if raw is not None:
        try:
            length = int(raw)
        except ValueError:
            raise BadRequest("Content-Length is not an integer") from None
        if length < 0 or length > limits.max_body_bytes:
            raise BadRequest(f"body of {length} bytes; at most {limits.max_body_bytes}", status=413)
    chunks: list[bytes] = []
    size = 0

    async def receive() -> None:
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if size > limits.max_body_bytes:
                raise BadRequest(f"body over {limits.max_body_bytes} bytes", status=413)
            chunks.append(chunk)

    try:
        await asyncio.wait_for(receive(), limits.body_timeout)
    except TimeoutError:
        raise BadRequest(f"body not received within {limits.body_timeout:.0f}s", status=408) from None
    return b"".join(chunks)


class _RequireAuth:
    """ASGI middleware: every HTTP request but :data:`OPEN_PATHS` needs acceptable credentials;
    a refused one is answered 401 before its body is read, and logged."""

    def __init__(self, app, auth: ServiceAuth) -> None:
        self.app, self.auth = app, auth

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not self.auth.required or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        reason = await _refusal(self.auth, _authorization(scope))
        if reason is None:
            await self.app(scope, receive, send)
            return
        client = (scope.get("client") or ("-",))[0]
        log.warning("%s %s 401 refused: %s client=%s", scope["method"], scope["path"], reason, client)
        body = b'{"error": "unauthorized"}'
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="dgb-model-service"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


async def _refusal(auth: ServiceAuth, header: str | None) -> str | None:
    """``auth.refusal(header)``; a Google ID token check (which may fetch Google's certificates)
    runs off the event loop."""
    if auth.mode == GOOGLE_ID:
        return await asyncio.to_thread(auth.refusal, header)
    return auth.refusal(header)


def _authorization(scope) -> str | None:
    for name, value in scope.get("headers") or ():
        if name == b"authorization":
            return value.decode("latin-1")
    return None


def make_app(state: ModelState, limits: Limits = Limits(), on_loaded=None, auth: ServiceAuth | None = None):
    """The FastAPI application serving ``state``; its start-up loads the model on a thread
    (``on_loaded(ok)`` is called when that ends), so the port answers 503 "loading" meanwhile.
    ``auth`` (default: none) is the check every request but GET /health passes."""
    auth = auth or ServiceAuth()

    @asynccontextmanager
    async def lifespan(_app):
        def load() -> None:
            t0 = time.perf_counter()
            try:
                state.load()
            except Exception as exc:
                state.load_error = f"{type(exc).__name__}: {exc}"
                log.error("model %s could not be loaded: %s", state.model_name, state.load_error)
            else:
                log.info(
                    "model %s (%d-d) loaded in %.1fs; ready",
                    state.embedder.name,
                    state.embedder.dim,
                    time.perf_counter() - t0,
                )
            if on_loaded is not None:
                on_loaded(state.load_error is None)

        threading.Thread(target=load, name="model-load", daemon=True).start()
        yield
        state.encoder.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(
        title="dgb model service", openapi_url=None, docs_url=None, redoc_url=None, lifespan=lifespan
    )
    app.add_middleware(_RequireAuth, auth=auth)

    def _log(request: Request, status: int, count: int | str, t0: float, level: int = logging.INFO) -> None:
        client = request.client.host if request.client else "-"
        ms = (time.perf_counter() - t0) * 1000
        log.log(
            level,
            "%s %s %d count=%s ms=%.1f client=%s",
            request.method,
            request.url.path,
            status,
            count,
            ms,
            client,
        )

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException):
        status = exc.status_code
        if status == 404:
            message = f"no route {request.method} {request.url.path}; try GET /health or POST /embed"
        elif status == 405:
            message = f"method {request.method} not allowed on {request.url.path}"
        else:
            message = str(exc.detail)
        _log(request, status, "-", time.perf_counter())
        return _json(status, {"error": message})

    @app.get("/health")
    async def health(request: Request):
        t0 = time.perf_counter()
        # without valid credentials: the status word alone (nothing about the model)
        status, body = state.health(full=await _refusal(auth, request.headers.get("authorization")) is None)
        # health polls (every 0.3 s while the stack waits for start-up) go to DEBUG
        _log(request, status, "-", t0, level=logging.DEBUG)
        return _json(status, body, retry_after=RETRY_AFTER_S if status == 503 else None)

    @app.post("/embed")
    async def embed(request: Request):
        t0 = time.perf_counter()
        count: int | str = "-"
        admitted = False
        try:
            if state.pending >= limits.max_pending:
                raise BadRequest(
                    f"busy: {state.pending} requests already admitted (at most {limits.max_pending});"
                    f" retry shortly",
                    status=503,
                    retry_after=RETRY_AFTER_S,
                )
            state.pending += 1
            admitted = True
            texts, batch_size, encoding = parse_embed_request(await _read_body(request, limits), limits)
            count = len(texts)
            if state.embedder is None:
                raise BadRequest("model is loading; retry shortly", status=503, retry_after=RETRY_AFTER_S)
            job = state.encoder.submit(state.embed, texts, batch_size, encoding)
            remaining = limits.request_timeout - (time.perf_counter() - t0)
            try:
                body = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(job)), max(0.0, remaining))
            except TimeoutError:
                job.cancel()  # not started yet (waiting behind others): never run it
                raise BadRequest(
                    f"not answered within {limits.request_timeout:.0f}s (the service is overloaded)",
                    status=503,
                    retry_after=RETRY_AFTER_S,
                ) from None
            response = _json(200, body)
        except BadRequest as exc:
            response = _json(exc.status, {"error": str(exc)}, retry_after=exc.retry_after)
        except ClientDisconnect:  # gone mid-body: nobody to answer
            response = _json(400, {"error": "client disconnected before sending the whole body"})
        except Exception as exc:  # never let one request take the server down
            log.exception("embed failed")
            response = _json(500, {"error": f"embedding failed: {type(exc).__name__}: {exc}"})
        finally:
            if admitted:
                state.pending -= 1
        _log(request, response.status_code, count, t0)
        return response

    return app


def serve(
    host: str,
    port: int,
    model_name: str,
    dim: int | None = None,
    *,
    allow_remote: bool = False,
    limits: Limits | None = None,
    auth: ServiceAuth | None = None,
) -> int:
    """Run the service under uvicorn until SIGTERM/SIGINT; returns an exit code.

    ``auth`` defaults to :meth:`ServiceAuth.from_env` (``DGB_MODEL_AUTH``); a configuration it
    refuses (token mode without a token) is a :class:`ServiceConfigError`, before binding.
    The port is bound first (health answers 503 "loading"), then the model is loaded once.
    A model that cannot be loaded ends the process with exit code 1."""
    if auth is None:
        try:
            auth = ServiceAuth.from_env()
        except (AuthConfigError, ValueError) as exc:
            raise ServiceConfigError(str(exc)) from None
    if not allow_remote and not is_loopback(host):
        raise ServiceConfigError(
            f"refusing to bind {host}: bind a loopback address (127.0.0.1) or pass --allow-remote"
            f" (containers; keep DGB_MODEL_AUTH on there)"
        )
    import uvicorn

    if not logging.getLogger().handlers:
        # ours at INFO; libraries (torch, transformers, uvicorn) only from WARNING up
        logging.basicConfig(
            level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    log.setLevel(logging.INFO)
    limits = limits or Limits.from_env()
    state = ModelState(model_name, dim)
    server: uvicorn.Server | None = None

    def on_loaded(ok: bool) -> None:
        if not ok and server is not None:
            server.should_exit = True

    config = uvicorn.Config(
        make_app(state, limits, on_loaded, auth),
        host=host,
        port=port,
        log_config=None,  # our logging: one line per request (below), uvicorn's own at WARNING
        access_log=False,
        lifespan="on",
        limit_concurrency=limits.max_connections,  # connections + tasks beyond: uvicorn answers 503
        backlog=64,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=5,
        h11_max_incomplete_event_size=64 * 1024,  # request line + headers
        server_header=False,
    )
    server = uvicorn.Server(config)
    log.info("listening on http://%s:%d (auth: %s); loading model %s", host, port, auth.mode, model_name)
    try:
        server.run()
    except SystemExit as exc:  # uvicorn exits 1 when it cannot bind
        if exc.code not in (None, 0):
            raise OSError(f"uvicorn could not start (exit code {exc.code}); see the log above") from None
    if state.load_error is not None:
        return 1
    log.info("stopped")
    return 0
