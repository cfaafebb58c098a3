"""Polite HTTP fetching, shared by the scraper and the integrity checks.

One :class:`Fetcher` per task: httpx with connect/read timeouts, a response size cap, a
redirect cap (redirects followed by hand, so every hop passes the URL guard), retries with
exponential backoff and jitter on network errors and 5xx/408/429 (Retry-After honoured,
capped), one request at a time per host with a minimum interval between requests to the
same host, robots.txt (RFC 9309 through Protego: longest match wins, ``*``/``$`` wildcards;
cached, 4xx = allow all, 5xx = disallow all), an honest User-Agent, and anti-bot pages turned
into errors instead of "no news".

Every request (pages, API calls, images, robots.txt, each redirect hop) passes ONE URL guard:
by default :meth:`dgb.urlpolicy.UrlPolicy.for_settings` (http(s) only, no credentials, the
gov.br/EBC allowlist, no private/loopback/link-local/metadata address after resolution, the
local mirror allowed in mirror mode), with connections pinned to the vetted address. A caller
may pass its own ``url_guard`` (and transport), never none.

With a ``budget`` (:class:`dgb.hostbudget.HostBudget`, what the DAG tasks use) every request,
retry and redirect hop also takes a token and an in-flight slot of the host's budget shared by
every worker, at the fetcher's ``priority`` (``scrape`` before ``integrity``), and reports its
answer so a 429/503 Retry-After or a streak of 5xx slows the host for every task.

It also accounts for time: ``stats.polite_wait_s`` (sleeping for politeness or backoff) vs
``stats.request_s`` (waiting on the network), used by the scrape benchmark.
"""

from __future__ import annotations

import email.utils
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

import httpx
from protego import Protego

from dgb.config import http as config_http
from dgb.scrape_errors import (
    AntiBotError,
    NetworkError,
    ScrapeError,
    TooLargeError,
    UrlBrokenError,
    detect_anti_bot,
    error_for_status,
)
from dgb.urlpolicy import UrlPolicy, guarded_transport

USER_AGENT = "dgb-pipeline/0.1 (news indexing for a public search portal; polite crawler; honours robots.txt)"
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 522, 524})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True)
class FetchPolicy:
    connect_timeout: float = 10.0
    read_timeout: float = 30.0  # between two bytes
    total_timeout: float = 60.0  # whole response, so a slow trickle cannot hold a task
    max_bytes: int = 5 * 1024 * 1024
    max_redirects: int = 5
    retries: int = 3  # extra attempts after the first
    backoff_base: float = 1.0  # 1, 2, 4 ... seconds, times a jitter in [0.5, 1]
    backoff_max: float = 30.0
    retry_after_cap: float = 60.0
    min_interval: float = 1.0  # seconds between two requests to one host
    respect_robots: bool = True
    robots_ttl: float = 24 * 3600
    user_agent: str = USER_AGENT

    @classmethod
    def from_env(cls) -> FetchPolicy:
        """The policy with the ``DGB_FETCH_*`` settings (:func:`dgb.config.http.fetch_policy`)."""
        return cls(**config_http.fetch_policy())


@dataclass
class Response:
    url: str  # final URL after redirects
    status: int
    headers: httpx.Headers
    content: bytes
    elapsed: float
    redirects: list[str] = field(default_factory=list)

    @property
    def charset(self) -> str | None:
        ctype = self.headers.get("content-type", "")
        for part in ctype.split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset":
                return value.strip("\"' ") or None
        return None


def wire_bytes(resp: Response | None) -> int:
    """Approximate bytes on the wire of one response: status line, headers and body."""
    if resp is None:
        return 0
    head = 17 + sum(len(k) + len(v) + 4 for k, v in resp.headers.raw) + 2
    return head + len(resp.content)


@dataclass
class FetchStats:
    requests: int = 0
    retries: int = 0
    bytes: int = 0
    polite_wait_s: float = 0.0
    request_s: float = 0.0


class Fetcher:
    """Not thread-safe across hosts by design: one fetcher per task, one request at a time per host."""

    def __init__(
        self,
        policy: FetchPolicy | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        url_guard: Callable[[str], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        budget=None,
        priority: str = "scrape",
    ):
        self.policy = policy or FetchPolicy()
        self.budget, self.priority = budget, priority  # dgb.hostbudget.HostBudget (owned: closed with us)
        if url_guard is None:  # never unguarded: the configured policy, connections pinned to it
            url_policy = UrlPolicy.for_settings()
            url_guard = url_policy.guard
            transport = transport or guarded_transport(url_policy)
        self.url_guard = url_guard
        self.stats = FetchStats()
        self._sleep, self._clock = sleep, clock
        self._rng = rng or random.Random()
        self._host_locks: dict[str, threading.Lock] = {}
        self._host_next: dict[str, float] = {}
        self._robots: dict[str, tuple[float, Protego | None, bool]] = {}
        self._client = httpx.Client(
            timeout=httpx.Timeout(self.policy.read_timeout, connect=self.policy.connect_timeout),
            follow_redirects=False,
            headers={"User-Agent": self.policy.user_agent, "Accept-Language": "pt-BR,pt;q=0.9"},
            transport=transport,
        )

    def close(self) -> None:
        self._client.close()
        if self.budget is not None:
            self.budget.close()

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- public ------------------------------------------------------------------------

    def get(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        method: str = "GET",
        check_robots: bool = True,
        raise_for_status: bool = True,
    ) -> Response:
        """Fetch ``url`` politely. Raises :class:`ScrapeError` with a category on failure.

        With ``raise_for_status=False`` 4xx/5xx responses (after retries) are returned as they
        are (the integrity checks read 304/404/410 themselves).
        """
        redirects: list[str] = []
        current = url
        for _ in range(self.policy.max_redirects + 1):
            self._guard(current)
            if check_robots and self.policy.respect_robots and not self.allowed_by_robots(current):
                raise UrlBrokenError(f"disallowed by robots.txt: {current}")
            resp = self._request_with_retries(method, current, headers or {})
            if resp.status in REDIRECT_STATUSES and "location" in resp.headers:
                redirects.append(current)
                current = urljoin(current, resp.headers["location"])
                if resp.status == 303:
                    method = "GET"
                continue
            resp.redirects = redirects
            if detect_anti_bot(resp.content[:200_000]):
                raise AntiBotError(f"anti-bot challenge served for {current} (HTTP {resp.status})")
            if raise_for_status and resp.status >= 400:
                raise error_for_status(resp.status, current)
            return resp
        raise UrlBrokenError(f"more than {self.policy.max_redirects} redirects starting at {url}")

    def allowed_by_robots(self, url: str) -> bool:
        robots_url = self.robots_url(url)
        cached = self._robots.get(robots_url)
        now = self._clock()
        if cached is None or now - cached[0] > self.policy.robots_ttl:
            self._guard(robots_url)  # robots.txt is fetched like any page: through the guard
            # another task's answer first (the shared budget's database): every task is a new
            # process, and one robots.txt per task was a third of a scrape cycle's requests
            shared = self.budget.robots_get(robots_url, self.policy.robots_ttl) if self.budget else None
            if shared is not None:
                status, body = shared
            else:
                try:
                    resp = self._request_with_retries("GET", robots_url, {})
                    status, body = resp.status, resp.content.decode("utf-8", errors="replace")
                except NetworkError:
                    status, body = None, ""
                if self.budget is not None and status is not None:
                    self.budget.robots_put(robots_url, status, body)
            if status is None or status >= 500:
                parser, allow_all = None, False  # unreachable or server error: disallow all (RFC 9309)
            elif status >= 400:
                parser, allow_all = None, True  # no robots.txt: allow all
            else:
                parser, allow_all = Protego.parse(body), False
            cached = (now, parser, allow_all)
            self._robots[robots_url] = cached
        _, parser, allow_all = cached
        if parser is None:
            return allow_all
        return parser.can_fetch(url, self.policy.user_agent)

    @staticmethod
    def robots_url(url: str) -> str:
        """robots.txt of the URL's site. Under the local mirror (``http://127.0.0.1:P/<host>/...``)
        each mirrored host has its own robots.txt at ``/<host>/robots.txt``."""
        parts = urlsplit(url)
        mirrored = _mirrored_host(parts)
        if mirrored:
            return f"{parts.scheme}://{parts.netloc}/{mirrored}/robots.txt"
        return f"{parts.scheme}://{parts.netloc}/robots.txt"

    # -- internals ---------------------------------------------------------------------

    def _guard(self, url: str) -> None:
        """The one URL guard (scheme, credentials, allowlist, addresses): raises ``url_broken``."""
        self.url_guard(url)

    def _wait_turn(self, host: str) -> threading.Lock:
        lock = self._host_locks.setdefault(host, threading.Lock())
        lock.acquire()
        delay = self._host_next.get(host, 0.0) - self._clock()
        if delay > 0:
            self._sleep(delay)
            self.stats.polite_wait_s += delay
        return lock

    def _budget_slot(self, host: str):
        """Wait for the shared host budget (if any): a granted slot, released after the request."""
        if self.budget is None:
            return None
        slot = self.budget.take(host, self.priority)
        self.stats.polite_wait_s += slot.waited_s
        return slot

    def _request_with_retries(self, method: str, url: str, headers: dict[str, str]) -> Response:
        host = urlsplit(url).netloc
        attempt = 0
        while True:
            lock = self._wait_turn(host)
            slot = None
            try:
                slot = self._budget_slot(host)
                t0 = self._clock()
                try:
                    resp = self._one_request(method, url, headers)
                    error: Exception | None = None
                except ScrapeError:
                    raise
                except httpx.TransportError as exc:
                    resp, error = None, exc
                finally:
                    self.stats.request_s += self._clock() - t0
                    self._host_next[host] = self._clock() + self.policy.min_interval
                if slot is not None:
                    retry_after = None if resp is None else parse_retry_after(resp.headers.get("retry-after"))
                    slot.report(None if resp is None else resp.status, retry_after, error=error is not None)
            finally:
                if slot is not None:
                    self.budget.release(slot)
                lock.release()
            retryable = error is not None or (resp is not None and resp.status in RETRY_STATUSES)
            if not retryable:
                return resp
            if attempt >= self.policy.retries:
                if error is not None:
                    raise NetworkError(f"{type(error).__name__} fetching {url}: {error}") from error
                return resp
            delay = self._backoff(attempt, resp)
            attempt += 1
            self.stats.retries += 1
            # the host's next slot moves out too: a 429/503 slows every request to that host
            self._host_next[host] = max(self._host_next.get(host, 0.0), self._clock() + delay)

    def _backoff(self, attempt: int, resp: Response | None) -> float:
        if resp is not None:
            retry_after = parse_retry_after(resp.headers.get("retry-after"))
            if retry_after is not None:
                return min(retry_after, self.policy.retry_after_cap)
        base = min(self.policy.backoff_max, self.policy.backoff_base * (2**attempt))
        return base * (0.5 + 0.5 * self._rng.random())

    def _one_request(self, method: str, url: str, headers: dict[str, str]) -> Response:
        t0 = self._clock()
        self.stats.requests += 1
        with self._client.stream(method, url, headers=headers) as r:
            declared = r.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > self.policy.max_bytes:
                raise TooLargeError(
                    f"response too large: {declared} bytes > cap {self.policy.max_bytes} for {url}"
                )
            chunks, size = [], 0
            if method != "HEAD":
                for chunk in r.iter_bytes():
                    if self._clock() - t0 > self.policy.total_timeout:
                        raise httpx.ReadTimeout(
                            f"response not complete after {self.policy.total_timeout:.0f}s", request=r.request
                        )
                    size += len(chunk)
                    if size > self.policy.max_bytes:
                        raise TooLargeError(
                            f"response too large: over cap of {self.policy.max_bytes} bytes for {url}"
                        )
                    chunks.append(chunk)
            self.stats.bytes += size
            return Response(
                url=url,
                status=r.status_code,
                headers=r.headers,
                content=b"".join(chunks),
                elapsed=self._clock() - t0,
            )


def _mirrored_host(parts) -> str | None:
    """``www.gov.br`` for a local-mirror URL ``http://127.0.0.1:P/www.gov.br/...``, else None."""
    first = parts.path.lstrip("/").split("/", 1)[0]
    if parts.hostname in ("127.0.0.1", "localhost", "::1") and "." in first:
        return first.lower()
    return None


def site_host(url: str) -> str:
    """The site a URL belongs to, for the scraper's same-site rule: its lower-cased ``host[:port]``,
    or, under the local mirror, ``127.0.0.1:P/<mirrored host>`` (each mirrored host is its own site).
    "" for a URL without a host."""
    try:
        parts = urlsplit(url)
        netloc = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    except ValueError:
        return ""
    if not parts.hostname:
        return ""
    mirrored = _mirrored_host(parts)
    return f"{netloc}/{mirrored}" if mirrored else netloc


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date. None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())
