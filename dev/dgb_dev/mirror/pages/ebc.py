"""The EBC sites' pages (Agência Brasil, TV Brasil): listings and articles.

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
import json
from datetime import datetime
from typing import TYPE_CHECKING
from urllib.parse import quote

from dgb_dev.mirror.content import (
    BRT,
    EBC_NAMES,
    EBC_PAGE_SIZE,
    TV_BRASIL,
    Article,
    MirrorAgency,
    Variant,
    br_date,
    esc,
    iso_brt,
    md5_int,
    slugify,
)
from dgb_dev.mirror.pages.blocks import block_html, inline_html, parse_blocks
from dgb_dev.mirror.pages.jsonld import ldjson, with_raw_quotes

if TYPE_CHECKING:  # the Site calls these renderers with itself; only its public methods are used
    from dgb_dev.mirror.site import Site


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
            ('"' + with_raw_quotes(a.title) + '"')
            if v.jsonld == "malformed"
            else json.dumps(a.title, ensure_ascii=False)
        )
        head += ldjson(news).replace('"__HEADLINE__"', headline.replace("</", "<\\/"))
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
