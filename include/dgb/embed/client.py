"""Reach the resident model service (:mod:`dgb.embed.service`) over HTTP: an Embedder that
costs no model load in the calling process (what Airflow tasks use).

Transient failures (connection refused or reset, connect timeout, any 5xx including 503
"model loading" / "busy") are retried with exponential backoff and jitter (at least the
``Retry-After`` the service sent, up to ``max_backoff``), ``attempts`` times in all; when they
persist, or a read times out, :class:`ModelServiceUnavailable` says the service is down or
overloaded (no input's fault: callers retry the work later). Anything else (a 4xx, a malformed
answer) raises :class:`ModelServiceError` at once with the service's own message.

Credentials (:mod:`dgb.embed.auth`): ``credentials`` (a :class:`~dgb.embed.auth.BearerToken` or
:class:`~dgb.embed.auth.GoogleIdToken`) adds its ``Authorization`` header to every request, the
health check included (so the service names its model). A 401 is a :class:`ModelServiceError`
(the credentials are wrong: retrying does not help), not an outage.

Texts go through the text budget (:func:`dgb.embed.contract.check_texts`: NUL and lone
surrogates removed, each at most ``TEXT_CAP`` characters) and are sent in requests of at most
:data:`MAX_TEXTS_PER_REQUEST` texts and :data:`MAX_CHARS_PER_REQUEST` characters, inside the
service's limits, so no input of ours is ever refused as too large.
"""

from __future__ import annotations

import base64
import random
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from dgb.embed.contract import check_texts

MAX_TEXTS_PER_REQUEST = 256
MAX_CHARS_PER_REQUEST = 1_000_000  # half the service's MAX_REQUEST_CHARS


class ModelServiceError(RuntimeError):
    """The model service could not embed the texts; the message says why and where."""


class ModelServiceUnavailable(ModelServiceError):
    """The model service is unreachable, overloaded or too slow (after the retries): an outage,
    not a problem with the texts sent."""


class _Transient(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ServiceEmbedder:
    """:class:`~dgb.embed.Embedder` over the model service at ``base_url``."""

    def __init__(
        self,
        base_url: str,
        timeout: float = 60.0,
        *,
        attempts: int = 4,
        backoff: float = 0.25,
        max_backoff: float = 4.0,
        credentials: Any = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.credentials = credentials  # .headers() -> {"Authorization": ...}, or None
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._name: str | None = None
        self._dim: int | None = None
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()

    # -- connection ---------------------------------------------------------------------
    @property
    def client(self) -> httpx.Client:
        with self._client_lock:
            if self._client is None:
                # trust_env=False: never route loopback traffic through an HTTP(S)_PROXY
                self._client = httpx.Client(base_url=self.base_url, timeout=self.timeout, trust_env=False)
            return self._client

    def close(self) -> None:
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self) -> ServiceEmbedder:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ServiceEmbedder({self.base_url!r})"

    def _headers(self) -> dict[str, str] | None:
        return self.credentials.headers() if self.credentials is not None else None

    # -- health ----------------------------------------------------------------------------
    def _remember(self, info: dict[str, Any]) -> None:
        name, dim = info.get("model"), info.get("dim")
        if not isinstance(name, str) or not isinstance(dim, int) or dim < 1:
            raise ModelServiceError(f"model service at {self.base_url} sent a malformed answer: {info!r}")
        self._name, self._dim = name, dim

    def probe(self) -> str:
        """One GET /health within 1 s (never raises): ``"ok"``, the service is up and names its
        model to these credentials; ``"refused"``, it is up but answers only the status word
        (what it tells a caller without valid credentials, :mod:`dgb.embed.auth`); ``"loading"``,
        it is up and still loading its model (503 ``{"status": "loading"}``, to any caller);
        ``"down"``, anything else (unreachable, not a model service)."""
        try:
            resp = self.client.get("/health", timeout=1.0, headers=self._headers())
            info = resp.json() if resp.status_code in (200, 503) else None
        except Exception:
            return "down"
        if not isinstance(info, dict):
            return "down"
        if resp.status_code == 503:
            return "loading" if info.get("status") == "loading" else "down"
        if info.get("status") == "ok" and "model" not in info and "dim" not in info:
            return "refused"
        try:
            self._remember(info)
        except ModelServiceError:
            return "down"
        return "ok"

    def available(self) -> bool:
        """Whether the service is up and answers these credentials (:meth:`probe` is ``"ok"``)."""
        return self.probe() == "ok"

    def _info(self) -> None:
        if self._name is None or self._dim is None:
            self._remember(self._call("GET", "/health"))

    @property
    def name(self) -> str:
        self._info()
        assert self._name is not None
        return self._name

    @property
    def dim(self) -> int:
        self._info()
        assert self._dim is not None
        return self._dim

    # -- embedding -------------------------------------------------------------------------
    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = []
        for chunk in _requests(items):
            answer = self._call(
                "POST", "/embed", {"texts": chunk, "batch_size": batch_size, "encoding": "base64"}
            )
            parts.append(self._vectors(answer, len(chunk)))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _vectors(self, answer: dict[str, Any], n: int) -> np.ndarray:
        self._remember(answer)
        try:
            if "vectors_b64" in answer:
                raw = base64.b64decode(answer["vectors_b64"])
                vectors = np.frombuffer(raw, dtype="<f4").reshape(tuple(answer["shape"])).astype(np.float32)
            else:
                vectors = np.asarray(answer["vectors"], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelServiceError(
                f"model service at {self.base_url} sent malformed vectors: {exc}"
            ) from exc
        if vectors.shape != (n, self._dim):
            raise ModelServiceError(
                f"model service at {self.base_url} returned vectors of shape {vectors.shape},"
                f" expected ({n}, {self._dim})"
            )
        return vectors

    def _call(self, method: str, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        last = ""
        retry_after: float | None = None
        for attempt in range(self.attempts):
            if attempt:
                delay = min(self.max_backoff, self.backoff * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5)
                if retry_after:
                    delay = max(delay, min(self.max_backoff, retry_after))
                time.sleep(delay)
            try:
                return self._once(method, path, payload)
            except _Transient as exc:
                last, retry_after = str(exc), exc.retry_after
        raise ModelServiceUnavailable(
            f"model service at {self.base_url} unavailable after {self.attempts} attempts: {last}. "
            f"Is it running? (`make up` starts it; `dgb model serve` runs it by hand)"
        )

    def _once(self, method: str, path: str, payload: dict[str, Any] | None) -> dict[str, Any]:
        try:
            resp = self.client.request(method, path, json=payload, headers=self._headers())
        except (
            httpx.ConnectError,
            httpx.ConnectTimeout,
            httpx.RemoteProtocolError,
            httpx.ReadError,
            httpx.WriteError,
            httpx.PoolTimeout,
        ) as exc:
            raise _Transient(f"{type(exc).__name__}: {exc}") from exc
        except httpx.TimeoutException as exc:
            raise ModelServiceUnavailable(
                f"model service at {self.base_url} did not answer {method} {path} within {self.timeout:.0f}s"
            ) from exc
        except httpx.HTTPError as exc:
            raise ModelServiceError(f"model service at {self.base_url}: {type(exc).__name__}: {exc}") from exc
        if resp.status_code >= 500:
            raise _Transient(f"HTTP {resp.status_code}: {_error_text(resp)}", _retry_after(resp))
        if resp.status_code != 200:
            raise ModelServiceError(
                f"model service at {self.base_url} refused {method} {path}:"
                f" HTTP {resp.status_code}: {_error_text(resp)}"
            )
        try:
            answer = resp.json()
        except ValueError as exc:
            raise ModelServiceError(
                f"model service at {self.base_url} sent non-JSON: {resp.text[:200]!r}"
            ) from exc
        if not isinstance(answer, dict):
            raise ModelServiceError(
                f"model service at {self.base_url} sent {type(answer).__name__}, not an object"
            )
        return answer


def _requests(items: list[str]) -> list[list[str]]:
    """``items`` in request-sized chunks: at most MAX_TEXTS_PER_REQUEST texts and
    MAX_CHARS_PER_REQUEST characters each (a single text is at most TEXT_CAP, far below)."""
    out: list[list[str]] = []
    chunk: list[str] = []
    chars = 0
    for text in items:
        if chunk and (len(chunk) >= MAX_TEXTS_PER_REQUEST or chars + len(text) > MAX_CHARS_PER_REQUEST):
            out.append(chunk)
            chunk, chars = [], 0
        chunk.append(text)
        chars += len(text)
    if chunk:
        out.append(chunk)
    return out


def _retry_after(resp: httpx.Response) -> float | None:
    """The ``Retry-After`` seconds of a response (None when absent or an HTTP date)."""
    try:
        value = float(resp.headers.get("retry-after", ""))
    except ValueError:
        return None
    return value if value >= 0 else None


def _error_text(resp: httpx.Response) -> str:
    try:
        data = resp.json()
        if isinstance(data, dict) and "error" in data:
            return str(data["error"])
    except ValueError:
        pass
    return resp.text[:200]
