"""Page rendering of the mirror: the HTML and Plone JSON each route of :mod:`dgb_dev.mirror.site`
serves, from the content model of :mod:`dgb_dev.mirror.content`.

Classic listing shapes (``listing_shape(key)``: md5(key) first 8 hex as int, mod 10; 0-6
``tileItem``, 7 ``ul.noticias``, 8 ``div.entries``, 9 ``div.item``; ``FIXED_SHAPES`` pins a few
registry agencies so every fallback is always served). Every item has its date as
``DD/MM/YYYY`` and ``HHhMM`` in its text:

* ``tileItem``: ``div#content-core > article.tileItem`` with ``span.subtitle``,
  ``h2.tileHeadline > a.summary.url``, ``p.tileBody > span.description``, ``span.documentByLine``
  (icons ``i.icon-day``/``i.icon-hour`` + trailing "Notícia" when md5 bit ``(h // 10) % 2 == 0``,
  else plain ``DD/MM/YYYY HHhMM``), optional ``div.tileImage img``;
* ``ul.noticias``: ``ul.noticias > li`` with ``span.subtitle``, ``h2.titulo > a``,
  ``p.descricao``, ``span.data`` "DD/MM/YYYY HHhMM", optional ``img``;
* ``div.entries``: ``div.entries > article.entry`` with ``span.subtitle``,
  ``h3.entry-title > a.url``, ``p.description``, ``span.documentByLine`` "DD/MM/YYYY - HHhMM";
* ``div.item``: ``div#content-core > div.item`` with ``span.subtitle``, ``h2 > a``,
  ``p.description``, ``p.byline`` "Publicado em DD/MM/YYYY HHhMM"; the first ``div.item`` is a
  menu block (``a.btn`` "Menu", ``a.button`` "Clique Aqui") that is not a news item.

Next page: ``ul.paginacao.listingBar li a.proximo`` (``?b_start:int=N``). Outside
``div#content-core``: portal menu, breadcrumbs, a "Compartilhe:" block and a footer.

Article variants (``article_variant``; v = md5("<agency>/<slug>") as int):

* JSON-LD (``v % 10``): 0-6 valid NewsArticle (after a BreadcrumbList script), 7 malformed
  (raw unescaped quotes in ``headline``), 8-9 absent;
* byline: always ``div#plone-document-byline`` when JSON-LD is present or malformed; when absent,
  ``(v // 10) % 2`` 0 = byline div, 1 = only ``p.documentByLine`` "Publicado em DD/MM/YYYY HHhMM"
  (plus " - Atualizado em ..." once edited);
* lead image (when the article has ``image_url``): ``(v // 20) % 2`` 0 = relative
  ``resolveuid/<uid>/@@images/image``, 1 = absolute ``B/www.gov.br/<agency>/resolveuid/...``;
* YouTube iframe (``B/www.youtube.com/embed/<id>``) when ``(v // 40) % 5 == 0``;
* Plone JSON body (``(v // 200) % 8``; the shapes real Plone 6 sites serve, none losing text): 0 one
  ``text`` block whose ``text`` is an HTML string, 1 one ``textBlock`` per paragraph with a plain
  string, 2 no text blocks but the item's ``text`` RichText ``{"data": html, "content-type": ...}``,
  3 no text blocks but ``text`` as a plain string, 4-7 one ``slate`` block per paragraph / heading /
  list (``value`` and ``plaintext``); always after a ``title`` block. ``effective``/``modified``
  are UTC with ``+00:00``, as the Plone REST API writes them.

EBC pages follow the real sites' markup documented in ``dgb/scraper/ebc.py`` (``?page=N`` from 0,
10 a page; a page past the last has no items):

* Agência Brasil listing: ``div.post-item`` cards, each an ``a.capa-noticia`` link to
  ``/<section>/noticia/<YYYY-MM>/<slug>`` wrapping a lazy image (``data-echo`` + ``loading_v2.gif``),
  ``span.chapeu`` and ``h4`` title, then ``div.data`` "27/11/2026 - 14:30" and a second
  ``a.capa-noticia btn`` "Leia mais" to the same URL; ``ul.pagination`` page links. Article:
  og:image, JSON-LD NewsArticle (present/malformed/absent as on gov.br), ``h1.titulo-materia``,
  ``div.autor-noticia``, ``div.data`` "Publicado em 27/11/2026 - 14:30" (+ " Atualizado em ..."
  once edited), ``figure`` image (``(v // 1600) % 3``: ``data-echo``, ``noscript`` copy, plain
  ``src``), ``div.conteudo-noticia`` (p/h2/ul, optional YouTube iframe, a tracking-pixel
  paragraph, sometimes a "*Com informações da ..." credit line), ``div.row-tags`` ``/tags/`` links.
* TV Brasil listing: ``div.view-ultimas`` ``div.views-row`` with ``h3.heading a``, an image and
  ``span.date-display-single``; ``ul.pager``. Article: ``h4.txtNoticias a`` (the programme: the
  article's category, else "Repórter Brasil"), a bare ``h1``, ``h5`` "No AR em" with the date in
  ``span.date-display-single`` or as plain text (``(v // 4800) % 2``), a ``video`` mp4 source
  when the video variant is on, ``article`` paragraphs followed by the "*Restrição de uso",
  "Clique aqui para saber" and "Tags: ..." notices.

Each EBC host shows its own articles (agency keys whose registry URL is on that host; defaults
production's keys ``agencia_brasil``/``tvbrasil``) plus 12 corpus articles republished under that
key.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from dgb_dev.mirror.content import (
    BRT,
    EBC_NAMES,
    EBC_PAGE_SIZE,
    GOVBR,
    PAGE_SIZE,
    TV_BRASIL,
    Article,
    MirrorAgency,
    Variant,
    article_variant,
    br_date,
    br_time,
    esc,
    int_param,
    iso_brt,
    iso_utc,
    listing_icons,
    listing_shape,
    md5_int,
    mirror_url,
    slugify,
)

if TYPE_CHECKING:  # the Site calls these renderers with itself; only its public methods are used
    from dgb_dev.mirror.site import Site


# -- content: Markdown-ish text -> blocks -> HTML / Plone blocks ---------------------------------

_HEAD_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*$")
_LIST_RE = re.compile(r"^([-*•]|\d{1,3}[.)])\s+(.*)$")
_LINK_RE = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_BOLD_RE = re.compile(r"\*\*(.+?)\*\*")


def parse_blocks(text: str) -> list[tuple]:
    """``("p", text)``, ``("h", level, text)``, ``("ul"|"ol", [items])``, ``("quote", text)``."""
    blocks: list[tuple] = []
    para: list[str] = []
    items: list[str] = []
    kind = ""

    def flush() -> None:
        nonlocal kind
        if para:
            blocks.append(("p", " ".join(para)))
            para.clear()
        if items:
            blocks.append((kind, list(items)))
            items.clear()

    for raw in (text or "").replace("\r\n", "\n").split("\n"):
        line = raw.strip()
        if not line:
            flush()
        elif m := _HEAD_RE.match(line):
            flush()
            blocks.append(("h", min(4, max(2, len(m.group(1)))), m.group(2)))
        elif m := _LIST_RE.match(line):
            new_kind = "ol" if m.group(1)[0].isdigit() else "ul"
            if para or (items and kind != new_kind):
                flush()
            kind = new_kind
            items.append(m.group(2))
        elif line.startswith(">"):
            flush()
            blocks.append(("quote", line.lstrip("> ")))
        else:
            if items:
                flush()
            para.append(line)
    flush()
    return blocks


def inline_html(text: str, base: str) -> str:
    out = esc(text)
    out = _LINK_RE.sub(
        lambda m: f'<a href="{esc(mirror_url(base, html.unescape(m.group(2))))}">{m.group(1)}</a>', out
    )
    return _BOLD_RE.sub(r"<strong>\1</strong>", out)


def plain(text: str) -> str:
    return _BOLD_RE.sub(r"\1", _LINK_RE.sub(r"\1", text))


def block_html(block: tuple, base: str) -> str:
    kind = block[0]
    if kind == "p":
        return f"<p>{inline_html(block[1], base)}</p>"
    if kind == "h":
        return f"<h{block[1]}>{inline_html(block[2], base)}</h{block[1]}>"
    if kind == "quote":
        return f"<blockquote><p>{inline_html(block[1], base)}</p></blockquote>"
    lis = "".join(f"<li>{inline_html(i, base)}</li>" for i in block[1])
    return f"<{kind}>{lis}</{kind}>"


def block_slate(block: tuple) -> dict:
    kind = block[0]
    if kind in ("ul", "ol"):
        value = [
            {"type": kind, "children": [{"type": "li", "children": [{"text": plain(i)}]} for i in block[1]]}
        ]
        return {"@type": "slate", "value": value, "plaintext": "\n".join(plain(i) for i in block[1])}
    text = plain(block[-1])
    node_type = {"p": "p", "quote": "blockquote"}.get(kind, f"h{block[1] if kind == 'h' else 2}")
    return {"@type": "slate", "value": [{"type": node_type, "children": [{"text": text}]}], "plaintext": text}


def index_page(site: Site, base: str) -> str:
    links = []
    for key in site.agency_keys():
        ag = site.agency_for(key)
        links.append(f'<li><a href="{esc(site.listing_url(base, ag))}">{esc(ag.name)}</a> ({key})</li>')
    return (
        f'<!DOCTYPE html><html lang="pt-br"><head><meta charset="utf-8"><title>dgb mirror</title></head>'
        f"<body><h1>dgb mirror</h1><ul>{''.join(links)}</ul></body></html>"
    )


def home_page(site: Site, base: str, ag: MirrorAgency) -> str:
    body = f'<p><a href="{esc(site.listing_url(base, ag))}">Notícias</a></p>'
    return portal_page(base, ag, ag.name, body)


# -- classic listing ---------------------------------------------------------------------------------------


def listing(site: Site, base: str, ag: MirrorAgency, start: int) -> str:
    items = site.articles(ag.key)
    page = items[start : start + PAGE_SIZE]
    shape, icons = listing_shape(ag.key), listing_icons(ag.key)
    rendered = "\n".join(_listing_item(site, base, a, shape, icons) for a in page)
    if shape == "ul.noticias":
        rendered = f'<ul class="noticias listagem-noticias-com-foto">\n{rendered}\n</ul>'
    elif shape == "div.entries":
        rendered = f'<div class="entries">\n{rendered}\n</div>'
    elif shape == "div.item" and page:  # a menu block in the same shape as the items
        root = f"{base}/{GOVBR}/{ag.key}/pt-br"
        rendered = (
            f'<div class="item"><a class="btn btn-menu" href="{esc(root)}/assuntos">Menu</a> '
            f'<a class="button" href="{esc(root)}/canais_atendimento">Clique Aqui</a></div>\n' + rendered
        )
    if not page:
        rendered = '<p class="discreet">Não há itens nesta pasta.</p>'
    url = site.listing_url(base, ag)
    core = f'<div id="content-core">\n{rendered}\n{_pager(url, start, len(items))}\n</div>'
    content = f'<h1 class="documentFirstHeading">Notícias</h1>\n{core}\n{_share(base, url)}'
    return portal_page(base, ag, "Notícias", content, breadcrumbs=[("Notícias", None)], canonical=url)


def _listing_item(site: Site, base: str, a: Article, shape: str, icons: bool) -> str:
    url, title = esc(site.article_url(base, a)), esc(a.title)
    d, t = br_date(a.published_at), br_time(a.published_at)
    cat, desc = esc(a.category), esc(a.subtitle)
    thumb = site.thumb_src(base, a)
    if shape == "tileItem":
        img = (
            (
                f'<div class="tileImage"><a href="{url}"><img class="tileImage" src="{esc(thumb)}" '
                f'alt="{title}" width="128" height="86"></a></div>'
            )
            if thumb
            else ""
        )
        if icons:
            byline = (
                f'<span class="summary-view-icon"><i class="icon-day"></i>{d}</span> '
                f'<span class="summary-view-icon"><i class="icon-hour"></i>{t}</span> '
                f'<span class="summary-view-icon"><i class="icon-type"></i>Notícia</span>'
            )
        else:
            byline = f"{d} {t}"
        return (
            f'<article class="tileItem visualIEFloatFix tile-collective-nitf-content">{img}'
            f'<div class="tileContent"><span class="subtitle">{cat}</span>'
            f'<h2 class="tileHeadline"><a href="{url}" class="summary url">{title}</a></h2>'
            f'<p class="tileBody"><span class="description">{desc}</span></p></div>'
            f'<div class="tileInfo"><span class="documentByLine">{byline}</span></div>'
            f'<div class="visualClear"></div></article>'
        )
    img = f'<img src="{esc(thumb)}" alt="{title}">' if thumb else ""
    if shape == "ul.noticias":
        return (
            f'<li>{img}<span class="subtitle">{cat}</span><h2 class="titulo"><a href="{url}">{title}</a></h2>'
            f'<p class="descricao">{desc}</p><span class="data">{d} {t}</span></li>'
        )
    if shape == "div.entries":
        return (
            f'<article class="entry"><header><span class="subtitle">{cat}</span>'
            f'<h3 class="entry-title"><a class="url" href="{url}">{title}</a></h3></header>{img}'
            f'<p class="description">{desc}</p><span class="documentByLine">{d} - {t}</span></article>'
        )
    return (
        f'<div class="item">{img}<span class="subtitle">{cat}</span><h2><a href="{url}">{title}</a></h2>'
        f'<p class="description">{desc}</p><p class="byline">Publicado em {d} {t}</p></div>'
    )


# -- classic article ---------------------------------------------------------------------------------------


def article(site: Site, base: str, ag: MirrorAgency, a: Article, v: Variant) -> str:
    url = site.article_url(base, a)
    root = f"{base}/{GOVBR}/{ag.key}"
    pub, mod = a.published_at, a.modified_at
    img_abs = site.image_src(base, a)
    head = [
        f'<meta name="description" content="{esc(a.subtitle)}">',
        f'<meta property="og:title" content="{esc(a.title)}">',
        f'<meta property="og:url" content="{esc(url)}">',
    ]
    if v.jsonld != "absent":
        crumbs = {
            "@context": "https://schema.org",
            "@type": "BreadcrumbList",
            "itemListElement": [
                {"@type": "ListItem", "position": 1, "name": "Notícias", "item": site.listing_url(base, ag)},
                {"@type": "ListItem", "position": 2, "name": a.title, "item": url},
            ],
        }
        head.append(_ldjson(crumbs))
        news = {
            "@context": "https://schema.org",
            "@type": "NewsArticle",
            "headline": "__HEADLINE__",
            "description": a.subtitle,
            "datePublished": iso_brt(pub),
            "dateModified": iso_brt(mod),
            "mainEntityOfPage": {"@type": "WebPage", "@id": url},
            "articleSection": a.category,
            "keywords": list(a.tags),
            "image": [img_abs] if img_abs else [],
            "author": {"@type": "Organization", "name": ag.name},
            "publisher": {"@type": "Organization", "name": ag.name},
        }
        headline = json.dumps(a.title, ensure_ascii=False)
        if v.jsonld == "malformed":
            headline = '"' + _with_raw_quotes(a.title) + '"'
        head.append(_ldjson(news).replace('"__HEADLINE__"', headline.replace("</", "<\\/")))
    if v.byline == "full":
        modified = (
            f'<span class="documentModified"><span>Atualizado em</span> '
            f'<span class="value">{br_date(mod)} {br_time(mod)}</span></span>'
        )
        byline = (
            f'<div id="plone-document-byline" class="documentByLine">'
            f'<span class="documentPublished"><span>Publicado em</span> '
            f'<span class="value">{br_date(pub)} {br_time(pub)}</span></span> {modified}</div>'
        )
    else:
        later = f" - Atualizado em {br_date(mod)} {br_time(mod)}" if mod > pub else ""
        byline = f'<p class="documentByLine">Publicado em {br_date(pub)} {br_time(pub)}{later}</p>'
    body = [block_html(b, base) for b in parse_blocks(a.content)]
    if a.image_uid:
        src = site.image_src(base, a, relative=v.image_ref == "relative")
        body.insert(
            0,
            f'<figure class="image-richtext image-inline"><img src="{esc(src)}" '
            f'alt="{esc(a.title)}" class="image-inline"><figcaption>Foto: Divulgação/'
            f"{esc(ag.key.upper())}</figcaption></figure>",
        )
    if v.video:
        vid = hashlib.md5(a.uid.encode()).hexdigest()[:11]
        body.append(
            f'<p><iframe width="560" height="315" src="{base}/www.youtube.com/embed/{vid}" '
            f'title="YouTube video player" frameborder="0" allowfullscreen></iframe></p>'
        )
    phone = 2000 + md5_int(ag.key) % 8000
    body.append(
        f"<p>Assessoria de Comunicação Social - {esc(ag.name)}<br>Telefone: (61) 2030-{phone:04d}"
        f"<br>E-mail: imprensa@{esc(ag.key)}.gov.br</p>"
    )
    tags = " ".join(
        f'<span><a class="link-category" rel="tag" href="{esc(root)}/pt-br/search?origem=keyword&amp;'
        f'Subject%3Alist={quote(t)}">{esc(t)}</a></span>'
        for t in a.tags
    )
    content = "\n".join(
        [
            f'<p class="nitfSubtitle">{esc(a.category)}</p>' if a.category else "",
            f'<h1 class="documentFirstHeading">{esc(a.title)}</h1>',
            f'<div class="documentDescription">{esc(a.subtitle)}</div>' if a.subtitle else "",
            byline,
            _share(base, url),
            '<div id="content-core"><div id="parent-fieldname-text" class="parent-fieldname-text">',
            "\n".join(body),
            "</div></div>",
            (
                '<div id="category" class="keywords documentByLine"><span class="tags-label">Tags:</span>'
                f" {tags}</div>"
            )
            if a.tags
            else "",
        ]
    )
    return portal_page(
        base,
        ag,
        a.title,
        content,
        head="\n".join(head),
        canonical=url,
        breadcrumbs=[("Notícias", site.listing_url(base, ag)), (a.title, None)],
        body_class="template-view portaltype-collective-nitf-content",
    )


# -- Plone 6 JSON ------------------------------------------------------------------------------------------


def plone_search(site: Site, base: str, ag: MirrorAgency, path: str, params: Mapping[str, str]) -> dict:
    in_scope = ag.path == path or ag.path.startswith(path + "/") or path == ""
    ptype = params.get("portal_type", "News Item")
    items = site.articles(ag.key) if in_scope and ptype in ("News Item", "") else []
    if params.get("Title"):  # Plone's Title index: every word of the query in the title
        words = [w for w in re.findall(r"\w+", params["Title"].lower()) if w]
        items = [a for a in items if all(w in re.findall(r"\w+", a.title.lower()) for w in words)]
    if params.get("sort_order", "descending") in ("ascending", "asc"):
        items = items[::-1]
    start = int_param(params, "b_start")
    size = int_param(params, "b_size", default=25) or 25
    full = params.get("fullobjects") not in (None, "0", "false", "False")
    api = f"{base}/{GOVBR}/{ag.key}/++api++/{path + '/' if path else ''}@search"

    def link(n: int) -> str:
        q = "&".join(f"{quote(k, safe=':')}={quote(v)}" for k, v in {**params, "b_start": str(n)}.items())
        return f"{api}?{q}"

    out: dict[str, Any] = {"@id": link(start), "items_total": len(items)}
    if len(items) > size:
        last = ((len(items) - 1) // size) * size
        batching = {"@id": link(start), "first": link(0), "last": link(last)}
        if start + size < len(items):
            batching["next"] = link(start + size)
        if start > 0:
            batching["prev"] = link(max(0, start - size))
        out["batching"] = batching
    out["items"] = [plone_item(site, base, a, full) for a in items[start : start + size]]
    return out


def plone_item(site: Site, base: str, a: Article, full: bool) -> dict:
    url = site.article_url(base, a)
    item: dict[str, Any] = {
        "@id": url,
        "@type": "News Item",
        "title": a.title,
        "description": a.subtitle,
        "review_state": "published",
        "type_title": "Notícia",
    }
    if not full:
        return item
    item.update(
        {
            "UID": a.uid,
            "id": a.slug,
            "head_title": a.category,
            "language": "pt-br",
            "created": iso_utc(a.published_at),
            "effective": iso_utc(a.published_at),
            "modified": iso_utc(a.modified_at),
            "Subject": list(a.tags),
            "subjects": list(a.tags),
        }
    )
    if a.image_uid:
        item["image"] = {
            "download": f"{url}/@@images/image-1200-{a.image_uid[:12]}.jpeg",
            "content-type": "image/jpeg",
            "filename": f"{a.slug}.jpg",
            "width": 1200,
            "height": 675,
            "scales": {
                "thumb": {
                    "download": f"{url}/@@images/image-128-{a.image_uid[:12]}.jpeg",
                    "width": 128,
                    "height": 72,
                }
            },
        }
    else:
        item["image"] = None
    blocks_src = parse_blocks(a.content)
    ids = [
        str(uuid.UUID(hashlib.md5(f"{a.uid}/{i}".encode()).hexdigest())) for i in range(len(blocks_src) + 1)
    ]
    blocks: dict[str, Any] = {ids[0]: {"@type": "title"}}
    body = article_variant(a).plone_body
    rich = "".join(block_html(b, base) for b in blocks_src)
    if body == "text_html":  # one text block whose text is an HTML string
        blocks[ids[1]] = {"@type": "text", "text": rich}
    elif body == "textblock_plain":  # one textBlock per paragraph, plain strings
        for bid, b in zip(ids[1:], blocks_src):
            lines = b[1] if b[0] in ("ul", "ol") else [b[-1]]
            blocks[bid] = {"@type": "textBlock", "text": "\n".join(plain(line) for line in lines)}
    elif body == "item_text_rich":  # no text blocks: the item's RichText field
        item["text"] = {"data": rich, "content-type": "text/html", "encoding": "utf-8"}
    elif body == "item_text_plain":  # no text blocks: the item's text field as a plain string
        item["text"] = "\n\n".join(
            "\n".join(plain(i) for i in b[1]) if b[0] in ("ul", "ol") else plain(b[-1]) for b in blocks_src
        )
    else:
        for bid, b in zip(ids[1:], blocks_src):
            blocks[bid] = block_slate(b)
    item["blocks"] = blocks
    item["blocks_layout"] = {"items": list(blocks)}
    return item


# -- EBC ---------------------------------------------------------------------------------------------------


def ebc_listing(site: Site, base: str, ag: MirrorAgency, page: int) -> str:
    items = site.articles(ag.key)
    chunk = items[page * EBC_PAGE_SIZE : (page + 1) * EBC_PAGE_SIZE]
    url = site.listing_url(base, ag)
    more = (page + 1) * EBC_PAGE_SIZE < len(items)
    if ag.host == TV_BRASIL:
        rows = []
        for i, a in enumerate(chunk, 1):
            img, href = site.image_src(base, a), esc(site.article_url(base, a))
            rows.append(
                f'<div class="views-row views-row-{i} views-row-{"odd" if i % 2 else "even"}">'
                + (
                    f'<div class="views-field-field-imagem"><a href="{href}">'
                    f'<img src="{esc(img)}" alt=""></a></div>'
                    if img
                    else ""
                )
                + f'<h3 class="heading"><a href="{href}">{esc(a.title)}</a></h3>'
                f'<span class="date-display-single">{_ebc_when(a.published_at)}</span></div>'
            )
        prev_link, next_link = f"{esc(url)}?page={page - 1}", f"{esc(url)}?page={page + 1}"
        pager = ['<ul class="pager">']
        if page > 0:
            pager.append(f'<li class="pager-previous"><a href="{prev_link}">‹ anterior</a></li>')
        pager.append(f'<li class="pager-current">{page + 1}</li>')
        if more:
            pager.append(f'<li class="pager-next"><a href="{next_link}">próxima ›</a></li>')
        pager.append("</ul>")
        content = "".join(rows) or '<div class="view-empty">Nenhum conteúdo.</div>'
        body = (
            f'<div class="view view-ultimas view-id-ultimas view-display-id-page">'
            f'<div class="view-content">{content}</div>{"".join(pager)}</div>'
        )
        return _ebc_page(base, ag, "Últimas", body)
    cards = []
    placeholder = f"{base}/{ag.host}/themes/agenciabrasil/images/loading_v2.gif"
    for a in chunk:
        href, img = esc(site.article_url(base, a)), site.image_src(base, a)
        cards.append(
            f'<div class="post-item col-md-12"><a class="capa-noticia" href="{href}">'
            + (f'<img class="img-fluid" data-echo="{esc(img)}" src="{placeholder}" alt="">' if img else "")
            + (f'<span class="chapeu">{esc(a.category)}</span>' if a.category else "")
            + f'<h4 class="titulo-capa">{esc(a.title)}</h4></a>'
            f'<div class="data">{_ebc_when(a.published_at)}</div>'
            f'<a class="capa-noticia btn btn-link" href="{href}">Leia mais</a></div>'
        )
    item = '<li class="page-item"><a class="page-link" href="{}?page={}">{}</a></li>'
    pages = [
        item.format(esc(url), page - 1, "Anterior") if page > 0 else "",
        f'<li class="page-item active"><span class="page-link">{page + 1}</span></li>',
        item.format(esc(url), page + 1, "Próxima") if more else "",
    ]
    body = (
        f'<div class="container"><h1 class="titulo-pagina">Últimas notícias</h1>'
        f'<div class="row lista-noticias">{"".join(cards)}</div>'
        f'<nav aria-label="Paginação"><ul class="pagination">{"".join(pages)}</ul></nav></div>'
    )
    return _ebc_page(base, ag, "Últimas notícias", body)


def ebc_article(site: Site, base: str, ag: MirrorAgency, a: Article, v: Variant) -> str:
    pub, mod = a.published_at.astimezone(BRT), a.modified_at.astimezone(BRT)
    img, outlet = site.image_src(base, a), EBC_NAMES.get(ag.host, ag.name)
    head = f'<meta property="og:image" content="{esc(img)}">' if img else ""
    if v.jsonld != "absent":
        news = {
            "@context": "https://schema.org",
            "@type": "NewsArticle",
            "headline": "__HEADLINE__",
            "description": a.subtitle,
            "datePublished": iso_brt(pub),
            "dateModified": iso_brt(mod),
            "articleSection": a.category,
            "image": [img] if img else [],
            "author": {"@type": "Organization", "name": outlet},
            "publisher": {"@type": "Organization", "name": "EBC - Empresa Brasil de Comunicação"},
        }
        headline = (
            ('"' + _with_raw_quotes(a.title) + '"')
            if v.jsonld == "malformed"
            else json.dumps(a.title, ensure_ascii=False)
        )
        head += _ldjson(news).replace('"__HEADLINE__"', headline.replace("</", "<\\/"))
    paras = [block_html(b, base) for b in parse_blocks(a.content)]
    tags = [f'<a href="{base}/{ag.host}/tags/{slugify(t)}">{esc(t)}</a>' for t in a.tags]
    if ag.host == TV_BRASIL:  # TV Brasil's text is paragraphs only
        paras = [
            f"<p>{inline_html(text, base)}</p>"
            for b in parse_blocks(a.content)
            for text in (b[1] if b[0] in ("ul", "ol") else [b[-1]])
        ]
        return _ebc_page(base, ag, a.title, _tvbrasil_body(site, base, ag, a, v, paras, tags), head=head)
    later = f'<span class="atualizado"> Atualizado em {_ebc_when(mod)}</span>' if mod > pub else ""
    if v.video:
        vid = hashlib.md5(a.uid.encode()).hexdigest()[:11]
        paras.append(f'<p><iframe src="{base}/www.youtube.com/embed/{vid}" allowfullscreen></iframe></p>')
    paras.append(f'<p><img src="{base}/{ag.host}/pixel/{a.uid[:8]}.gif" width="1" height="1" alt=""></p>')
    if md5_int(a.uid, "credit") % 3 == 0:
        paras.append(f"<p>*Com informações da {esc(outlet)}</p>")
    figure = ""
    if img:
        placeholder, alt = f"{base}/{ag.host}/themes/agenciabrasil/images/loading_v2.gif", esc(a.title)
        if v.ebc_image == "data-echo":
            tag = f'<img class="img-fluid" data-echo="{esc(img)}" src="{placeholder}" alt="{alt}">'
        elif v.ebc_image == "noscript":
            tag = (
                f'<img class="img-fluid lazy" src="{placeholder}" alt="{alt}">'
                f'<noscript><img src="{esc(img)}" alt="{alt}"></noscript>'
            )
        else:
            tag = f'<img class="img-fluid" src="{esc(img)}" alt="{alt}">'
        figure = (
            f'<figure class="figure">{tag}<figcaption>Foto: Divulgação/{esc(outlet)}</figcaption></figure>'
        )
    u = quote(site.article_url(base, a), safe="")
    share = (
        f'<div class="compartilhar">Compartilhe '
        f'<a href="{base}/www.facebook.com/sharer/sharer.php?u={u}">Facebook</a> '
        f'<a href="{base}/api.whatsapp.com/send?text={u}">WhatsApp</a></div>'
    )
    body = (
        f'<div class="container"><article class="materia">'
        f'<h1 class="titulo-materia">{esc(a.title)}</h1>'
        f'<div class="autor-noticia">Repórter da {esc(outlet)}*</div>'
        f'<div class="data">Publicado em {_ebc_when(pub)}{later}</div>'
        f'{figure}{share}<div class="conteudo-noticia">{"".join(paras)}</div>'
        f'<div class="row-tags">{" ".join(tags)}</div></article></div>'
    )
    return _ebc_page(base, ag, a.title, body, head=head)


def _tvbrasil_body(
    site: Site, base: str, ag: MirrorAgency, a: Article, v: Variant, paras: list[str], tags: list[str]
) -> str:
    programme = a.category or "Repórter Brasil"
    when = _ebc_when(a.published_at)
    aired = (
        f'<h5>No AR em <span class="date-display-single">{when}</span></h5>'
        if v.tv_date == "span"
        else f"<h5>No AR em {when}</h5>"
    )
    mp4 = f"{base}/{ag.host}/sites/default/files/videos/{a.slug}.mp4"
    video = (
        f'<div class="player"><video controls><source src="{mp4}" type="video/mp4"></video></div>'
        if v.video
        else ""
    )
    notices = [
        "<p>*Restrição de uso: imagens cedidas apenas para exibição nos canais da EBC.</p>",
        "<p>Clique aqui para saber como sintonizar a TV Brasil na sua cidade.</p>",
    ]
    tag_line = f"<p>Tags: {', '.join(tags)}</p>" if tags else ""
    programme_url = f"{base}/{ag.host}/{slugify(programme)}"
    return (
        f'<div class="programa"><h4 class="txtNoticias">'
        f'<a href="{programme_url}">{esc(programme)}</a></h4></div>'
        f"<h1>{esc(a.title)}</h1>{aired}{video}"
        f"<article>{''.join(paras)}{''.join(notices)}{tag_line}</article>"
    )


def _ebc_when(dt: datetime) -> str:
    """EBC's date text: ``27/11/2026 - 14:30`` (Brasília time)."""
    return f"{br_date(dt)} - {dt.astimezone(BRT):%H:%M}"


# -- page chrome ---------------------------------------------------------------------------------


def _ldjson(obj: dict) -> str:
    text = json.dumps(obj, ensure_ascii=False).replace("</", "<\\/")
    return f'<script type="application/ld+json">{text}</script>'


def _with_raw_quotes(title: str) -> str:
    """The title with unescaped double quotes (what breaks JSON-LD in the wild)."""
    if '"' in title:
        return title
    words = title.split(" ")
    i = next((n for n, w in enumerate(words) if len(w) >= 4), 0)
    words[i] = f'"{words[i]}"'
    return " ".join(words)


def _pager(url: str, start: int, total: int) -> str:
    if total <= PAGE_SIZE:
        return ""
    lis = []
    if start > 0:
        lis.append(
            f'<li class="previous"><a class="anterior"'
            f' href="{esc(url)}?b_start:int={max(0, start - PAGE_SIZE)}">'
            f"« Anterior</a></li>"
        )
    for n, off in enumerate(range(0, total, PAGE_SIZE), 1):
        if off == start:
            lis.append(f'<li class="active"><span>{n}</span></li>')
        else:
            lis.append(f'<li><a href="{esc(url)}?b_start:int={off}">{n}</a></li>')
    if start + PAGE_SIZE < total:
        lis.append(
            f'<li class="next"><a class="proximo" href="{esc(url)}?b_start:int={start + PAGE_SIZE}">'
            f"Próximo »</a></li>"
        )
    return f'<div class="pagination"><ul class="paginacao listingBar">{"".join(lis)}</ul></div>'


def _share(base: str, url: str) -> str:
    u = quote(url, safe="")
    return (
        f'<div class="social-links documentActions"><span class="share-title">Compartilhe:</span> '
        f'<a class="share-facebook" href="{base}/www.facebook.com/sharer/sharer.php?u={u}">Facebook</a> '
        f'<a class="share-twitter" href="{base}/twitter.com/intent/tweet?url={u}">Twitter</a> '
        f'<a class="share-linkedin" href="{base}/www.linkedin.com/shareArticle?url={u}">LinkedIn</a> '
        f'<a class="share-whatsapp" href="{base}/api.whatsapp.com/send?text={u}">WhatsApp</a> '
        f'<a class="link-copy" href="{esc(url)}">Copiar link</a></div>'
    )


def portal_page(
    base: str,
    ag: MirrorAgency,
    title: str,
    content: str,
    *,
    head: str = "",
    canonical: str = "",
    breadcrumbs: Iterable[tuple[str, str | None]] = (),
    body_class: str = "template-listing_view",
) -> str:
    root = f"{base}/{GOVBR}/{ag.key}"
    menu = [
        ("Assuntos", f"{root}/pt-br/assuntos"),
        ("Notícias", f"{root}/{ag.path}"),
        ("Acesso à Informação", f"{root}/pt-br/acesso-a-informacao"),
        ("Composição", f"{root}/pt-br/composicao"),
        ("Canais de Atendimento", f"{root}/pt-br/canais_atendimento"),
    ]
    menu_html = "".join(f'<li><a href="{esc(u)}">{esc(t)}</a></li>' for t, u in menu)
    crumbs = [f'<li><a href="{esc(root)}/pt-br">Página Inicial</a></li>']
    for text, href in breadcrumbs:
        crumbs.append(
            f'<li><a href="{esc(href)}">{esc(text)}</a></li>'
            if href
            else f'<li class="active"><span>{esc(text)}</span></li>'
        )
    canon = f'<link rel="canonical" href="{esc(canonical)}">' if canonical else ""
    return f"""<!DOCTYPE html>
<html lang="pt-br" xml:lang="pt-br">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)} — {esc(ag.name)}</title>
{canon}
{head}
</head>
<body class="{body_class} site-{esc(ag.key)}">
<div id="wrapper">
<header id="header" role="banner">
<div id="barra-brasil"><a href="{base}/{GOVBR}">gov.br</a> \
<a href="{base}/{GOVBR}/pt-br/orgaos-do-governo">Órgãos do Governo</a></div>
<div id="portal-title"><a href="{esc(root)}/pt-br">{esc(ag.name)}</a></div>
<nav id="portal-globalnav" class="portal-menu"><ul>{menu_html}</ul></nav>
</header>
<main id="main" role="main"><div id="portal-column-content">
<nav class="portal-breadcrumbs" id="portal-breadcrumbs" aria-label="Você está aqui:">\
<ol>{"".join(crumbs)}</ol></nav>
<div id="content">
{content}
</div>
</div></main>
<footer id="portal-footer">
<div class="footer-links"><a href="{esc(root)}/pt-br/acesso-a-informacao">Acesso à Informação</a>
<a href="{base}/{GOVBR}/pt-br/termos-de-uso">Termos de Uso</a> \
<a href="{esc(root)}/pt-br/canais_atendimento/ouvidoria">Ouvidoria</a></div>
<p>Todo o conteúdo deste site está publicado sob a licença Creative Commons \
Atribuição-SemDerivações 3.0 Não Adaptada.</p>
</footer>
</div>
</body>
</html>
"""


def _ebc_page(base: str, ag: MirrorAgency, title: str, body: str, head: str = "") -> str:
    site = EBC_NAMES.get(ag.host, ag.name)
    sections = ["politica", "economia", "geral", "saude", "educacao", "internacional"]
    menu = "".join(f'<li><a href="{base}/{ag.host}/{s}">{s.capitalize()}</a></li>' for s in sections)
    return f"""<!DOCTYPE html>
<html lang="pt-br">
<head><meta charset="utf-8"><title>{esc(title)} | {esc(site)}</title>
{head}
</head>
<body class="html not-front">
<header class="site-header"><a class="logo" href="{base}/{ag.host}/">{esc(site)}</a>\
<nav class="menu-editorias"><ul>{menu}</ul></nav></header>
<main id="main-content">
{body}
</main>
<footer class="site-footer"><a href="{base}/www.ebc.com.br/">EBC - Empresa Brasil de Comunicação</a>
<a href="{base}/{ag.host}/termos-de-uso">Termos de uso</a></footer>
</body>
</html>
"""


def error_page(base: str, status: int) -> str:
    title = "Este conteúdo foi removido" if status == 410 else "Página não encontrada"
    return (
        '<!DOCTYPE html><html lang="pt-br"><head><meta charset="utf-8">'
        f"<title>{title} — gov.br</title></head>"
        f'<body><div id="content"><h1 class="documentFirstHeading">{title}</h1>'
        f"<p>Desculpe, não foi possível encontrar o conteúdo solicitado.</p>"
        f'<p><a href="{base}/{GOVBR}">Ir para o gov.br</a></p></div></body></html>'
    )
