"""The fetcher's one URL guard and robots.txt (Protego), decided without connecting anywhere.

Every request goes through an ``httpx.MockTransport`` that records it: a refused URL must never
reach the transport, so nothing here opens a socket (not even to loopback).
"""

from __future__ import annotations

import httpx
import pytest

from dgb.fetch import Fetcher, FetchPolicy, site_host
from dgb.scrape_errors import ScrapeError, TooLargeError, UrlBrokenError
from dgb.urlpolicy import UrlRefused

MIRROR = "http://127.0.0.1:9"  # never dialled: the mock transport answers
FAST = FetchPolicy(min_interval=0.0, retries=0)


@pytest.fixture
def mirror_mode(monkeypatch):
    monkeypatch.setenv("DGB_SOURCE_MODE", "mirror")
    monkeypatch.setenv("DGB_MIRROR_URL", MIRROR)
    monkeypatch.delenv("DGB_INTEGRITY_ALLOWED_HOSTS", raising=False)


def _fetcher(routes: dict[str, httpx.Response], seen: list[str], policy: FetchPolicy = FAST) -> Fetcher:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        for prefix, resp in routes.items():
            if str(request.url).startswith(prefix):
                return resp
        return httpx.Response(404, text="nada")

    return Fetcher(policy, transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    "url, reason",
    [
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://[::ffff:169.254.169.254]/latest/", "metadata"),
        ("http://127.0.0.1:5432/", "loopback"),
        ("http://localhost:6379/", "allowlist"),
        ("http://10.0.0.7/www.gov.br/mec/x", "private"),
        ("http://192.168.1.1/", "private"),
        ("https://outro-site.example.com/noticia", "allowlist"),
        ("https://user:senha@www.gov.br/mec/", "credentials"),
        ("file:///etc/passwd", "scheme"),
        ("ftp://www.gov.br/x", "scheme"),
        ("gopher://127.0.0.1:9/x", "scheme"),
    ],
)
def test_default_guard_refuses_before_any_request(mirror_mode, url, reason):
    seen: list[str] = []
    with _fetcher({}, seen) as f, pytest.raises(ScrapeError) as exc:
        f.get(url)
    assert exc.value.category == "url_broken" and reason in str(exc.value).lower()
    assert seen == []  # refused before robots.txt and before the page: nothing was requested


def test_the_configured_mirror_is_allowed_and_a_redirect_hop_is_guarded(mirror_mode):
    seen: list[str] = []
    page = f"{MIRROR}/www.gov.br/mec/pt-br/assuntos/noticias/a"
    routes = {page: httpx.Response(302, headers={"Location": "http://169.254.169.254/latest/meta-data/"})}
    with _fetcher(routes, seen) as f, pytest.raises(UrlRefused) as exc:
        f.get(page)
    assert "metadata" in str(exc.value)
    assert seen == [f"{MIRROR}/www.gov.br/robots.txt", page]  # the hop itself was never requested
    # another port on loopback is not the mirror
    with _fetcher({}, seen) as f, pytest.raises(UrlRefused):
        f.get("http://127.0.0.1:10/www.gov.br/mec/")


def test_live_mode_does_not_allow_loopback(monkeypatch):
    monkeypatch.setenv("DGB_SOURCE_MODE", "live")
    seen: list[str] = []
    with _fetcher({}, seen) as f, pytest.raises(UrlRefused):
        f.get(f"{MIRROR}/www.gov.br/mec/")
    assert seen == []


def test_an_explicit_guard_replaces_the_default(mirror_mode):
    seen: list[str] = []
    calls: list[str] = []

    def guard(url: str) -> None:
        calls.append(url)
        raise UrlBrokenError(f"no: {url}")

    transport = httpx.MockTransport(lambda r: seen.append(r) or None)
    with Fetcher(FAST, url_guard=guard, transport=transport) as f, pytest.raises(UrlBrokenError):
        f.get(f"{MIRROR}/www.gov.br/mec/")
    assert calls and seen == []


def test_oversized_response_is_too_large(mirror_mode):
    seen: list[str] = []
    url = f"{MIRROR}/www.gov.br/mec/big"
    policy = FetchPolicy(min_interval=0.0, retries=0, max_bytes=1000, respect_robots=False)
    routes = {url: httpx.Response(200, content=b"x" * 5000)}
    with _fetcher(routes, seen, policy) as f, pytest.raises(TooLargeError) as exc:
        f.get(url)
    assert (exc.value.category, exc.value.kind) == ("unknown", "too_large")


ROBOTS = """
User-agent: *
Disallow: /www.gov.br/mec/privado
Allow: /www.gov.br/mec/privado/publico
Disallow: /www.gov.br/*/arquivos/*.pdf$
Disallow: /www.gov.br/*?print=
Allow: /www.gov.br/saude/noticias$

User-agent: dgb-pipeline
Disallow: /www.gov.br/mds/
"""


@pytest.mark.parametrize(
    "path, allowed",
    [
        ("/www.gov.br/mec/privado/x", False),
        ("/www.gov.br/mec/privado/publico/y", True),  # the longer (more specific) rule wins
        ("/www.gov.br/mec/arquivos/relatorio.pdf", False),  # '*' wildcard, '$' anchors the end
        ("/www.gov.br/mec/arquivos/relatorio.pdf.html", True),
        ("/www.gov.br/mec/noticias/a?print=1", False),
        ("/www.gov.br/mec/noticias/a", True),
    ],
)
def test_robots_rfc9309_wildcards_and_longest_match(mirror_mode, path, allowed):
    seen: list[str] = []
    robots = {
        f"{MIRROR}/www.gov.br/robots.txt": httpx.Response(200, text=ROBOTS.replace("dgb-pipeline", "x"))
    }
    with _fetcher(robots, seen) as f:
        assert f.allowed_by_robots(MIRROR + path) is allowed
        assert f.allowed_by_robots(MIRROR + path) is allowed  # cached: one robots.txt request
    assert seen == [f"{MIRROR}/www.gov.br/robots.txt"]


def test_robots_group_for_our_user_agent_applies(mirror_mode):
    seen: list[str] = []
    robots = {f"{MIRROR}/www.gov.br/robots.txt": httpx.Response(200, text=ROBOTS)}
    with _fetcher(robots, seen) as f:
        assert f.allowed_by_robots(f"{MIRROR}/www.gov.br/mds/noticia") is False
        assert f.allowed_by_robots(f"{MIRROR}/www.gov.br/mec/privado/x") is True  # our group only
        with pytest.raises(UrlBrokenError, match="robots"):
            f.get(f"{MIRROR}/www.gov.br/mds/noticia")
    assert f"{MIRROR}/www.gov.br/mds/noticia" not in seen


def test_site_host_is_the_mirrored_host_under_the_mirror():
    assert site_host("https://WWW.gov.br/mec/x") == "www.gov.br"
    assert site_host("https://agenciabrasil.ebc.com.br:443/x") == "agenciabrasil.ebc.com.br:443"
    assert site_host(f"{MIRROR}/www.gov.br/mec/x") == "127.0.0.1:9/www.gov.br"
    assert site_host(f"{MIRROR}/outro.site.com/x") == "127.0.0.1:9/outro.site.com"
    assert site_host("http://127.0.0.1:5432/") == "127.0.0.1:5432"
    assert site_host("mailto:x@y") == "" and site_host("http://[bad") == ""
