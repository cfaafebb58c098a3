"""The classic Plone pages of a gov.br agency: the news listing and the article (HTML).

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
* YouTube iframe (``B/www.youtube.com/embed/<id>``) when ``(v // 40) % 5 == 0``.

The same article's Plone JSON: :mod:`dgb_dev.mirror.pages.plone_json`. Each page sits in the
portal frame of :mod:`dgb_dev.mirror.pages.portal`.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING
from urllib.parse import quote

from dgb_dev.mirror.content import (
    GOVBR,
    PAGE_SIZE,
    Article,
    MirrorAgency,
    Variant,
    br_date,
    br_time,
    esc,
    iso_brt,
    listing_icons,
    listing_shape,
    md5_int,
)
from dgb_dev.mirror.pages.blocks import block_html, parse_blocks
from dgb_dev.mirror.pages.jsonld import ldjson, with_raw_quotes
from dgb_dev.mirror.pages.portal import portal_page

if TYPE_CHECKING:  # the Site calls these renderers with itself; only its public methods are used
    from dgb_dev.mirror.site import Site


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
        head.append(ldjson(crumbs))
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
            headline = '"' + with_raw_quotes(a.title) + '"'
        head.append(ldjson(news).replace('"__HEADLINE__"', headline.replace("</", "<\\/")))
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
