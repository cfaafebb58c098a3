"""The mirror (local gov.br-like site): pages, Plone JSON, EBC, caching, faults, control, extras."""

from __future__ import annotations

import argparse
import json
import logging
import re
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest
from selectolax.lexbor import LexborHTMLParser

from dgb.scraper.plone6 import parse_plone6_item
from dgb_dev.mirror import Faults, Site, start_in_thread
from dgb_dev.mirror.content import BRT, FIXED_SHAPES, article_variant
from dgb_dev.mirror.images import make_jpeg
from dgb_dev.mirror.pages.blocks import parse_blocks

AGENCIES = ("mec", "mds", "mma", "turismo", "saude")  # shapes: tileItem, ul, entries, div.item, hash
PER_AGENCY = 35
DATE_RE = re.compile(r"\d{2}/\d{2}/\d{4}")
TIME_RE = re.compile(r"\d{1,2}h\d{2}")
CONTENT = (
    "Primeiro parágrafo com **destaque** e [link](https://www.gov.br/mec/pt-br).\n\n"
    "## Principais pontos\n\n- item um\n- item dois\n\nParágrafo final da matéria."
)


def _rows() -> list[dict]:
    start = datetime(2026, 2, 1, 8, 0, 7, tzinfo=BRT)
    rows = []
    for a, agency in enumerate(AGENCIES):
        for i in range(PER_AGENCY):
            rows.append(
                {
                    "agency": agency,
                    "title": f"Governo anuncia medida {i} da pasta {agency}",
                    "subtitle": f"Linha fina {i}",
                    "category": "Educação",
                    "tags": ["educação", "escolas"],
                    "content": CONTENT,
                    "published_at": (start + timedelta(hours=i * 7 + a)).isoformat(),
                    "url_slug": f"medida-{i}-{agency}",
                    "image_url": "imagens/foto.jpg" if i % 3 else None,
                    "theme_l1": "02",
                }
            )
    return rows


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "articles.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in _rows()), encoding="utf-8")
    return path


@pytest.fixture
def extra_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "extra"
    folder.mkdir()
    monkeypatch.setenv("DGB_MIRROR_EXTRA", str(folder))
    return folder


@pytest.fixture
def mirror(corpus: Path, extra_dir: Path):
    site = Site(corpus, registry={})
    server, base = start_in_thread(site)
    with httpx.Client(timeout=10) as client:
        yield site, base, client
    server.shutdown()
    server.server_close()


def html(resp: httpx.Response) -> LexborHTMLParser:
    return LexborHTMLParser(resp.text)


def listing(base: str, agency: str) -> str:
    return f"{base}/www.gov.br/{agency}/pt-br/assuntos/noticias"


def control(client: httpx.Client, base: str, name: str, body: dict | None = None) -> httpx.Response:
    return client.post(f"{base}/_control/{name}", json=body or {})


def fault(client: httpx.Client, base: str, **spec) -> None:
    assert control(client, base, "fault", spec).status_code == 200


def article_with(site: Site, agency: str = "mec", **want) -> object:
    for a in site.articles(agency):
        v = article_variant(a)
        if all(getattr(v, k) == w for k, w in want.items()) and (a.image_url or "image_ref" not in want):
            return a
    raise AssertionError(f"fixture has no article with {want}")


# -- classic listings --------------------------------------------------------------------------


def test_listing_tileitem_pagination_newest_first(mirror):
    site, base, client = mirror
    r = client.get(listing(base, "mec"))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    tree = html(r)
    items = tree.css("div#content-core article.tileItem")
    assert len(items) == 30
    first = items[0]
    assert first.css_first("span.subtitle").text() == "Educação"
    link = first.css_first("h2.tileHeadline > a.summary.url")
    assert link.attributes["href"] == f"{listing(base, 'mec')}/medida-34-mec"
    assert first.css_first("p.tileBody > span.description").text() == "Linha fina 34"
    byline = first.css_first("span.documentByLine").text()
    assert DATE_RE.search(byline) and TIME_RE.search(byline)
    assert any(i.css_first("div.tileImage img") for i in items)
    # not news items: menu, share links and footer exist outside #content-core
    assert tree.css("nav#portal-globalnav a") and tree.css("footer#portal-footer a")
    assert "Compartilhe:" in tree.css_first("div.social-links").text()
    nxt = tree.css_first("ul.paginacao.listingBar li a.proximo")
    assert nxt.attributes["href"] == f"{listing(base, 'mec')}?b_start:int=30"
    page2 = html(client.get(nxt.attributes["href"]))
    assert len(page2.css("article.tileItem")) == 5 and page2.css_first("a.proximo") is None
    assert page2.css("article.tileItem a.summary")[-1].attributes["href"].endswith("/medida-0-mec")


@pytest.mark.parametrize(
    "agency,selector",
    [
        ("mds", "ul.noticias > li"),
        ("mma", "div.entries > article.entry"),
        ("turismo", "div#content-core > div.item"),
    ],
)
def test_listing_fallback_shapes(mirror, agency, selector):
    _, base, client = mirror
    assert FIXED_SHAPES[agency] != "tileItem"
    tree = html(client.get(listing(base, agency)))
    items = [i for i in tree.css(selector) if DATE_RE.search(i.text())]
    assert len(items) == 30 and not tree.css("article.tileItem")
    menus = [i for i in tree.css(selector) if not DATE_RE.search(i.text())]  # navigation in the item shape
    assert [m.css_first("a").text() for m in menus] == (["Menu"] if agency == "turismo" else [])
    for item in items[:3]:
        assert item.css_first("a[href]").attributes["href"].startswith(listing(base, agency) + "/")
        assert DATE_RE.search(item.text()) and TIME_RE.search(item.text())
    assert tree.css_first("ul.paginacao.listingBar li a.proximo")


# -- classic articles ------------------------------------------------------------------------


def test_article_markup(mirror):
    site, base, client = mirror
    a = article_with(site, jsonld="present", image_ref="relative")
    url = site.article_url(base, a)
    r = client.get(url)
    tree = html(r)
    scripts = [json.loads(s.text()) for s in tree.css('script[type="application/ld+json"]')]
    news = next(s for s in scripts if s["@type"] == "NewsArticle")
    assert news["headline"] == a.title and news["datePublished"].endswith("-03:00")
    assert "dateModified" in news
    assert tree.css_first("div#content p.nitfSubtitle").text() == "Educação"
    assert tree.css_first("h1.documentFirstHeading").text() == a.title
    assert tree.css_first("div.documentDescription").text() == a.subtitle
    pub = tree.css_first("div#plone-document-byline span.documentPublished > span.value").text()
    assert re.fullmatch(r"\d{2}/\d{2}/\d{4} \d{2}h\d{2}", pub)
    assert tree.css_first("span.documentModified > span.value")
    body = tree.css_first("div#content-core > div#parent-fieldname-text")
    assert body.css_first("h2").text() == "Principais pontos"
    assert [li.text() for li in body.css("ul li")] == ["item um", "item dois"]
    assert body.css_first("strong").text() == "destaque"
    assert body.css_first("a").attributes["href"] == f"{base}/www.gov.br/mec/pt-br"
    src = body.css_first("img").attributes["src"]
    assert re.fullmatch(r"resolveuid/[0-9a-f]{32}/@@images/image", src)
    assert "Assessoria de Comunicação" in body.css("p")[-1].text() and "Telefone" in body.text()
    assert "Compartilhe:" in r.text and tree.css_first("nav.portal-breadcrumbs")
    assert [t.text() for t in tree.css('a[href*="origem=keyword"]')] == ["educação", "escolas"]
    # the relative resolveuid link resolves against the site root
    img = client.get(f"{base}/www.gov.br/mec/{src}")
    assert img.status_code == 200 and img.headers["content-type"] == "image/jpeg"
    assert img.content[:2] == b"\xff\xd8" and img.content[-2:] == b"\xff\xd9"


def test_article_variants(mirror):
    site, base, client = mirror

    def page(a):
        return client.get(site.article_url(base, a)).text

    malformed = page(article_with(site, jsonld="malformed"))
    raw = re.findall(r'<script type="application/ld\+json">(.*?)</script>', malformed)[-1]
    assert '"@type": "NewsArticle"' in raw
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)
    absent = [
        a for a in site.articles("mec") + site.articles("saude") if article_variant(a).jsonld == "absent"
    ]
    bylines = {article_variant(a).byline for a in absent}
    assert bylines == {"full", "text"}
    for a in absent:
        text = page(a)
        assert "application/ld+json" not in text
        if article_variant(a).byline == "text":
            assert "plone-document-byline" not in text and re.search(
                r"Publicado em \d{2}/\d{2}/\d{4} \d{2}h\d{2}", text
            )
    absolute = html(client.get(site.article_url(base, article_with(site, image_ref="absolute"))))
    assert (
        absolute.css_first("#parent-fieldname-text img")
        .attributes["src"]
        .startswith(f"{base}/www.gov.br/mec/resolveuid/")
    )
    video = html(client.get(site.article_url(base, article_with(site, video=True))))
    assert "/www.youtube.com/embed/" in video.css_first("iframe").attributes["src"]


def test_images_and_misc_routes(mirror):
    site, base, client = mirror
    assert client.get(f"{base}/www.gov.br/mec/resolveuid/{'0' * 32}/@@images/image").status_code == 404
    png = client.get(f"{base}/www.gov.br/mec/imagens/x.png")
    assert png.headers["content-type"] == "image/png" and png.content.startswith(b"\x89PNG")
    assert client.head(f"{base}/www.gov.br/mec/imagens/foto.jpg").status_code == 200
    assert client.get(f"{base}/health").json()["status"] == "ok"
    robots = client.get(f"{base}/www.gov.br/robots.txt").text
    assert "Disallow: /www.gov.br/mec/privado" in robots and "User-agent: *" in robots
    assert client.get(f"{base}/robots.txt").text == robots
    assert client.get(f"{base}/www.gov.br/nope/pt-br/assuntos/noticias").status_code == 404
    assert client.get(f"{listing(base, 'mec')}/no-such-slug").status_code == 404
    assert make_jpeg(0)[:2] == b"\xff\xd8"
    assert [b[0] for b in parse_blocks(CONTENT)] == ["p", "h", "ul", "p"]


def test_listing_path_from_registry(corpus, extra_dir):
    class Ag:
        url = "https://www.gov.br/mec/pt-br/centrais-de-conteudo/noticias"
        name = "Ministério da Educação"

    site = Site(corpus, registry={"mec": Ag()})
    server, base = start_in_thread(site)
    try:
        r = httpx.get(f"{base}/www.gov.br/mec/pt-br/centrais-de-conteudo/noticias")
        link = html(r).css_first("a.summary.url").attributes["href"]
        assert link == f"{base}/www.gov.br/mec/pt-br/centrais-de-conteudo/noticias/medida-34-mec"
        assert httpx.get(link).status_code == 200
        assert httpx.get(listing(base, "saude")).status_code == 200  # default path for others
    finally:
        server.shutdown()
        server.server_close()


# -- Plone 6 JSON ----------------------------------------------------------------------------


def test_plone_search_shape_and_pagination(mirror):
    site, base, client = mirror
    api = f"{base}/www.gov.br/mec/++api++/pt-br/assuntos/noticias/@search"
    query = "portal_type=News+Item&sort_on=effective&sort_order=descending&b_start=0&b_size=25&fullobjects=1"
    data = client.get(f"{api}?{query}").json()
    assert data["items_total"] == PER_AGENCY and len(data["items"]) == 25 and data["@id"]
    item = data["items"][0]
    assert item["@id"] == f"{listing(base, 'mec')}/medida-34-mec"
    assert (
        item["title"]
        and item["description"] == "Linha fina 34"
        and item["Subject"] == ["educação", "escolas"]
    )
    assert item["effective"].startswith("2026-") and item["modified"]
    assert item["image"]["download"].startswith(item["@id"] + "/@@images/")
    assert client.get(item["image"]["download"]).headers["content-type"] == "image/jpeg"
    assert item["blocks_layout"]["items"] == list(item["blocks"])
    # Every body shape real Plone 6 sites serve: slate blocks, a text block with an HTML string, textBlock
    # blocks with plain strings, no text blocks but the item's text as RichText or as a plain string.
    search = "++api++/pt-br/assuntos/noticias/@search?fullobjects=1&b_size=100"
    everything = [
        i
        for key in ("mec", "saude", "turismo")
        for i in client.get(f"{base}/www.gov.br/{key}/{search}").json()["items"]
    ]
    kinds = {b["@type"] for i in everything for b in i["blocks"].values()}
    assert {"slate", "text", "textBlock"} <= kinds
    slate = next(b for i in everything for b in i["blocks"].values() if b["@type"] == "slate")
    assert slate["plaintext"]
    text = next(b for i in everything for b in i["blocks"].values() if b["@type"] == "text")
    assert isinstance(text["text"], str) and text["text"].startswith("<p>")
    block = next(b for i in everything for b in i["blocks"].values() if b["@type"] == "textBlock")
    assert isinstance(block["text"], str) and "<" not in block["text"]
    assert any(isinstance(i.get("text"), dict) and i["text"]["data"].startswith("<p>") for i in everything)
    assert any(isinstance(i.get("text"), str) for i in everything)
    for raw in everything:  # no variant loses text
        parsed = parse_plone6_item(raw, api)
        assert "destaque" in parsed.content and "item dois" in parsed.content and "final" in parsed.content
        assert parsed.id_date == raw["effective"]  # the API's own string (UTC, +00:00)
    page2 = client.get(data["batching"]["next"]).json()
    assert len(page2["items"]) == 10 and "next" not in page2["batching"]
    assert page2["items"][-1]["@id"].endswith("/medida-0-mec")
    same = client.get(f"{api}?{query.replace('+', '%20')}").json()
    assert same["items_total"] == PER_AGENCY
    summary = client.get(f"{api}?portal_type=News%20Item&b_size=100").json()
    assert "batching" not in summary and "blocks" not in summary["items"][0]
    assert client.get(f"{api}?portal_type=Document").json()["items_total"] == 0
    one = client.get(f"{base}/www.gov.br/mec/++api++/pt-br/assuntos/noticias/medida-3-mec").json()
    assert one["id"] == "medida-3-mec" and "blocks" in one


# -- EBC -----------------------------------------------------------------------------------------


def test_ebc_pages(mirror):
    site, base, client = mirror
    when = r"\d{2}/\d{2}/\d{4} - \d{2}:\d{2}"
    # Agência Brasil: a.capa-noticia cards (plus a "Leia mais" button to the same URL), ?page=N
    host = "agenciabrasil.ebc.com.br"
    tree = html(client.get(f"{base}/{host}/ultimas"))
    cards = [a for a in tree.css("a.capa-noticia") if a.css_first("h4")]
    assert len(cards) == 10 and all("/noticia/" in a.attributes["href"] for a in cards)
    assert re.fullmatch(when, cards[0].parent.css_first("div.data").text())
    assert tree.css_first("ul.pagination a.page-link").attributes["href"] == f"{base}/{host}/ultimas?page=1"
    assert len(html(client.get(f"{base}/{host}/ultimas?page=1")).css("a.capa-noticia h4")) == 2
    assert not html(client.get(f"{base}/{host}/ultimas?page=2")).css("a.capa-noticia")
    page = html(client.get(cards[0].attributes["href"]))
    assert page.css_first("h1.titulo-materia").text() and page.css("div.conteudo-noticia p")
    assert re.match(r"Publicado em " + when, page.css_first("div.data").text())
    ld = page.css_first('script[type="application/ld+json"]')  # JSON-LD variants as on gov.br
    if ld is not None:
        assert '"@type": "NewsArticle"' in ld.text()
        assert re.search(r'"datePublished": "[0-9T:-]+-03:00"', ld.text())
    # TV Brasil: div.view-ultimas rows with h3.heading links; articles: h4.txtNoticias, bare h1, h5 "No AR em"
    host = "tvbrasil.ebc.com.br"
    tree = html(client.get(f"{base}/{host}/ultimas"))
    rows = tree.css("div.view-ultimas div.views-row")
    assert len(rows) == 10 and all(r.css_first("h3.heading a") for r in rows)
    assert re.fullmatch(when, rows[0].css_first("span.date-display-single").text())
    assert tree.css_first("ul.pager li.pager-next a").attributes["href"] == f"{base}/{host}/ultimas?page=1"
    assert html(client.get(f"{base}/{host}/ultimas?page=5")).css_first("div.view-ultimas div.view-empty")
    page = html(client.get(rows[0].css_first("h3.heading a").attributes["href"]))
    assert page.css_first("h4.txtNoticias a").text() and page.css_first("h1").attributes.get("class") is None
    assert re.fullmatch("No AR em " + when, page.css_first("h5").text()) and page.css("article p")
    assert "agencia_brasil" in site.agency_keys() and "tvbrasil" in site.agency_keys()  # production's keys


# -- caching ---------------------------------------------------------------------------------


def test_conditional_get_and_head(mirror):
    site, base, client = mirror
    url = f"{listing(base, 'mec')}/medida-5-mec"
    r = client.get(url)
    etag, lm = r.headers["etag"], r.headers["last-modified"]
    assert client.get(url, headers={"If-None-Match": etag}).status_code == 304
    assert client.get(url, headers={"If-Modified-Since": lm}).status_code == 304
    assert client.get(url, headers={"If-Modified-Since": "Mon, 01 Jan 2024 00:00:00 GMT"}).status_code == 200
    assert client.get(url, headers={"If-None-Match": '"other"'}).status_code == 200
    head = client.head(url)
    assert head.status_code == 200 and head.content == b"" and head.headers["etag"] == etag
    site.edit("mec", "medida-5-mec", title="Título corrigido")
    r2 = client.get(url, headers={"If-None-Match": etag})
    assert r2.status_code == 200 and r2.headers["etag"] != etag and "Título corrigido" in r2.text
    assert client.get(url, headers={"If-Modified-Since": lm}).status_code == 200


# -- faults ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind,status", [("404", 404), ("410", 410), ("503", 503)])
def test_status_faults_with_count(mirror, kind, status):
    _, base, client = mirror
    url = listing(base, "mec")
    fault(client, base, path_prefix="/www.gov.br/mec/", fault=kind, count=2)
    assert [client.get(url).status_code for _ in range(3)] == [status, status, 200]
    assert client.get(listing(base, "mds")).status_code == 200


def test_429_retry_after_and_reset(mirror):
    _, base, client = mirror
    fault(client, base, path_prefix="/www.gov.br/mec", fault="429", retry_after=7, count=None)
    for _ in range(3):
        r = client.get(listing(base, "mec"))
        assert r.status_code == 429 and r.headers["retry-after"] == "7"
    assert client.get(f"{base}/_control/state").json()["faults"][0]["fault"] == "429"
    control(client, base, "reset")
    assert client.get(listing(base, "mec")).status_code == 200


@pytest.mark.parametrize("status", [403, 503])
def test_anti_bot(mirror, status):
    _, base, client = mirror
    fault(client, base, path_prefix="/www.gov.br/saude/", fault="anti_bot", status=status)
    r = client.get(listing(base, "saude"))
    assert r.status_code == status and "Just a moment..." in r.text
    assert "challenge-platform" in r.text and "cf-browser-verification" in r.text
    assert r.headers["server"] == "cloudflare"


def test_redirect_loop(mirror):
    _, base, client = mirror
    fault(client, base, path_prefix="/www.gov.br/mec/", fault="redirect_loop")
    with pytest.raises(httpx.TooManyRedirects):
        client.get(listing(base, "mec"), follow_redirects=True)


def test_slow(mirror):
    _, base, client = mirror
    fault(client, base, path_prefix="/www.gov.br/mec/", fault="slow", delay=1.0, chunks=4, count=1)
    with client.stream("GET", listing(base, "mec")) as r:
        pieces = [piece for piece in r.iter_raw() if piece]
    assert r.status_code == 200
    body = b"".join(pieces)
    assert len(pieces) >= 2 and b"tileItem" in body  # trickled: the body came in separate pieces
    assert body == client.get(listing(base, "mec")).content  # the whole page; count=1: used up
    fault(client, base, path_prefix="/www.gov.br/mec/", fault="slow", delay=2.0, chunks=2, count=1)
    with pytest.raises(httpx.ReadTimeout):
        client.get(listing(base, "mec"), timeout=httpx.Timeout(5, read=0.3))


def test_oversized(mirror):
    _, base, client = mirror
    fault(client, base, path_prefix="/www.gov.br/mec/", fault="oversized", count=1)
    assert int(client.head(listing(base, "mec")).headers["content-length"]) == 12 * 1024 * 1024
    fault(
        client, base, path_prefix="/www.gov.br/mec/", fault="oversized", mb=1, content_length=False, count=1
    )
    with client.stream("GET", listing(base, "mec")) as r:
        assert "content-length" not in r.headers
        total = sum(len(c) for c in r.iter_bytes())
    assert total == 1024 * 1024


def test_broken_encoding_and_malformed_jsonld(mirror):
    site, base, client = mirror
    a = article_with(site, jsonld="present")
    url = site.article_url(base, a)
    fault(client, base, path_prefix="/www.gov.br/mec/", fault="broken_encoding", count=1)
    r = client.get(url)
    assert "utf-8" in r.headers["content-type"]
    with pytest.raises(UnicodeDecodeError):
        r.content.decode("utf-8")
    fault(client, base, path_prefix="/www.gov.br/mec/", fault="malformed_jsonld", count=1)
    client.get(listing(base, "mec"))  # listings do not consume an article-only fault
    raw = re.findall(r'<script type="application/ld\+json">(.*?)</script>', client.get(url).text)[-1]
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)
    raw = re.findall(r'<script type="application/ld\+json">(.*?)</script>', client.get(url).text)[-1]
    assert json.loads(raw)["headline"] == a.title


def test_image_faults(mirror):
    site, base, client = mirror
    img = f"{base}/www.gov.br/mec/imagens/foto.jpg"
    fault(client, base, path_prefix="/www.gov.br/mec/", fault="head_405")
    assert client.get(listing(base, "mec")).status_code == 200
    assert client.head(listing(base, "mec")).status_code == 200
    r = client.head(img)
    assert r.status_code == 405 and r.headers["allow"] == "GET"
    assert client.get(img).status_code == 200
    fault(client, base, path_prefix="/www.gov.br/mec/imagens", fault="broken_image", count=1)
    assert client.get(listing(base, "mec")).status_code == 200
    assert client.get(img).status_code == 404 and client.get(img).status_code == 200


def test_faults_file_and_validation(tmp_path, corpus, extra_dir):
    spec = tmp_path / "faults.json"
    spec.write_text(json.dumps({"faults": [{"path_prefix": "/www.gov.br/mds/", "fault": "410"}]}))
    site = Site(corpus, registry={})
    server, base = start_in_thread(site, faults=Faults.from_file(spec))
    try:
        with httpx.Client() as client:
            assert client.get(listing(base, "mds")).status_code == 410
            assert control(client, base, "fault", {"fault": "bogus"}).status_code == 400
            control(client, base, "fault", {"clear": True})
            assert client.get(listing(base, "mds")).status_code == 200
            control(client, base, "reset")  # reset restores the startup faults
            assert client.get(listing(base, "mds")).status_code == 410
    finally:
        server.shutdown()
        server.server_close()


# -- control API -------------------------------------------------------------------------------


def test_publish_edit_remove(mirror):
    site, base, client = mirror
    r = control(
        client,
        base,
        "publish",
        {
            "agency": "mec",
            "title": "Nova escola técnica inaugurada",
            "content": "Texto novo.\n\nSegundo parágrafo.",
            "subtitle": "Resumo",
        },
    )
    assert r.status_code == 201
    url = r.json()["url"]
    assert url == f"{listing(base, 'mec')}/nova-escola-tecnica-inaugurada"
    top = html(client.get(listing(base, "mec"))).css_first("article.tileItem a.summary")
    assert top.attributes["href"] == url
    before = client.get(url)
    r = control(
        client,
        base,
        "edit",
        {
            "agency": "mec",
            "slug": "nova-escola-tecnica-inaugurada",
            "title": "Nova escola técnica é inaugurada",
            "content": "Texto revisto.",
        },
    )
    assert r.status_code == 200
    after = client.get(url)
    assert (
        "Nova escola técnica é inaugurada" in after.text and after.headers["etag"] != before.headers["etag"]
    )
    assert after.headers["last-modified"] != before.headers["last-modified"]
    assert control(client, base, "edit", {"agency": "mec", "slug": "nope", "title": "x"}).status_code == 404
    assert (
        control(
            client, base, "remove", {"agency": "mec", "slug": "nova-escola-tecnica-inaugurada"}
        ).status_code
        == 200
    )
    assert client.get(url).status_code == 404
    assert url not in client.get(listing(base, "mec")).text
    control(client, base, "remove", {"agency": "mec", "slug": "medida-1-mec", "status": 410})
    assert client.get(f"{listing(base, 'mec')}/medida-1-mec").status_code == 410
    state = client.get(f"{base}/_control/state").json()
    assert state["removed"] == {"mec/medida-1-mec": 410, "mec/nova-escola-tecnica-inaugurada": 404}
    assert control(client, base, "publish", {"agency": "Bad Key!", "title": "x"}).status_code == 400
    control(client, base, "reset")
    assert client.get(f"{listing(base, 'mec')}/medida-1-mec").status_code == 200
    assert client.get(url).status_code == 404


def test_removed_status_410_and_tick(corpus, extra_dir):
    site = Site(corpus, registry={}, removed_status=410, hold_back=0.1, seed=3)
    held = site.state()["held_back"]
    assert held == round(len(AGENCIES) * PER_AGENCY * 0.1)
    server, base = start_in_thread(site)
    try:
        with httpx.Client() as client:
            site.remove("mec", "medida-2-mec")
            assert client.get(f"{listing(base, 'mec')}/medida-2-mec").status_code == 410
            result = control(client, base, "tick").json()
            assert result["published"] and result["edited"]
            agency, slug = result["published"].split("/")
            assert client.get(f"{listing(base, agency)}/{slug}").status_code == 200
            assert site.state()["held_back"] == held - 1
    finally:
        server.shutdown()
        server.server_close()
    again = Site(corpus, registry={}, hold_back=0.1, seed=3)
    assert again.tick() == Site(corpus, registry={}, hold_back=0.1, seed=3).tick()


# -- DGB_MIRROR_EXTRA --------------------------------------------------------------------------


def test_extra_articles(mirror, extra_dir, caplog):
    site, base, client = mirror
    caplog.set_level(logging.WARNING, logger="dgb_dev.mirror")
    assert "orgao-novo" not in site.agency_keys()
    (extra_dir / "one.json").write_text(
        json.dumps(
            {
                "agency": "mec",
                "title": "Artigo extra do MEC",
                "content": "Um.\n\nDois.",
                "published_at": "2030-01-01T10:00:00-03:00",
                "tags": ["extra"],
            }
        ),
        encoding="utf-8",
    )
    lines = [
        json.dumps(
            {
                "agency": "orgao-novo",
                "title": "Primeira notícia do órgão novo",
                "content": "## Título\n\nTexto.",
                "published_at": "2029-05-05T09:30:00-03:00",
                "url_slug": "primeira",
            }
        ),
        "{not json",
        json.dumps({"agency": "mec", "title": "Sem data", "content": "x"}),
    ]
    (extra_dir / "many.jsonl").write_text("\n".join(lines), encoding="utf-8")
    (extra_dir / "broken.json").write_text("{oops", encoding="utf-8")
    top = html(client.get(listing(base, "mec"))).css_first("article.tileItem a.summary")
    assert top.text() == "Artigo extra do MEC"
    page = html(client.get(top.attributes["href"]))
    assert page.css_first("h1.documentFirstHeading").text() == "Artigo extra do MEC"
    assert [p.text() for p in page.css("#parent-fieldname-text p")][:2] == ["Um.", "Dois."]
    novo = html(client.get(listing(base, "orgao-novo")))
    link = novo.css_first("a[href$='/primeira']")
    assert link is not None
    assert html(client.get(link.attributes["href"])).css_first("#parent-fieldname-text h2").text() == "Título"
    assert "orgao-novo" in site.agency_keys() and "orgao-novo" in site.unknown_agency_keys()
    warnings = " ".join(r.getMessage() for r in caplog.records)
    assert "many.jsonl line 2" in warnings and "many.jsonl line 3" in warnings and "broken.json" in warnings
    # a file added while running is served from the next request on
    (extra_dir / "later.json").write_text(
        json.dumps(
            {
                "agency": "mec",
                "title": "Chegou depois",
                "content": "Texto.",
                "published_at": "2031-01-01T10:00:00-03:00",
                "url_slug": "chegou-depois",
            }
        ),
        encoding="utf-8",
    )
    assert html(client.get(listing(base, "mec"))).css_first("a.summary").text() == "Chegou depois"
    assert client.get(f"{listing(base, 'mec')}/chegou-depois").status_code == 200
    (extra_dir / "later.json").unlink()
    assert client.get(f"{listing(base, 'mec')}/chegou-depois").status_code == 404


# -- CLI -------------------------------------------------------------------------------------------


def test_cli_refuses_non_loopback(capsys):
    from dgb_dev.mirror import cli

    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    args = parser.parse_args(["mirror", "serve", "--host", "0.0.0.0", "--port", "0"])
    assert args.func(args) == 2
    assert "non-loopback" in capsys.readouterr().err
    with pytest.raises(ValueError):
        start_in_thread(Site(None, registry={}), host="0.0.0.0")


# -- contract with the project's own parsers ---------------------------------------------------


def test_project_parsers_read_the_mirror(mirror):
    parsers = pytest.importorskip("dgb.scraper.parsers")
    site, base, client = mirror
    for agency in AGENCIES:
        url = listing(base, agency)
        source, page = parsers.parse_any_listing(client.get(url).text, url, agency)
        assert source == "classic" and len(page.items) == 30 and page.next_url.endswith("b_start:int=30")
        first = page.items[0]
        assert (
            first.url == f"{url}/medida-34-{agency}"
            and first.published_at
            and first.summary == "Linha fina 34"
        )
        api = (
            f"{base}/www.gov.br/{agency}/++api++/pt-br/assuntos/noticias/@search?portal_type=News Item"
            "&sort_on=effective&sort_order=descending&b_start=0&b_size=25&fullobjects=1"
        )
        source, page = parsers.parse_any_listing(client.get(api).text, api, agency)
        assert source == "plone6" and len(page.items) == 25 and page.next_url
        assert page.items[0].url == first.url and page.items[0].tags == ["educação", "escolas"]
    for a in site.articles("mec") + site.articles("saude"):
        url = site.article_url(base, a)
        art = parsers.parse_article_html(client.get(url).text, url, a.agency)
        assert (art.title, art.subtitle, art.category, art.tags) == (
            a.title,
            a.subtitle,
            a.category,
            list(a.tags),
        )
        assert abs((art.published_at - a.published_at).total_seconds()) < 60  # bylines have no seconds
        assert "Assessoria" not in art.content and "destaque" in art.content
        assert bool(art.image_url) == bool(a.image_url) and bool(art.video_url) == article_variant(a).video
    for host in ("agenciabrasil.ebc.com.br", "tvbrasil.ebc.com.br"):
        url = f"{base}/{host}/ultimas"
        source, page = parsers.parse_any_listing(client.get(url).text, url)
        assert source == "ebc" and len(page.items) == 10 and page.next_url == f"{url}?page=1"
        key = {"agenciabrasil.ebc.com.br": "agencia_brasil", "tvbrasil.ebc.com.br": "tvbrasil"}[host]
        by_title = {a.title: a for a in site.articles(key)}
        while url:  # every listing page (production asks ?page=N+1 until a page has no items)
            source, page = parsers.parse_any_listing(client.get(url).text, url)
            for item in page.items:
                a = by_title[item.title]
                resp = client.get(item.url)
                assert parsers.detect_source(item.url, resp.text) == "ebc"
                art = parsers.parse_ebc_article(resp.text, item.url)
                v = article_variant(a)
                assert (art.agency, art.title, art.category) == (key, a.title, "Notícias")
                assert art.tags == list(a.tags)
                assert abs((art.published_at - a.published_at).total_seconds()) < 60
                # id_date: JSON-LD's string when production can read it, else the text date at -03:00
                pub = a.published_at.astimezone(BRT)
                expected = pub.isoformat() if v.jsonld == "present" else pub.replace(second=0).isoformat()
                assert art.id_date == expected, (v, art.id_date)
                assert "destaque" in art.content and "item dois" in art.content
                assert "Restrição" not in art.content
                assert bool(art.image_url) == bool(a.image_url)
                if key == "tvbrasil":
                    assert art.editorial_lead == (a.category or "Repórter Brasil")
                    assert bool(art.video_url) == v.video
                    assert not art.video_url or art.video_url.endswith(".mp4")
                elif a.image_url:
                    assert art.image_url == site.image_src(base, a)  # data-echo / noscript / src
            url = page.next_url
