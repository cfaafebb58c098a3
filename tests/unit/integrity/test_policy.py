"""SSRF guard of the integrity checks: decisions only.

No test here opens a connection: names are resolved by a fake resolver (or are IP literals),
redirect chains are simulated by calling the guard per hop, or run through an
httpx.MockTransport that never touches the network.
"""

from __future__ import annotations

import json
import logging
import socket

import httpx
import pytest

from dgb.fetch import Fetcher, FetchPolicy
from dgb.scrape_errors import ScrapeError
from dgb.urlpolicy import DEFAULT_ALLOWED_HOSTS, UrlPolicy, UrlRefused, classify, guarded_transport


class FakeResolver:
    """getaddrinfo stand-in: name -> addresses; unknown names fail like a real NXDOMAIN."""

    def __init__(self, table: dict[str, list[str]]):
        self.table = table
        self.calls: list[str] = []

    def __call__(self, host, port, *args, **kwargs):
        self.calls.append(host)
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        out = []
        for addr in self.table[host]:
            family = socket.AF_INET6 if ":" in addr else socket.AF_INET
            sockaddr = (addr, port, 0, 0) if family == socket.AF_INET6 else (addr, port)
            out.append((family, socket.SOCK_STREAM, 6, "", sockaddr))
        return out


PUBLIC = "200.160.2.3"  # a globally routable address (decided on, never contacted)


def policy_with(table, **kw) -> tuple[UrlPolicy, FakeResolver]:
    resolver = FakeResolver(table)
    return UrlPolicy(resolver=resolver, **kw), resolver


# -- private, loopback, link-local, metadata ... after DNS resolution ----------------------------


@pytest.mark.parametrize(
    "address,why",
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "metadata"),
        ("169.254.10.1", "link-local"),
        ("fe80::1", "link-local"),
        ("10.0.0.1", "private"),
        ("10.255.255.254", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.1", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("fc00::5", "private"),
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "metadata"),
        ("2002:a00:1::1", "private"),  # 6to4 wrapping 10.0.0.1
        ("64:ff9b::a00:1", "private"),  # NAT64 wrapping 10.0.0.1
        ("100.64.0.1", "carrier-grade"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("192.0.2.10", "private"),  # documentation range: not global
    ],
)
def test_allowlisted_name_resolving_to_forbidden_address_is_refused(address, why):
    policy, resolver = policy_with({"www.gov.br": [address]})
    d = policy.decide("https://www.gov.br/mec/pt-br/noticia")
    assert d.allowed is False
    assert why in d.reason and address in d.reason
    assert resolver.calls == ["www.gov.br"]


@pytest.mark.parametrize(
    "url,why",
    [
        ("http://127.0.0.1/", "loopback"),
        ("http://127.0.0.1:8080/admin", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://10.0.0.1/", "private"),
        ("http://172.16.0.1/", "private"),
        ("http://192.168.0.1/", "private"),
        ("http://[fd00::1]/", "private"),
        ("http://[::ffff:10.0.0.1]/", "private"),
        ("http://[fe80::1%25eth0]/", "link-local"),
    ],
)
def test_literal_forbidden_addresses_are_refused_without_dns(url, why):
    policy, resolver = policy_with({})
    d = policy.decide(url)
    assert d.allowed is False and why in d.reason, d
    assert resolver.calls == []


def test_one_bad_address_among_good_ones_refuses():
    policy, _ = policy_with({"www.gov.br": [PUBLIC, "10.1.2.3"]})
    d = policy.decide("https://www.gov.br/x")
    assert not d.allowed and "10.1.2.3" in d.reason


def test_public_address_allowed_only_for_allowlisted_host():
    policy, resolver = policy_with(
        {
            "www.gov.br": [PUBLIC],
            "agenciabrasil.ebc.com.br": [PUBLIC],
            "example.com": [PUBLIC],
            "gov.br": [PUBLIC],
        }
    )
    assert policy.decide("https://www.gov.br/mec/x").allowed
    assert policy.decide("https://gov.br/").allowed
    assert policy.decide("https://agenciabrasil.ebc.com.br/geral/noticia/x").allowed
    outside = policy.decide("https://example.com/")
    assert not outside.allowed and "not in the allowlist" in outside.reason
    literal = policy.decide(f"http://{PUBLIC}/")
    assert not literal.allowed and "not in the allowlist" in literal.reason
    assert "example.com" not in resolver.calls  # refused before any DNS lookup


@pytest.mark.parametrize(
    "url",
    [
        "https://evilgov.br/",
        "https://gov.br.evil.com/",
        "https://www.gov.br.attacker.net/x",
        "https://ebc.com.br.evil.org/",
        "https://notebc.com.br/",
        "https://www.gov.com/",
    ],
)
def test_hosts_outside_allowlist_are_refused(url):
    policy, resolver = policy_with({})
    d = policy.decide(url)
    assert not d.allowed and "not in the allowlist" in d.reason
    assert resolver.calls == []


@pytest.mark.parametrize(
    "url,why",
    [
        ("ftp://www.gov.br/file", "scheme"),
        ("file:///etc/passwd", "scheme"),
        ("gopher://www.gov.br/", "scheme"),
        ("javascript:alert(1)", "scheme"),
        ("http://user:secret@www.gov.br/", "credentials"),
        ("http:///nohost", "no host"),
        ("http://www.gov.br:99999/", "malformed"),
    ],
)
def test_bad_urls_are_refused(url, why):
    policy, _ = policy_with({"www.gov.br": [PUBLIC]})
    d = policy.decide(url)
    assert not d.allowed and why in d.reason, d


def test_unresolvable_host_is_refused():
    policy, _ = policy_with({})
    d = policy.decide("https://nao-existe.gov.br/")
    assert not d.allowed and "cannot resolve" in d.reason


def test_decisions_are_logged(caplog):
    policy, _ = policy_with({"www.gov.br": ["169.254.169.254"]})
    with caplog.at_level(logging.DEBUG, logger="dgb.urlpolicy"):
        policy.decide("http://www.gov.br/a")
    refused = [r for r in caplog.records if "decision=refused" in r.getMessage()]
    assert refused and refused[0].levelno == logging.WARNING and "metadata" in refused[0].getMessage()


# -- redirect chains: the guard runs on every hop ------------------------------------------------


def test_redirect_chain_into_private_address_is_refused_per_hop():
    policy, _ = policy_with(
        {"www.gov.br": [PUBLIC], "cdn.gov.br": [PUBLIC], "intranet.gov.br": ["10.20.30.40"]}
    )
    hops = ["https://www.gov.br/mec/noticia", "https://cdn.gov.br/img.jpg", "http://intranet.gov.br/admin"]
    policy.guard(hops[0])
    policy.guard(hops[1])
    with pytest.raises(UrlRefused) as err:
        policy.guard(hops[2])
    assert isinstance(err.value, ScrapeError) and err.value.category == "url_broken"
    assert "10.20.30.40" in str(err.value) and not err.value.decision.allowed
    with pytest.raises(UrlRefused, match="metadata"):
        policy.guard("http://169.254.169.254/latest/meta-data/iam/")


def test_fetcher_checks_every_redirect_hop_without_touching_the_network():
    """Fetcher + guard over a MockTransport (no sockets): a 302 to a metadata address and one to
    an allowlisted name that resolves privately are both stopped before the request is made."""
    policy, _ = policy_with({"www.gov.br": [PUBLIC], "sneaky.gov.br": ["192.168.0.10"]})
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        if request.url.path == "/to-metadata":
            return httpx.Response(302, headers={"Location": "http://169.254.169.254/latest/meta-data/"})
        if request.url.path == "/to-sneaky":
            return httpx.Response(301, headers={"Location": "https://sneaky.gov.br/x"})
        return httpx.Response(200, text="ok")

    fast = FetchPolicy(min_interval=0, retries=0, respect_robots=False)
    with Fetcher(fast, transport=httpx.MockTransport(handler), url_guard=policy.guard) as f:
        assert f.get("https://www.gov.br/fine").status == 200
        with pytest.raises(UrlRefused, match="metadata"):
            f.get("https://www.gov.br/to-metadata")
        with pytest.raises(UrlRefused, match=r"192\.168\.0\.10"):
            f.get("https://www.gov.br/to-sneaky")
        with pytest.raises(UrlRefused):
            f.get("http://10.0.0.1/")
    assert seen == [
        "https://www.gov.br/fine",
        "https://www.gov.br/to-metadata",
        "https://www.gov.br/to-sneaky",
    ]


def test_pinned_transport_refuses_a_rebound_address_at_connect():
    """DNS rebinding: the name resolves publicly when the guard asks, privately at connect time;
    the pinned transport re-vets the address it is about to dial and refuses (no socket opened)."""
    answers = iter([[PUBLIC], ["10.9.8.7"]])
    policy = UrlPolicy(
        resolver=lambda host, port, *a, **k: [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", (addr, port)) for addr in next(answers)
        ]
    )
    assert policy.decide("http://www.gov.br/x").allowed
    transport = guarded_transport(policy)
    with pytest.raises(httpx.ConnectError, match="refused by URL policy"):
        transport.handle_request(httpx.Request("GET", "http://www.gov.br/x"))
    with pytest.raises(httpx.ConnectError, match="allowlist"):
        transport.handle_request(httpx.Request("GET", "http://example.org/"))


# -- configuration: the local site allowed narrowly, defaults never weakened --------------------


def test_loopback_allowed_only_for_an_explicit_loopback_host_and_port():
    policy, _ = policy_with(
        {"www.gov.br": ["127.0.0.1"], "localhost": ["127.0.0.1"]},
        allowed_hosts=list(DEFAULT_ALLOWED_HOSTS) + ["127.0.0.1:8123"],
        allow_loopback=True,
    )
    assert policy.decide("http://127.0.0.1:8123/www.gov.br/mec/x").allowed
    other_port = policy.decide("http://127.0.0.1:8124/")
    assert not other_port.allowed and "loopback" in other_port.reason
    assert not policy.decide("http://127.0.0.2:8123/").allowed
    assert not policy.decide("http://localhost:8123/").allowed
    rebound = policy.decide("http://www.gov.br/x")  # allowlisted name -> loopback: still refused
    assert not rebound.allowed and "loopback" in rebound.reason
    strict, _ = policy_with({}, allowed_hosts=["127.0.0.1:8123"])
    assert not strict.decide("http://127.0.0.1:8123/").allowed  # allow_loopback off


def test_defaults_and_env_configuration(monkeypatch):
    monkeypatch.delenv("DGB_INTEGRITY_ALLOWED_HOSTS", raising=False)
    assert UrlPolicy.from_env().allowed_hosts == ["gov.br", "*.gov.br", "ebc.com.br", "*.ebc.com.br"]
    monkeypatch.setenv("DGB_INTEGRITY_ALLOWED_HOSTS", "www.gov.br, *.ebc.com.br")
    policy = UrlPolicy.from_env(resolver=FakeResolver({"www.gov.br": [PUBLIC], "mec.gov.br": [PUBLIC]}))
    assert policy.allowed_hosts == ["www.gov.br", "*.ebc.com.br"]
    assert policy.decide("https://www.gov.br/").allowed
    assert not policy.decide("https://mec.gov.br/").allowed
    with pytest.raises(ValueError):
        UrlPolicy(["*"])


@pytest.mark.parametrize("configured", [None, "www.gov.br, *.ebc.com.br"])
def test_for_settings_allows_only_the_mirror_in_mirror_mode(monkeypatch, configured):
    from dataclasses import replace

    from dgb.config import Settings

    if configured is None:
        monkeypatch.delenv("DGB_INTEGRITY_ALLOWED_HOSTS", raising=False)
    else:
        monkeypatch.setenv("DGB_INTEGRITY_ALLOWED_HOSTS", configured)
    monkeypatch.delenv("DGB_MIRROR_URL", raising=False)
    s = Settings.from_env()
    resolver = FakeResolver({"www.gov.br": [PUBLIC]})  # records every lookup; no DNS server asked
    mirror = UrlPolicy.for_settings(replace(s, source_mode="mirror", mirror_port=8555), resolver=resolver)
    assert mirror.allowed_hosts == ["127.0.0.1:8555"] and mirror.allow_loopback
    assert mirror.decide("http://127.0.0.1:8555/www.gov.br/mec/x").allowed
    assert not mirror.decide("http://127.0.0.1:8556/").allowed
    refused = mirror.decide("https://www.gov.br/fazenda/bench/1")  # a gov.br name: refused unlooked-up
    assert not refused.allowed and "not in the allowlist" in refused.reason
    assert "www.gov.br" not in resolver.calls
    live = UrlPolicy.for_settings(replace(s, source_mode="live"))  # live: the configured list
    expected = list(DEFAULT_ALLOWED_HOSTS) if configured is None else ["www.gov.br", "*.ebc.com.br"]
    assert live.allowed_hosts == expected and not live.allow_loopback


def test_classify_public_addresses():
    assert classify(PUBLIC) is None
    assert classify("2804:214:8000::1") is None
    assert classify("not-an-ip") == "not an IP address"


# -- the CLI -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url,allowed",
    [
        ("http://169.254.169.254/latest/meta-data/", False),
        ("http://10.0.0.1/", False),
        ("http://[::ffff:10.0.0.1]/", False),
        ("https://example.org/", False),
        ("http://localhost/", False),  # not allowlisted (refused before any lookup)
    ],
)
def test_cli_prints_one_json_object_with_exact_keys(capsys, monkeypatch, url, allowed):
    from dgb.cli import main

    monkeypatch.setenv("DGB_SOURCE_MODE", "live")
    assert main(["url-policy", url]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    obj = json.loads(out[0])
    assert list(obj) == ["url", "allowed", "reason"]
    assert (
        obj["url"] == url and obj["allowed"] is allowed and isinstance(obj["reason"], str) and obj["reason"]
    )
    assert main(["url-policy", "--exit-code", url]) == 1
