"""The URL guard: which URLs this system may fetch. The one home of that decision, used by
every fetch (scraper listings, articles, the Plone 6 API and EBC, robots.txt, the integrity
checks' page GETs and image HEADs): :class:`dgb.fetch.Fetcher` applies it to every request and
every redirect hop, and pins the connection to the address it vetted.

A URL is allowed only when

1. its scheme is ``http`` or ``https`` and it carries no user:password;
2. its host matches the allowlist (default ``gov.br``, ``*.gov.br``, ``ebc.com.br``,
   ``*.ebc.com.br``; ``DGB_INTEGRITY_ALLOWED_HOSTS`` replaces it, comma-separated; the name is
   historical, it applies to every fetch). A pattern is an exact host (``gov.br``), a subdomain
   wildcard (``*.gov.br``: any subdomain, not the apex), optionally with ``:PORT`` (then only
   that port matches);
3. EVERY address the host resolves to (or the literal IP) is globally routable: private
   (10/8, 172.16/12, 192.168/16, fc00::/7), loopback, link-local (169.254/16, fe80::/10, with
   the cloud metadata address 169.254.169.254 named as such), unspecified, multicast, reserved,
   CGNAT 100.64/10, documentation/benchmark ranges and IPv6 forms embedding any of those
   (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible, 6to4, NAT64 ``64:ff9b::/96``) are refused.

Loopback is the one exception a configuration can make, and only narrowly: with
``allow_loopback=True`` a loopback address is accepted for a host that matched an allowlist
pattern which itself names a loopback host (``127.0.0.1:8090``, ``localhost:8090``). That is
how tests and the offline mirror reach the local site; a gov.br name resolving to 127.0.0.1,
another port on 127.0.0.1, or 127.0.0.2 stay refused. In mirror mode (``UrlPolicy.for_settings``)
the mirror's ``host:port`` is the whole allowlist: the offline stack sends nothing past it, not
even a DNS query for a gov.br name.

The guard runs on every redirect hop (``Fetcher(url_guard=policy.guard)``); with
``guarded_transport(policy)`` the connection itself is also pinned to a vetted address, so a
DNS answer that changes between the check and the connect (DNS rebinding) cannot slip through.
Every refusal is logged (WARNING), allowed decisions at DEBUG.
"""

from __future__ import annotations

import contextvars
import ipaddress
import logging
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from dgb.config import http as config_http
from dgb.scrape_errors import URL_BROKEN, ScrapeError

log = logging.getLogger("dgb.urlpolicy")

DEFAULT_ALLOWED_HOSTS: tuple[str, ...] = ("gov.br", "*.gov.br", "ebc.com.br", "*.ebc.com.br")

# the unique_id of the article being checked, so policy log lines name it (set by the service)
current_unique_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "dgb_integrity_unique_id", default=None
)

Resolver = Callable[..., list]

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPAT = ipaddress.ip_network("::/96")
_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}


class UrlRefused(ScrapeError):
    """The URL policy refused a URL (category ``url_broken``: the checker must not fetch it)."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        super().__init__(URL_BROKEN, f"refused by URL policy: {decision.reason} ({decision.url})")


@dataclass(frozen=True)
class Decision:
    url: str
    allowed: bool
    reason: str
    addresses: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict:
        """The ``dgb url-policy`` object: exactly url, allowed, reason."""
        return {"url": self.url, "allowed": self.allowed, "reason": self.reason}


@dataclass(frozen=True)
class _Pattern:
    raw: str
    host: str  # "gov.br" or, for a wildcard, the suffix without "*."
    wildcard: bool
    port: int | None

    @property
    def names_loopback(self) -> bool:
        return not self.wildcard and (_is_loopback_literal(self.host) or self.host in _LOOPBACK_NAMES)

    def matches(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.wildcard:
            return host.endswith("." + self.host)
        return host == self.host


def _norm_host(host: str) -> str:
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return host.encode("idna").decode("ascii") if not _ip_or_none(host) and host else host
    except UnicodeError:
        return host


def _ip_or_none(text: str):
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


def _is_loopback_literal(host: str) -> bool:
    ip = _ip_or_none(host)
    return bool(ip and ip.is_loopback)


def _parse_pattern(raw: str) -> _Pattern:
    text = raw.strip()
    if not text:
        raise ValueError("empty host pattern")
    port = None
    if text.startswith("["):  # [::1]:8090
        end = text.index("]")
        host, rest = text[1:end], text[end + 1 :]
        if rest.startswith(":"):
            port = int(rest[1:])
    elif text.count(":") == 1:  # host:port (a bare IPv6 has several colons)
        host, _, p = text.partition(":")
        port = int(p)
    else:
        host = text
    wildcard = host.startswith("*.")
    if wildcard:
        host = host[2:]
    if not host or "*" in host or "/" in host:
        raise ValueError(f"bad host pattern {raw!r} (want host, *.domain, optionally :port)")
    return _Pattern(raw.strip(), _norm_host(host), wildcard, port)


def _embedded_v4(ip) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, 6to4, NAT64), if any."""
    if ip.version != 6:
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or (ip in _IPV4_COMPAT and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def classify(address: str) -> str | None:
    """Why ``address`` must not be fetched ("loopback", "private", ...), or None when it is public."""
    ip = _ip_or_none(address)
    if ip is None:
        return "not an IP address"
    inner = _embedded_v4(ip)
    if inner is not None:
        why = classify(str(inner))
        if why:
            return f"{why} (embedded in IPv6 {ip})"
    if ip in _METADATA:
        return "link-local cloud metadata address"
    if ip.is_unspecified:
        return "unspecified address"
    if ip.is_loopback:
        return "loopback address"
    if ip.is_link_local:
        return "link-local address"
    if ip.version == 4 and ip in _CGNAT:
        return "carrier-grade NAT address (100.64/10)"
    if ip.is_multicast:
        return "multicast address"
    if ip.version == 6 and ip.is_site_local:
        return "site-local address"
    if ip.is_reserved:
        return "reserved address"
    if ip.is_private:
        return "private address"
    if not ip.is_global:
        return "not a globally routable address"
    return None


class UrlPolicy:
    """Allowlist + address checks. ``decide`` never makes a request (it may resolve DNS)."""

    def __init__(
        self,
        allowed_hosts: Iterable[str] | None = None,
        *,
        allow_loopback: bool = False,
        resolver: Resolver | None = None,
    ) -> None:
        hosts = list(DEFAULT_ALLOWED_HOSTS if allowed_hosts is None else allowed_hosts)
        self.patterns: tuple[_Pattern, ...] = tuple(_parse_pattern(h) for h in hosts if h.strip())
        self.allow_loopback = allow_loopback
        self.resolver = resolver or socket.getaddrinfo

    # -- construction from configuration ------------------------------------------------------
    @classmethod
    def from_env(
        cls,
        extra_hosts: Sequence[str] = (),
        *,
        allow_loopback: bool = False,
        resolver: Resolver | None = None,
    ) -> UrlPolicy:
        hosts = config_http.allowed_hosts()
        if hosts is None:
            hosts = list(DEFAULT_ALLOWED_HOSTS)
        return cls(hosts + list(extra_hosts), allow_loopback=allow_loopback, resolver=resolver)

    @classmethod
    def for_settings(cls, settings=None, *, resolver: Resolver | None = None) -> UrlPolicy:
        """The service's policy: live, the configured allowlist; in mirror mode (the offline
        default), the local mirror's exact ``host:port`` alone, loopback allowed for it. A mirror
        stack never reaches past its mirror: a gov.br URL that gets into it (a benchmark's made-up
        article, a link the mirror serves) is refused by the allowlist, before any DNS lookup."""
        if settings is None:
            from dgb.config import Settings

            settings = Settings.from_env()
        if getattr(settings, "source_mode", "live") == "mirror":
            parts = urlsplit(settings.mirror_url)
            if parts.hostname:
                host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
                mirror = f"{host}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
                return cls([mirror], allow_loopback=True, resolver=resolver)
        return cls.from_env(resolver=resolver)

    @property
    def allowed_hosts(self) -> list[str]:
        return [p.raw for p in self.patterns]

    # -- decisions ---------------------------------------------------------------------------
    def decide(self, url: str, resolver: Resolver | None = None) -> Decision:
        decision = self._decide(url, resolver or self.resolver)
        uid = current_unique_id.get()
        if decision.allowed:
            log.debug("url_policy unique_id=%s decision=allowed url=%s reason=%s", uid, url, decision.reason)
        else:
            log.warning(
                "url_policy unique_id=%s decision=refused url=%s reason=%s", uid, url, decision.reason
            )
        return decision

    def guard(self, url: str) -> None:
        """``Fetcher(url_guard=...)`` hook: raise :class:`UrlRefused` unless ``url`` is allowed."""
        decision = self.decide(url)
        if not decision.allowed:
            raise UrlRefused(decision)

    def match(self, host: str, port: int) -> _Pattern | None:
        host = _norm_host(host)
        for pattern in self.patterns:
            if pattern.matches(host, port):
                return pattern
        return None

    def vet_addresses(self, pattern: _Pattern, addresses: Sequence[str]) -> str | None:
        """Why one of ``addresses`` is refused for a host matched by ``pattern``, or None."""
        if not addresses:
            return "host resolves to no address"
        for address in addresses:
            why = classify(address)
            if why is None:
                continue
            if why == "loopback address" and self.allow_loopback and pattern.names_loopback:
                continue
            return f"{address}: {why}"
        return None

    def resolve(self, host: str, port: int, resolver: Resolver | None = None) -> list[str]:
        ip = _ip_or_none(host)
        if ip is not None:
            return [str(ip)]
        infos = (resolver or self.resolver)(host, port, type=socket.SOCK_STREAM)
        out: list[str] = []
        for info in infos:
            addr = str(info[4][0]).split("%", 1)[0]
            if addr not in out:
                out.append(addr)
        return out

    def _decide(self, url: str, resolver: Resolver) -> Decision:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            return Decision(url, False, f"malformed URL: {exc}")
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            return Decision(url, False, f"scheme {scheme or '(none)'!r} not allowed (http/https only)")
        if parts.username is not None or parts.password is not None:
            return Decision(url, False, "credentials in the URL are not allowed")
        host = _norm_host(parts.hostname or "")
        if not host:
            return Decision(url, False, "URL has no host")
        port = port or (443 if scheme == "https" else 80)
        pattern = self.match(host, port)
        literal = _ip_or_none(host)
        if literal is not None:  # name the address problem first: it is the more telling reason
            why = classify(str(literal))
            excepted = (
                why == "loopback address"
                and pattern is not None
                and self.allow_loopback
                and pattern.names_loopback
            )
            if why and not excepted:
                return Decision(url, False, f"{literal}: {why}", (str(literal),))
        if pattern is None:
            return Decision(
                url,
                False,
                f"host {host}:{port} is not in the allowlist ({', '.join(self.allowed_hosts) or 'empty'})",
            )
        try:
            addresses = self.resolve(host, port, resolver)
        except (OSError, UnicodeError) as exc:
            return Decision(url, False, f"cannot resolve {host}: {exc}")
        why = self.vet_addresses(pattern, addresses)
        if why:
            return Decision(url, False, why, tuple(addresses))
        return Decision(
            url,
            True,
            f"host matches {pattern.raw!r} and resolves to allowed address(es) {', '.join(addresses)}",
            tuple(addresses),
        )


# -- connection pinning ------------------------------------------------------------------------


def guarded_transport(policy: UrlPolicy, **kwargs):
    """An ``httpx.HTTPTransport`` whose TCP connections go only to addresses the policy vetted
    at connect time (the resolved IP is what is dialled; TLS still verifies the host name).
    Falls back to a plain transport, with a warning, if httpx's internals moved."""
    import httpcore
    import httpx

    class _PinnedBackend(httpcore.SyncBackend):
        def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
            pattern = policy.match(host, port)
            if pattern is None:
                raise httpcore.ConnectError(f"refused by URL policy: {host}:{port} not in the allowlist")
            try:
                addresses = policy.resolve(host, port)
            except OSError as exc:
                raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
            why = policy.vet_addresses(pattern, addresses)
            if why:
                log.warning(
                    "url_policy unique_id=%s decision=refused connect=%s:%s reason=%s",
                    current_unique_id.get(),
                    host,
                    port,
                    why,
                )
                raise httpcore.ConnectError(f"refused by URL policy at connect: {why}")
            last: Exception | None = None
            for address in addresses:
                try:
                    return super().connect_tcp(
                        address,
                        port,
                        timeout=timeout,
                        local_address=local_address,
                        socket_options=socket_options,
                    )
                except httpcore.ConnectError as exc:
                    last = exc
            raise last or httpcore.ConnectError(f"no address for {host}")

    transport = httpx.HTTPTransport(**kwargs)
    pool = getattr(transport, "_pool", None)
    if pool is not None and hasattr(pool, "_network_backend"):
        pool._network_backend = _PinnedBackend()
    else:  # pragma: no cover - depends on the installed httpx
        log.warning("url_policy: cannot pin connections with this httpx version; guard per hop only")
    return transport
