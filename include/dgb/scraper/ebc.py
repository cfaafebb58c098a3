"""EBC sources: Agência Brasil and TV Brasil (``https://{agenciabrasil,tvbrasil}.ebc.com.br/ultimas``).

The markup below is the contract between these parsers and the local mirror, which renders EBC
pages with exactly these elements and classes (anything else on the page is ignored).

Listing page (``/ultimas``; pagination ``?page=N``, 0-based: the second page is ``?page=1``)::

    <div class="view view-ultimas">
      <div class="view-content">
        <div class="views-row">
          <div class="imagem"><img src="/sites/default/files/thumbnails/foto.jpg" alt=""></div>  <!-- optional -->
          <span class="chapeu">Economia</span>                                        <!-- optional -->
          <h2><a href="/economia/noticia/2026-11/ipca-15-desacelera-em-novembro">IPCA-15 desacelera</a></h2>
          <div class="resumo">Índice ficou em 0,25% ...</div>                         <!-- optional -->
          <span class="date">27/11/2026 - 14:30</span>
        </div>
        ... one div.views-row per item ...
      </div>
      <ul class="pager">
        <li class="pager-previous"><a href="/ultimas?page=0">‹ anterior</a></li>   <!-- not on page 0 -->
        <li class="pager-next"><a href="/ultimas?page=2">próxima ›</a></li>         <!-- not on the last page -->
      </ul>
    </div>

Article page::

    <head>
      <meta property="og:image" content="https://imagens.ebc.com.br/...jpg">              <!-- optional -->
      <script type="application/ld+json">{"@context": "https://schema.org", "@type": "NewsArticle",
        "headline": "...", "datePublished": "2026-11-27T14:30:00-03:00",
        "dateModified": "2026-11-27T16:05:00-03:00"}</script>                            <!-- optional -->
    </head>
    <article class="node-materia">
      <div class="editoria"><a href="/economia">Economia</a></div>          <!-- category, optional -->
      <span class="chapeu">Inflação</span>                                 <!-- editorial_lead, optional -->
      <h1 class="titulo-materia">IPCA-15 desacelera em novembro</h1>       <!-- title (required) -->
      <div class="linha-fina">Índice ficou em 0,25% ...</div>             <!-- subtitle, optional -->
      <div class="autor">Repórter da Agência Brasil</div>                  <!-- ignored -->
      <div class="post-date">Publicado em 27/11/2026 - 14:30
        <span class="atualizado">Atualizado em 27/11/2026 - 16:05</span></div>          <!-- optional span -->
      <figure class="imagem-destaque"><img src="https://imagens.ebc.com.br/...jpg" alt="...">
        <figcaption>Foto: ...</figcaption></figure>                      <!-- image_url, optional -->
      <div class="conteudo-materia">                                       <!-- content -->
        <p>...</p> <h2>...</h2> <ul>...</ul> <blockquote>...</blockquote>
        <iframe src="https://www.youtube.com/embed/ID"></iframe>           <!-- or <video><source src=...> -->
        <div class="compartilhar">Compartilhe ...</div>                    <!-- removed -->
      </div>
      <div class="tags"><a href="/tags/inflacao">Inflação</a> <a href="/tags/ipca">IPCA</a></div>  <!-- tags -->
    </article>

Dates: JSON-LD first, then "Publicado em" / "Atualizado em" in ``div.post-date`` ("27/11/2026 -
14:30", Brasília time). Image: ``figure.imagem-destaque img``, else the first body image, else
og:image. Field meaning otherwise matches :mod:`dgb.scraper.article`.
"""

from __future__ import annotations

from datetime import datetime
from urllib.parse import parse_qs, urlsplit

from dgb.scraper.article import clean_body
from dgb.scraper.dates import labelled_datetime, parse_br_datetime
from dgb.scraper.errors import AntiBotError, EmptyContentError, HtmlChangedError, detect_anti_bot
from dgb.scraper.jsonld import extract_jsonld_article
from dgb.scraper.markup import (absolute_url, absolutise_links, drop_nodes, first_text, meta_content, parse_html,
                                text_of, to_markdown)
from dgb.scraper.models import Article, ListingItem, ListingPage

EBC_HOST_SUFFIX = "ebc.com.br"


def is_ebc_url(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host == EBC_HOST_SUFFIX or host.endswith("." + EBC_HOST_SUFFIX)


EBC_AGENCY_KEYS = {"agenciabrasil": "agencia-brasil", "tvbrasil": "tv-brasil"}  # the agency catalogue's keys


def ebc_agency(url: str) -> str:
    """Default agency key of an EBC URL, as the agency catalogue names it (``agencia-brasil``, ``tv-brasil``)."""
    if not is_ebc_url(url):
        return "ebc"
    label = (urlsplit(url).hostname or "").split(".")[0]
    return EBC_AGENCY_KEYS.get(label, label)


def _page_number(url: str) -> int:
    try:
        return int((parse_qs(urlsplit(url).query).get("page") or ["0"])[0])
    except ValueError:
        return 0


def parse_ebc_listing(html: str, base_url: str) -> ListingPage:
    """Items and next page of an EBC ``/ultimas`` page (markup in the module docstring)."""
    if detect_anti_bot(html):
        raise AntiBotError(f"listing {base_url} is an anti-bot challenge page")
    tree = parse_html(html or "")
    view = tree.css_first("div.view-ultimas")
    rows = tree.css("div.view-ultimas div.views-row") or tree.css("div.views-row")
    if view is None and not rows:
        raise HtmlChangedError(f"EBC listing {base_url}: no div.view-ultimas / div.views-row")
    items, seen = [], set()
    for row in rows:
        link = row.css_first("h2 a[href]") or row.css_first("h3 a[href]")
        url = absolute_url(link.attributes.get("href"), base_url) if link is not None else None
        if not url or not (title := text_of(link)) or url in seen:
            continue
        seen.add(url)
        image = row.css_first("img[src]")
        items.append(ListingItem(
            title=title, url=url,
            published_at=parse_br_datetime(first_text(row, "span.date", ".date", sep=" ")),
            category=first_text(row, "span.chapeu", ".chapeu"),
            summary=first_text(row, "div.resumo", ".resumo", sep=" "),
            image_url=absolute_url(image.attributes.get("src"), base_url) if image is not None else None,
        ))
    next_link = tree.css_first("li.pager-next a[href]") or tree.css_first('a[rel="next"][href]')
    next_url = absolute_url(next_link.attributes.get("href"), base_url) if next_link is not None else None
    if next_url is None:
        current = _page_number(base_url)
        later = [(n, u) for a in tree.css('a[href*="page="]')
                 if (u := absolute_url(a.attributes.get("href"), base_url)) and (n := _page_number(u)) > current]
        next_url = min(later)[1] if later else None
    return ListingPage(items, next_url)


def parse_ebc_article(html: str, url: str, agency: str | None = None,
                      published_fallback: datetime | None = None) -> Article:
    """An EBC article (markup in the module docstring); ``agency`` defaults to :func:`ebc_agency`."""
    if detect_anti_bot(html):
        raise AntiBotError(f"{url} is an anti-bot challenge page")
    tree = parse_html(html or "")
    agency = agency or ebc_agency(url)
    ld = extract_jsonld_article(tree)
    title = first_text(tree, "h1.titulo-materia") or ld.headline
    body = tree.css_first("div.conteudo-materia")
    if not title:
        raise EmptyContentError(f"{url} has no article title (h1.titulo-materia)")
    post_date = first_text(tree, "div.post-date", ".post-date", sep=" ") or ""
    published = ld.published_at or labelled_datetime(post_date, "Publicado em") or parse_br_datetime(post_date)
    updated = ld.updated_at or labelled_datetime(post_date, "Atualizado em")
    video = None
    image_node = tree.css_first("figure.imagem-destaque img[src]")
    image_url = absolute_url(image_node.attributes.get("src"), url) if image_node is not None else None
    content = ""
    if body is not None:
        frame = next((f for f in body.css("iframe[src]") if "embed" in (f.attributes.get("src") or "")
                      or "youtu" in (f.attributes.get("src") or "")), None)
        source = body.css_first("video[src], video source[src]")
        video = absolute_url((frame or source).attributes.get("src"), url) if (frame or source) else None
        if image_url is None and (img := body.css_first("img[src]")) is not None:
            image_url = absolute_url(img.attributes.get("src"), url)
        drop_nodes(body.css("figcaption, .compartilhar"))
        clean_body(body)
        absolutise_links(body, url)
        content = to_markdown(body.html or "")
    if not content and not video:
        raise EmptyContentError(f"{url} has no article body (div.conteudo-materia)")
    return Article(url=url, agency=agency, title=title,
                   subtitle=first_text(tree, "div.linha-fina", ".linha-fina", sep=" "),
                   editorial_lead=first_text(tree, "span.chapeu", ".chapeu"),
                   category=first_text(tree, "div.editoria", ".editoria"),
                   tags=list(dict.fromkeys(t for a in tree.css("div.tags a") if (t := text_of(a)))),
                   published_at=published or published_fallback, updated_at=updated,
                   image_url=image_url or absolute_url(ld.image or meta_content(tree, "og:image"), url),
                   video_url=video, content=content)
