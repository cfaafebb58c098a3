"""Who may call the model service, and how a caller proves it (``DGB_MODEL_AUTH``).

Three modes, the same setting on both sides (:func:`dgb.config.embed.model_auth`):

* ``token`` (default, everywhere but Cloud Run): ``Authorization: Bearer <token>``. The service
  compares the token with ``DGB_MODEL_TOKEN`` in constant time (:func:`hmac.compare_digest`);
  Airflow sends its ``dgb_model_service`` connection's password. `make up` generates the token
  into ``.state/secrets.env`` and gives it to the service, the CLI and the connection. The service
  refuses to start in this mode without a token.
* ``google_id`` (Cloud Run): a Google-signed ID token whose audience is the service's URL
  (``DGB_MODEL_AUDIENCE``), checked with google-auth against Google's public certificates
  (fetched once an hour, or injected: :class:`GoogleIdVerifier`), optionally only from the
  e-mails in ``DGB_MODEL_INVOKERS``. Cloud Run's IAM (``--no-allow-unauthenticated``,
  ``roles/run.invoker``) checks the same token before the request reaches the container; this is
  the second check (on Cloud Run, a token whose signature the front end replaced with
  :data:`SIGNATURE_REMOVED` is checked without it: audience, lifetime, issuer, invokers).
  Callers fetch the token with their Google credentials (:class:`GoogleIdToken`: cached,
  refreshed five minutes before it expires).
* ``none``: no check (binding a non-loopback address still needs ``--allow-remote``).

A refused request is answered ``401 {"error": "unauthorized"}`` with ``WWW-Authenticate:
Bearer`` and logged (method, path, reason, client; never the credentials). ``GET /health`` needs
no credentials, and without them answers only ``{"status": "ok"}`` (or ``"loading"``); with
valid ones it also names the model and its dimension (what the client reads).
"""

from __future__ import annotations

import hmac
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from dgb.config import embed as embed_config

TOKEN, GOOGLE_ID, NONE = "token", "google_id", "none"
GOOGLE_CERTS_URL = "https://www.googleapis.com/oauth2/v1/certs"
GOOGLE_ISSUERS = ("accounts.google.com", "https://accounts.google.com")
# What Cloud Run's front end leaves of the signature of an ID token it has verified (IAM) before it
# forwards the request to the container
SIGNATURE_REMOVED = "SIGNATURE_REMOVED_BY_GOOGLE"
CERTS_TTL_S = 3600.0
REFRESH_MARGIN_S = 300.0  # a cached ID token is replaced this long before it expires


class AuthConfigError(ValueError):
    """The service cannot check credentials as configured (no token, no audience...)."""


def bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    scheme, _, value = (authorization or "").strip().partition(" ")
    value = value.strip()
    return value if scheme.lower() == "bearer" and value else None


def _scrub(message: str, token: str) -> str:
    """``message`` without any piece of ``token`` (an error may quote what it could not parse)."""
    for piece in {token, *token.split(".")}:
        if len(piece) >= 4:
            message = message.replace(piece, "<redacted>")
    return message[:200]


class GoogleIdVerifier:
    """Checks a Google ID token: signature (Google's certificates), expiry, issuer, audience and,
    when given, the caller's e-mail. ``certs`` returns ``{key id: PEM certificate}`` (default:
    fetched from Google, cached :data:`CERTS_TTL_S`); tests inject their own key.

    ``behind_cloud_run``: the service runs on Cloud Run with IAM on (``K_SERVICE`` set), whose
    front end verifies the token's signature, replaces it with :data:`SIGNATURE_REMOVED` and only
    then forwards the request (nothing else reaches the container); such a token's claims are
    checked as above, without the signature it no longer has. Elsewhere a token without a valid
    signature is refused."""

    def __init__(
        self,
        audience: str,  # the service URL; several, comma-separated (all the service's URLs)
        *,
        invokers: frozenset[str] = frozenset(),
        certs: Callable[[], Mapping[str, str]] | None = None,
        clock_skew_s: int = 10,
        behind_cloud_run: bool = False,
    ) -> None:
        urls = [a.strip().rstrip("/") for a in audience.split(",") if a.strip()]
        if not urls:
            raise AuthConfigError("google_id needs the service URL as the audience (DGB_MODEL_AUDIENCE)")
        self.audiences = urls + [u + "/" for u in urls]  # as a caller may have written it
        self.invokers = invokers
        self._certs = certs or self._google_certs
        self._cache: tuple[float, Mapping[str, str]] | None = None
        self._lock = threading.Lock()
        self.clock_skew_s = clock_skew_s
        self.behind_cloud_run = behind_cloud_run

    def _google_certs(self) -> Mapping[str, str]:
        with self._lock:
            if self._cache is None or time.monotonic() - self._cache[0] > CERTS_TTL_S:
                resp = httpx.get(GOOGLE_CERTS_URL, timeout=10.0)
                resp.raise_for_status()
                self._cache = (time.monotonic(), resp.json())
            return self._cache[1]

    def __call__(self, token: str) -> dict[str, Any]:
        """The token's claims; ValueError (scrubbed of the token) when it is not acceptable."""
        from google.auth import jwt

        parts = token.split(".")
        if self.behind_cloud_run and len(parts) == 3 and parts[2] == SIGNATURE_REMOVED:
            return self._checked(self._claims_verified_by_cloud_run(parts[1], token))
        try:
            claims = jwt.decode(
                token,
                certs=dict(self._certs()),
                audience=self.audiences,
                clock_skew_in_seconds=self.clock_skew_s,
            )
        except Exception as exc:  # google-auth raises ValueError and its own exceptions
            raise ValueError(f"{type(exc).__name__}: {_scrub(str(exc), token)}") from None
        return self._checked(claims)

    def _claims_verified_by_cloud_run(self, payload: str, token: str) -> dict[str, Any]:
        """The claims of a token Cloud Run's front end verified: audience and times checked here."""
        try:
            claims = json.loads(_b64decode(payload))
        except ValueError as exc:
            raise ValueError(f"unreadable claims: {_scrub(str(exc), token)}") from None
        if not isinstance(claims, dict):
            raise ValueError("unreadable claims")
        audiences = claims.get("aud") if isinstance(claims.get("aud"), list) else [claims.get("aud")]
        if not any(a in self.audiences for a in audiences):
            raise ValueError(f"audience {claims.get('aud')!r} is not this service")
        now = time.time()
        try:
            issued, expires = float(claims["iat"]), float(claims["exp"])
        except (KeyError, TypeError, ValueError):
            raise ValueError("no iat/exp claims") from None
        if now < issued - self.clock_skew_s or now > expires + self.clock_skew_s:
            raise ValueError("token used outside its lifetime")
        return claims

    def _checked(self, claims: dict[str, Any]) -> dict[str, Any]:
        if claims.get("iss") not in GOOGLE_ISSUERS:
            raise ValueError(f"issuer {claims.get('iss')!r} is not Google")
        if self.invokers and str(claims.get("email", "")).lower() not in self.invokers:
            raise ValueError(f"caller {claims.get('email')!r} is not in DGB_MODEL_INVOKERS")
        return claims


@dataclass(frozen=True)
class ServiceAuth:
    """The service's check. ``mode``: token, google_id or none; ``token`` (token mode);
    ``verifier`` (google_id: a token -> its claims, ValueError when refused)."""

    mode: str = NONE
    token: str = field(default="", repr=False)
    verifier: Callable[[str], Any] | None = None

    def __post_init__(self) -> None:
        if self.mode == TOKEN and not self.token:
            raise AuthConfigError(
                "DGB_MODEL_AUTH=token but no token: set DGB_MODEL_TOKEN (`make up` generates one into"
                " .state/secrets.env), or DGB_MODEL_AUTH=none to run without authentication"
            )
        if self.mode == GOOGLE_ID and self.verifier is None:
            raise AuthConfigError("DGB_MODEL_AUTH=google_id needs a verifier")
        if self.mode not in (TOKEN, GOOGLE_ID, NONE):
            raise AuthConfigError(f"unknown auth mode {self.mode!r}")

    @property
    def required(self) -> bool:
        return self.mode != NONE

    def refusal(self, authorization: str | None) -> str | None:
        """None when ``authorization`` (the header's value) is acceptable, else why not."""
        if self.mode == NONE:
            return None
        presented = bearer(authorization)
        if presented is None:
            return "no bearer credentials"
        if self.mode == TOKEN:
            ok = hmac.compare_digest(presented.encode("utf-8"), self.token.encode("utf-8"))
            return None if ok else "wrong token"
        try:
            self.verifier(presented)
        except ValueError as exc:
            return f"invalid ID token ({exc})"
        return None

    @classmethod
    def from_env(cls) -> ServiceAuth:
        """The check ``dgb model serve`` applies, from ``DGB_MODEL_AUTH`` and its settings."""
        mode = embed_config.model_auth()
        if mode == TOKEN:
            return cls(TOKEN, token=embed_config.model_token())
        if mode == GOOGLE_ID:
            verifier = GoogleIdVerifier(
                embed_config.model_audience(),
                invokers=embed_config.model_invokers(),
                behind_cloud_run=embed_config.on_cloud_run(),
            )
            return cls(GOOGLE_ID, verifier=verifier)
        return cls(NONE)


# -- the caller's side ----------------------------------------------------------------------------


class BearerToken:
    """Sends a fixed bearer token (the connection's password, or ``DGB_MODEL_TOKEN``)."""

    def __init__(self, token: str) -> None:
        self._token = token

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}"}

    def __repr__(self) -> str:
        return "BearerToken(<redacted>)"


def _expiry(token: str) -> float:
    """The ``exp`` claim of a JWT (read, not verified: it is our own token), else now."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(_b64decode(payload))
        return float(claims["exp"])
    except (IndexError, KeyError, TypeError, ValueError):
        return time.time()


def _b64decode(text: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class GoogleIdToken:
    """Sends a Google ID token for ``audience`` (the service URL): ``fetch(audience)`` returns a
    fresh one (default: :func:`google.oauth2.id_token.fetch_id_token` with the process's Google
    credentials); it is cached and fetched again :data:`REFRESH_MARGIN_S` before it expires."""

    def __init__(
        self,
        audience: str,
        fetch: Callable[[str], str] | None = None,
        *,
        refresh_margin: float = REFRESH_MARGIN_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.audience = audience.rstrip("/")
        self._fetch = fetch or _google_fetch
        self.refresh_margin = refresh_margin
        self._clock = clock
        self._token: str | None = None
        self._expires = 0.0
        self._lock = threading.Lock()
        self.fetches = 0

    def token(self) -> str:
        with self._lock:
            if self._token is None or self._clock() >= self._expires - self.refresh_margin:
                self._token = self._fetch(self.audience)
                self._expires = _expiry(self._token)
                self.fetches += 1
            return self._token

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token()}"}

    def __repr__(self) -> str:
        return f"GoogleIdToken(audience={self.audience!r})"


def _google_fetch(audience: str) -> str:
    import google.auth.transport.requests
    import google.oauth2.id_token

    return google.oauth2.id_token.fetch_id_token(google.auth.transport.requests.Request(), audience)


def client_credentials(base_url: str) -> BearerToken | GoogleIdToken | None:
    """What ``dgb`` (CLI, stack processes, scripts) sends to the service at ``base_url``, from
    ``DGB_MODEL_AUTH``: the bearer token, a Google ID token for ``DGB_MODEL_AUDIENCE`` (its first URL;
    default ``base_url``), or nothing (``none``, or ``token`` with no token known)."""
    mode = embed_config.model_auth()
    if mode == GOOGLE_ID:
        return GoogleIdToken(embed_config.model_audience().split(",")[0].strip() or base_url)
    if mode == TOKEN and (token := embed_config.model_token()):
        return BearerToken(token)
    return None
