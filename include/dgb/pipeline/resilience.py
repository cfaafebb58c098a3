"""Outages are not poison: the one transient-or-permanent decision for stage failures, and the
circuit breaker per dependency.

**The decision** (:func:`classify`), looked up along the exception's ``__cause__`` /
``__context__`` chain, first match wins:

* **transient** (the article is fine, a dependency is not): the work stays pending, is retried
  later and is NEVER dead-lettered, however long the outage and whatever the Airflow try:
  unreachable / refused / reset connections, timeouts, HTTP 408/425/429 and 5xx, throttling, from
  the model service (``ModelServiceError`` "unavailable" / "did not answer" / a 5xx or 429),
  Bedrock (throttling, 5xx, connection errors, and the *fatal* account errors such as
  AccessDenied: those concern every call, not one article), Typesense (``IndexUnavailable``,
  503, timeouts, HTTP status 0, 5xx) and PostgreSQL (``OperationalError``: connection lost,
  admin shutdown, ...). Python's ``ConnectionError`` / ``TimeoutError`` too. A PostgreSQL
  *conflict* (a deadlock, a serialization failure or a lock wait past its ``lock_timeout``, reason
  :data:`CONFLICT`) is transient too,
  but it says nothing about the database's health: it never counts against a breaker.
* **permanent** (this article cannot go through as it is): a 4xx answer about the request
  (validation, malformed, unprocessable), PostgreSQL data errors (``DataError``,
  ``IntegrityError``: e.g. a NUL byte), and a classifier's non-retryable failure. A stage that
  returns a per-article :class:`~dgb.pipeline.stage.Failure` says it itself (``retryable``).
* **unknown**: anything else (``ValueError``, ``KeyError``, a parser error, a bug). The stage run
  bisects the chunk; an unknown error counts as permanent only when it is *isolated*: other
  articles of the same chunk went through (so the dependency works and this article is the
  problem), the article is already held in the stage (it failed permanently before), or it
  failed :data:`UNKNOWN_LIMIT` times in a row with the very same error. An unknown error that
  hits every article of a chunk is treated as transient: a systemic fault (an outage in an
  unexpected shape, a bug) is never the articles' fault.

**The breaker** (:class:`Breakers`): one per dependency (``model_service``, ``bedrock``,
``typesense``, ``postgresql``), stored in ``stage_breakers`` so every stage run and Airflow try
shares it. Closed: calls go through; after ``DGB_BREAKER_THRESHOLD`` (default 3) consecutive
transient failures it opens for ``DGB_BREAKER_COOLDOWN_S`` (default 30 s, doubling on each
re-opening up to ``DGB_BREAKER_MAX_COOLDOWN_S``, default 60 s): stage runs do not call the
dependency and leave the work pending (deferred). When the cool-down has passed it is half-open:
one probe (a chunk of one article) either closes it (a success) or re-opens it. The cap is a
minute because a probe costs one article's call, Bedrock's quotas are counted per minute (so a
throttling episode cannot end sooner than a window), and every minute the breaker stays open
after the dependency is back is a minute of delay for the whole backlog: with a 300 s cap, a
5-minute outage kept enrichment waiting up to 4 more minutes after Bedrock answered again.
Dependencies with a health check (the model service, Typesense) probe as soon as it answers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dgb.config import pipeline as config
from dgb.db import transaction

TRANSIENT, PERMANENT, UNKNOWN = "transient", "permanent", "unknown"
CONFLICT = "postgresql_conflict"  # deadlock / serialization failure / lock timeout: retry, the db is fine
CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"

MODEL_SERVICE, BEDROCK, TYPESENSE, POSTGRESQL = "model_service", "bedrock", "typesense", "postgresql"

# an unknown (unclassified) error on the same article this many times in a row is permanent
UNKNOWN_LIMIT = 5

_HTTP_STATUS = re.compile(r"\bHTTP (\d{3})\b")
_TRANSIENT_STATUS = frozenset({408, 425, 429})


@dataclass(frozen=True)
class Verdict:
    """What a failure means: ``kind`` (transient, permanent, unknown), the ``dependency`` it
    concerns (None when unknown), a short ``reason`` code and the ``detail`` text."""

    kind: str
    dependency: str | None
    reason: str
    detail: str


def _status_kind(status: int) -> str:
    if status >= 500 or status in _TRANSIENT_STATUS or status == 0:
        return TRANSIENT
    return PERMANENT if 400 <= status < 500 else UNKNOWN


def _one(exc: BaseException) -> Verdict | None:
    """The verdict for this exception alone, or None when it says nothing (look at its cause)."""
    detail = f"{type(exc).__name__}: {exc}"[:2000]
    name = type(exc).__name__
    module = type(exc).__module__ or ""

    if name == "IndexUnavailable" and module.startswith("dgb.search"):
        return Verdict(TRANSIENT, TYPESENSE, "typesense_unavailable", detail)
    if name == "ModelServiceUnavailable" and module.startswith("dgb.embed"):
        return Verdict(TRANSIENT, MODEL_SERVICE, "model_service_unavailable", detail)  # by its type
    if name == "ModelServiceError" and module.startswith("dgb.embed"):
        text = str(exc)
        if "unavailable" in text or "did not answer" in text:
            return Verdict(TRANSIENT, MODEL_SERVICE, "model_service_unavailable", detail)
        m = _HTTP_STATUS.search(text)
        if m and m.group(1) in ("401", "403"):
            # the service refuses our credentials (dgb.embed.auth): every call, never one article
            return Verdict(TRANSIENT, MODEL_SERVICE, "model_service_refused", detail)
        if m:
            kind = _status_kind(int(m.group(1)))
            return Verdict(kind, MODEL_SERVICE, f"model_service_http_{m.group(1)}", detail)
        return None  # a malformed answer: look at the cause, else unknown
    if name == "BedrockError" and module.startswith("dgb.enrich"):
        # account / model-access errors: they concern every call, never one article
        return Verdict(TRANSIENT, BEDROCK, "bedrock_refused", detail)
    if module.startswith("typesense"):
        if name in ("ServiceUnavailable", "Timeout", "HTTPStatus0Error", "ServerError"):
            return Verdict(TRANSIENT, TYPESENSE, "typesense_unavailable", detail)
        if name in ("RequestMalformed", "ObjectUnprocessable", "InvalidParameter"):
            return Verdict(PERMANENT, TYPESENSE, "typesense_rejected", detail)
        status = getattr(exc, "status_code", None)
        if isinstance(status, int):
            return Verdict(_status_kind(status), TYPESENSE, f"typesense_http_{status}", detail)
        return None
    if module.startswith("botocore"):
        if name == "ClientError":
            err = getattr(exc, "response", {}) or {}
            code = str(err.get("Error", {}).get("Code", ""))
            status = int(err.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
            if "Throttl" in code or "Unavailable" in code or "Timeout" in code or "NotReady" in code:
                return Verdict(TRANSIENT, BEDROCK, "bedrock_throttled", detail)
            if status:
                return Verdict(_status_kind(status), BEDROCK, f"bedrock_http_{status}", detail)
            return Verdict(PERMANENT, BEDROCK, "bedrock_rejected", detail)
        if "Timeout" in name or "Connection" in name or "Endpoint" in name:
            return Verdict(TRANSIENT, BEDROCK, "bedrock_unavailable", detail)
        return None
    if module.startswith("psycopg"):
        import psycopg

        if isinstance(
            exc,
            (
                psycopg.errors.DeadlockDetected,
                psycopg.errors.SerializationFailure,
                psycopg.errors.LockNotAvailable,  # a lock_timeout ran out: another writer held on
            ),
        ):
            return Verdict(TRANSIENT, POSTGRESQL, CONFLICT, detail)
        if isinstance(exc, psycopg.OperationalError):
            return Verdict(TRANSIENT, POSTGRESQL, "postgresql_unavailable", detail)
        if isinstance(exc, (psycopg.DataError, psycopg.IntegrityError)):
            return Verdict(PERMANENT, POSTGRESQL, "bad_data", detail)
        return None
    if module.startswith(("httpx", "httpcore", "requests", "urllib3")):
        if (
            "Timeout" in name
            or "Connect" in name
            or "Protocol" in name
            or name
            in (
                "ReadError",
                "WriteError",
                "RemoteDisconnected",
                "NetworkError",
            )
        ):
            return Verdict(TRANSIENT, None, "unavailable", detail)
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if isinstance(status, int):
            return Verdict(_status_kind(status), None, f"http_{status}", detail)
        return None
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return Verdict(TRANSIENT, None, "unavailable", detail)
    return None


def classify(exc: BaseException, default_dependency: str | None = None) -> Verdict:
    """Transient, permanent or unknown (see the module doc); ``default_dependency`` names the
    dependency when the error itself does not (the stage's main one)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        verdict = _one(cur)
        if verdict is not None:
            if verdict.dependency is None:
                verdict = Verdict(verdict.kind, default_dependency, verdict.reason, verdict.detail)
            if cur is not exc:  # keep the outer message, it says where
                verdict = Verdict(
                    verdict.kind, verdict.dependency, verdict.reason, f"{type(exc).__name__}: {exc}"[:2000]
                )
            return verdict
        cur = cur.__cause__ or cur.__context__
    return Verdict(UNKNOWN, default_dependency, "error", f"{type(exc).__name__}: {exc}"[:2000])


# ----------------------------------------------------------------------------- breaker


@dataclass
class BreakerState:
    name: str
    failures: int = 0
    opens: int = 0
    open_until: datetime | None = None
    last_error: str | None = None


class Breakers:
    """The circuit breakers of ``names`` in ``stage_breakers`` (see the module doc). Each change
    is committed at once, in its own short transaction (never inside a chunk's transaction)."""

    def __init__(
        self,
        conn,
        names,
        *,
        threshold: int | None = None,
        cooldown_s: float | None = None,
        max_cooldown_s: float | None = None,
    ):
        self.conn = conn
        self.names = tuple(dict.fromkeys(n for n in names if n))
        self.threshold = threshold if threshold is not None else config.breaker_threshold()
        self.cooldown_s = cooldown_s if cooldown_s is not None else config.breaker_cooldown_s()
        self.max_cooldown_s = (
            max_cooldown_s if max_cooldown_s is not None else config.breaker_max_cooldown_s()
        )
        self.states: dict[str, BreakerState] = {n: BreakerState(n) for n in self.names}
        self.load()

    def cooldown(self, opens: int) -> float:
        """Seconds the ``opens``-th opening of a breaker lasts (doubling, up to the maximum)."""
        return min(self.max_cooldown_s, self.cooldown_s * (2 ** min(max(opens - 1, 0), 10)))

    def load(self) -> None:
        if not self.names:
            return
        with transaction(self.conn) as cur:
            cur.execute(
                "SELECT name, failures, opens, open_until, last_error FROM stage_breakers"
                " WHERE name = ANY(%s)",
                (list(self.names),),
            )
            for name, failures, opens, open_until, last_error in cur.fetchall():
                self.states[name] = BreakerState(name, failures, opens, open_until, last_error)

    def state(self, name: str, now: datetime | None = None) -> str:
        s = self.states.get(name)
        if s is None or s.failures < self.threshold:
            return CLOSED
        now = now or datetime.now(UTC)
        if s.open_until is not None and now < s.open_until:
            return OPEN
        return HALF_OPEN

    def overall(self) -> str:
        """The most restrictive state of all this stage's breakers."""
        states = [self.state(n) for n in self.names]
        if OPEN in states:
            return OPEN
        return HALF_OPEN if HALF_OPEN in states else CLOSED

    def open_names(self) -> list[str]:
        return [n for n in self.names if self.state(n) == OPEN]

    def failure(self, name: str | None, error: str, count: int = 1) -> str:
        """Count ``count`` transient failures of ``name`` (e.g. every article of a chunk that
        failed as a whole); returns its state afterwards."""
        if not name:
            return CLOSED
        s = self.states.setdefault(name, BreakerState(name))
        failures = s.failures + max(1, count)
        opens, open_until = s.opens, s.open_until
        if failures >= self.threshold:
            opens = s.opens + 1
            open_until = datetime.now(UTC) + timedelta(seconds=self.cooldown(opens))
        with transaction(self.conn) as cur:
            cur.execute(
                "INSERT INTO stage_breakers (name, failures, opens, open_until, last_error)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET failures = EXCLUDED.failures,"
                " opens = EXCLUDED.opens, open_until = EXCLUDED.open_until, last_error = EXCLUDED.last_error,"
                " updated_at = now()",
                (name, failures, opens, open_until, error[:2000]),
            )
        self.states[name] = BreakerState(name, failures, opens, open_until, error[:2000])
        return self.state(name)

    def success(self, names=None) -> None:
        """A call went through: close the breakers of ``names`` (default: all of this stage's)."""
        for name in names if names is not None else self.names:
            s = self.states.get(name)
            if s is None or (s.failures == 0 and s.opens == 0 and s.open_until is None):
                continue
            with transaction(self.conn) as cur:
                cur.execute(
                    "UPDATE stage_breakers SET failures = 0, opens = 0, open_until = NULL, updated_at = now()"
                    " WHERE name = %s",
                    (name,),
                )
            self.states[name] = BreakerState(name)


def breaker_rows(conn) -> list[dict]:
    """Every breaker that is not closed, for ``dgb status``: name, state, failures, open_until,
    last_error."""
    threshold = config.breaker_threshold()
    with conn.cursor() as cur:
        cur.execute(
            "SELECT name, failures, open_until, last_error, open_until > now() FROM stage_breakers"
            " WHERE failures > 0 ORDER BY name"
        )
        rows = cur.fetchall()
    out = []
    for name, failures, open_until, last_error, still_open in rows:
        state = CLOSED if failures < threshold else (OPEN if still_open else HALF_OPEN)
        out.append(
            {
                "name": name,
                "state": state,
                "failures": failures,
                "open_until": open_until.isoformat() if open_until else None,
                "last_error": (last_error or "")[:300],
            }
        )
    return out
