"""A hostile gov.br-like site: pages built to break a scraper, for the tests and the benchmark.

:func:`hostile_pages` gives the article pages (each a :class:`HostilePage` with what the scraper
must make of it: stored, or skipped with an error kind); :class:`HostileSite` serves them on a
free loopback port behind one classic gov.br listing (``/www.gov.br/mec/pt-br/assuntos/noticias``,
the ``mec`` agency's path, as the mirror lays URLs out; ``?only=<slug>`` lists one page) that
also carries SSRF and off-site items and an off-site next-page link (:data:`OFF_SITE_LINKS`),
which the scraper must drop without fetching. Nothing here ever connects anywhere: the off-site
URLs are only written into the listing.

    with HostileSite() as site:
        agency = load_agencies(base_url=site.base)["mec"]
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LISTING_PATH = "/www.gov.br/mec/pt-br/assuntos/noticias"
PUBLISHED = "20/11/2026 10h15"
PUBLISHED_ISO = "2026-11-20T10:15:00-03:00"

# listing items (and the next-page link) pointing off the agency's site: never fetched
OFF_SITE_LINKS: tuple[str, ...] = (
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
    "http://127.0.0.1:5432/",
    "http://10.0.0.7/www.gov.br/mec/pt-br/assuntos/noticias/interno",
    "https://outro-site.example.com/noticia",
    "http://[::ffff:169.254.169.254]/latest/",
    "file:///etc/passwd",
    "javascript:alert(document.cookie)",
    "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
    "https://usuario:senha@www.gov.br/mec/pt-br/assuntos/noticias/com-credenciais",
)
OFF_SITE_NEXT = "http://169.254.169.254/latest/user-data"


@dataclass(frozen=True)
class HostilePage:
    slug: str
    body: bytes
    expect: str  # "stored" or the error kind the scraper must record (errors.KINDS / categories)
    title: str = ""  # the stored title, when expect == "stored"
    send_length: bool = True  # Content-Length header (False: streamed until close)
    redirect_to: str | None = None  # served as a 302 to this URL instead


def page(title: str, body_html: str, *, head: str = "", h1: bool = True) -> str:
    """A classic gov.br article page around ``body_html`` (dated by its byline)."""
    heading = f'<h1 class="documentFirstHeading">{title}</h1>' if h1 else ""
    return (
        f"<!DOCTYPE html><html lang='pt-br'><head><meta charset='utf-8'><title>{title}</title>{head}</head>"
        f"<body class='portaltype-news-item'><div id='content'>{heading}"
        f"<span class='documentPublished'><span>Publicado em</span> <span class='value'>{PUBLISHED}</span>"
        f"</span><div id='parent-fieldname-text'>{body_html}</div></div></body></html>"
    )


def _ld(obj) -> str:
    return f'<script type="application/ld+json">{obj}</script>'


def hostile_pages(big_mb: int = 20) -> list[HostilePage]:
    """The corpus. ``big_mb`` sizes the oversized page (over the fetcher's 5 MB cap)."""
    ok = "<p>Texto do artigo com um parágrafo normal e legível.</p>"
    deep_json = "[" * 50_000 + "]" * 50_000
    news = {"@context": "https://schema.org", "datePublished": PUBLISHED_ISO}
    pages = [
        HostilePage("boa-noticia-1", page("Boa notícia um", ok).encode(), "stored", "Boa notícia um"),
        HostilePage(
            "jsonld-profundo",
            page(
                "JSON-LD profundo", ok, head=_ld(deep_json) + _ld('{"a":' * 20_000 + "1" + "}" * 20_000)
            ).encode(),
            "stored",
            "JSON-LD profundo",
        ),
        HostilePage(
            "jsonld-tipo-5",
            page(
                "JSON-LD tipo 5",
                ok,
                head=_ld(json.dumps({**news, "@type": 5, "headline": 7}))
                + _ld(json.dumps([{"@type": {"x": 1}}, {"@type": [5, None]}, 3, "texto"]))
                + _ld(json.dumps({"@graph": [{"@type": 5.5, "image": {"url": 9}}]})),
            ).encode(),
            "stored",
            "JSON-LD tipo 5",
        ),
        HostilePage(  # the title comes from JSON-LD only, and carries a lone surrogate
            "surrogate-na-manchete",
            page(
                "",
                ok,
                h1=False,
                head=_ld(
                    '{"@type": "NewsArticle", "headline": "Manchete \\ud800 quebrada",'
                    f' "datePublished": "{PUBLISHED_ISO}"}}'
                ),
            ).encode(),
            "stored",
            "Manchete quebrada",
        ),
        HostilePage(  # NUL escaped in JSON-LD (the title) and raw in the page bytes
            "byte-nulo",
            page(
                "",
                "<p>Antes\x00depois do byte nulo.</p>",
                h1=False,
                head=_ld(
                    '{"@type": "NewsArticle", "headline": "Nulo\\u0000 no titulo",'
                    f' "datePublished": "{PUBLISHED_ISO}"}}'
                ),
            ).encode(),
            "stored",
            "Nulo no titulo",
        ),
        HostilePage(  # deep, but under the DOM cap: parsed, flattened before markdownify
            "corpo-150-niveis",
            page("Corpo com 150 níveis", "<div>" * 150 + "<p>Texto no fundo.</p>" + "</div>" * 150).encode(),
            "stored",
            "Corpo com 150 níveis",
        ),
        HostilePage(
            "corpo-400-niveis",
            page("Corpo com 400 níveis", "<div>" * 400 + "<p>fundo</p>" + "</div>" * 400).encode(),
            "too_deep",
        ),
        HostilePage(
            "32k-nos-aninhados",
            page("32 mil nós", "<span>" * 32_000 + "x" + "</span>" * 32_000).encode(),
            "too_deep",
        ),
        HostilePage(
            "40k-paragrafos",
            page("40 mil parágrafos", "<p><span>Compartilhe</span></p>" * 40_000).encode(),
            "too_deep",
        ),
        HostilePage(  # wide and share-heavy, under the node cap: linear clean-up
            "6k-blocos-compartilhe",
            page(
                "Blocos compartilhe", ok + "<div><span>Compartilhe: <a href='#'>x</a></span></div>" * 6_000
            ).encode(),
            "stored",
            "Blocos compartilhe",
        ),
        HostilePage(  # 2 MB of unpunctuated text in one paragraph and a 300 kB title: capped
            "texto-sem-pontuacao",
            page("T" * 300_000, "<p>" + "palavra " * 250_000 + "</p>").encode(),
            "stored",
            "T" * 1_000,
        ),
        HostilePage(  # ~4 MB of ordinary paragraphs, under the fetch cap and the node cap
            "pagina-4mb",
            page(
                "Página de 4 MB",
                ("<p>" + "Um parágrafo comum de notícia, com pontuação. " * 4 + "</p>") * 20_000,
            ).encode(),
            "stored",
            "Página de 4 MB",
        ),
        HostilePage(
            "pagina-20mb",
            page("Página enorme", "<p>" + "x" * (big_mb * 1024 * 1024) + "</p>").encode(),
            "too_large",
        ),
        HostilePage(
            "pagina-20mb-sem-tamanho",
            page("Página enorme sem tamanho", "<p>" + "y" * (big_mb * 1024 * 1024) + "</p>").encode(),
            "too_large",
            send_length=False,
        ),
        HostilePage(  # a redirect hop into the metadata service: refused by the URL guard
            "redireciona-metadados",
            b"",
            "url_broken",
            redirect_to="http://169.254.169.254/latest/meta-data/",
        ),
        HostilePage("boa-noticia-2", page("Boa notícia dois", ok).encode(), "stored", "Boa notícia dois"),
    ]
    return pages


def listing_html(base: str, pages: list[HostilePage]) -> str:
    """The classic listing: one ``article.tileItem`` per page and per off-site link."""
    urls = [f"{base}{LISTING_PATH}/{p.slug}" for p in pages] + list(OFF_SITE_LINKS)
    items = "".join(
        f'<article class="tileItem"><h2 class="tileHeadline"><a class="summary url" href="{u}">'
        f'Notícia {i}</a></h2><span class="documentByLine">{PUBLISHED}</span></article>'
        for i, u in enumerate(urls)
    )
    return (
        "<html><body class='portaltype-folder'><div id='content-core'>"
        f"{items}</div><ul class='paginacao listingBar'><li><a class='proximo' href='{OFF_SITE_NEXT}'>"
        "Próximo</a></li></ul></body></html>"
    )


class HostileSite:
    """Serves :func:`hostile_pages` on ``127.0.0.1:<free port>``; ``base`` is its root URL."""

    def __init__(self, pages: list[HostilePage] | None = None) -> None:
        self.pages = {p.slug: p for p in (pages if pages is not None else hostile_pages())}
        self.requests: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # keep-alive: no delayed-ACK wait between headers and body

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                site.requests.append(self.path)
                path = self.path.split("?", 1)[0]
                if path == LISTING_PATH:  # ?only=<slug>: a listing of that one page (and the off-site links)
                    only = self.path.partition("?only=")[2]
                    shown = [p for p in site.pages.values() if not only or p.slug == only]
                    return self._send(200, listing_html(site.base, shown).encode())
                slug = path.removeprefix(LISTING_PATH + "/")
                hostile = site.pages.get(slug) if path.startswith(LISTING_PATH + "/") else None
                if hostile is None:
                    return self._send(404, b"<html><body>not found</body></html>")
                if hostile.redirect_to:
                    self.send_response(302)
                    self.send_header("Location", hostile.redirect_to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                return self._send(200, hostile.body, length=hostile.send_length)

            def _send(self, status: int, body: bytes, length: bool = True) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                if length:
                    self.send_header("Content-Length", str(len(body)))
                else:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                try:
                    for i in range(0, len(body), 65536):
                        self.wfile.write(body[i : i + 65536])
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading (size cap): expected

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> HostileSite:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
