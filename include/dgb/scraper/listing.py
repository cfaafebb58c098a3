"""Classic gov.br (Plone 5 "Portal Padrão") news listings.

Shapes tried in order (the first that yields items wins):

1. ``article.tileItem`` (normally inside ``div#content-core``): ``span.subtitle`` category,
   ``h2.tileHeadline > a[href]`` title and URL, ``p.tileBody span.description`` summary,
   ``span.documentByLine`` date ``DD/MM/YYYY`` with optional ``16h40`` (icons and a trailing type
   word such as "Notícia" are ignored), optional ``div.tileImage img``;
2. ``ul.noticias > li``; 3. ``div.entries > article.entry``; 4. ``div#content-core > div.item``.

Links that are navigation (:func:`is_navigation_link`: classes such as ``nav-link``, ``menu``,
``btn``, ``button``, ``pagination``; texts such as "Menu", "Clique aqui", "Leia mais") and
sharing/pagination URLs are never taken as items: an item's title link is its first other link.

Next page: ``ul.paginacao.listingBar li a.proximo`` (or rel=next / ``.next`` links), else the
smallest ``?b_start:int=N`` link beyond the current offset.

Items and a next-page link off the agency's site (another host, an internal address, ``file://``,
``javascript:``...) are dropped and counted (:func:`dgb.scraper.sites.keep_on_site`).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

from selectolax.lexbor import LexborHTMLParser, LexborNode

from dgb.scrape_errors import AntiBotError, EmptyContentError, HtmlChangedError, detect_anti_bot
from dgb.scraper.dates import parse_br_datetime, parse_iso_datetime
from dgb.scraper.markup import absolute_url, first_text, parse_html, text_of
from dgb.scraper.models import ListingItem, ListingPage
from dgb.scraper.sites import keep_on_site, own_sites, unresolved_link
from dgb.textfold import ascii_fold

ITEM_SHAPES: tuple[str, ...] = (
    "article.tileItem",
    "ul.noticias > li",
    "div.entries > article.entry",
    "div#content-core > div.item",
)
_TITLE_LINKS = (
    "h2.tileHeadline a[href]",
    "a.summary.url[href]",
    ".tileHeadline a[href]",
    "h2 a[href]",
    "h3 a[href]",
    "h4 a[href]",
    ".titulo a[href]",
    "a.titulo[href]",
    "a[href]",
)
_DATE_NODES = (
    "span.documentByLine",
    ".documentByLine",
    "span.data",
    ".data",
    ".date",
    ".datas",
    "span.summary-view-icon",
)
_NEXT_LINKS = (
    "ul.paginacao.listingBar li a.proximo[href]",
    ".listingBar a.proximo[href]",
    "a.proximo[href]",
    'a[rel="next"][href]',
    ".listingBar .next a[href]",
    "li.next a[href]",
    "a.next[href]",
)
# Links that are never news items: sharing, pagination, menus, in-page actions.
_NOT_ITEM = re.compile(
    r"(?i)facebook\.com/sharer|twitter\.com/intent|x\.com/intent|api\.whatsapp|whatsapp://|"
    r"linkedin\.com/share|b_start:int=|[?&]page=\d|/@@|/rss(\.xml)?$|/sendto_form"
)
# A class token (or a "-"/"_" separated part of one) that marks navigation: ``nav``, ``navbar``,
# ``nav-link``, ``menu-item``, ``btn-primary``, ``button``, ``pagination``, ``pager``, share bars...
_NAV_CLASS = re.compile(
    r"(?i)(?:^|[-_])(?:nav\w*|menu\w*|btn\w*|button\w*|pagina\w*|pager\w*|listingbar|breadcrumbs?|"
    r"share\w*|social\w*|compartilh\w*|proximo|anterior|skip\w*)(?:$|[-_])"
)
# Link texts that are navigation, not headlines ("Menu", "Clique aqui", "Leia mais" ...), compared
# without accents, case and trailing punctuation/arrows.
_NAV_TEXTS = frozenset(
    {
        "menu",
        "abrir menu",
        "fechar menu",
        "clique aqui",
        "clique aqui para saber mais",
        "leia mais",
        "leia mais noticias",
        "saiba mais",
        "veja mais",
        "ver mais",
        "ver todas",
        "ver todas as noticias",
        "mais noticias",
        "continue lendo",
        "continuar lendo",
        "acesse",
        "acessar",
        "acesse aqui",
        "aqui",
        "proximo",
        "proxima",
        "anterior",
        "voltar",
        "voltar ao topo",
        "ir para o topo",
        "topo",
        "inicio",
        "pagina inicial",
        "ir para o conteudo",
        "pular para o conteudo",
        "compartilhe",
        "compartilhar",
    }
)
_NAV_TEXT_TRIM = re.compile(r"^[\s\W_]+|[\s\W_]+$")


def _fold(text: str) -> str:
    return " ".join(_NAV_TEXT_TRIM.sub("", ascii_fold(text).lower()).split())


def is_navigation_link(link: LexborNode, item: LexborNode | None = None) -> bool:
    """True for a link that is navigation, not a news item.

    Navigation: a class token of the link, or of an ancestor up to and including ``item`` (the
    listing entry; without it, up to ``body``), looks like navigation (:data:`_NAV_CLASS`:
    ``nav...``, ``menu...``, ``btn...``, ``button``, ``pagination``, ``pager``, share/social bars,
    ``proximo``/``anterior``); the link sits in a ``nav`` element within the item; or its whole text
    is a navigation phrase such as "Menu", "Clique aqui", "Leia mais" (:data:`_NAV_TEXTS`).
    """
    node: LexborNode | None = link
    while node is not None and node.tag != "body":
        if node.tag == "nav" or any(
            _NAV_CLASS.search(token) for token in (node.attributes.get("class") or "").split()
        ):
            return True
        if item is not None and node.mem_id == item.mem_id:
            break
        node = node.parent
    text = text_of(link) or " ".join((link.attributes.get("title") or "").split())
    return _fold(text) in _NAV_TEXTS


def _is_item_link(link: LexborNode, item: LexborNode) -> bool:
    href = (link.attributes.get("href") or "").strip()
    if not href or href.startswith("#") or _NOT_ITEM.search(href):
        return False
    if is_navigation_link(link, item):
        return False
    return bool(text_of(link) or link.attributes.get("title"))


def _item_date(item: LexborNode):
    stamp = item.css_first("time[datetime]")
    if stamp is not None and (dt := parse_iso_datetime(stamp.attributes.get("datetime"))):
        return dt
    byline = first_text(item, *_DATE_NODES, sep=" ")
    return parse_br_datetime(byline if byline else text_of(item, " "))


def _parse_item(item: LexborNode, page_url: str, agency: str | None) -> ListingItem | None:
    link = next((a for sel in _TITLE_LINKS for a in item.css(sel) if _is_item_link(a, item)), None)
    if link is None:
        return None
    href = link.attributes.get("href")
    url = absolute_url(href, page_url, agency) or unresolved_link(href)  # dropped as off-site
    title = text_of(link) or " ".join((link.attributes.get("title") or "").split())
    if not url or not title:
        return None
    image = item.css_first("div.tileImage img[src], img[src]")
    return ListingItem(
        title=title,
        url=url,
        published_at=_item_date(item),
        category=first_text(item, "span.subtitle", ".subtitulo-noticia", ".categoria-noticia", ".chapeu"),
        summary=first_text(
            item,
            "p.tileBody span.description",
            "span.description",
            "p.tileBody",
            "p.description",
            ".descricao",
            sep=" ",
        ),
        image_url=absolute_url(image.attributes.get("src"), page_url, agency) if image is not None else None,
    )


def _offset(url: str) -> int:
    values = parse_qs(urlsplit(url).query).get("b_start:int") or ["0"]
    try:
        return int(values[0])
    except ValueError:
        return 0


def next_page_url(tree: LexborHTMLParser, page_url: str) -> str | None:
    """URL of the next listing page, or None on the last page."""
    for selector in _NEXT_LINKS:
        node = tree.css_first(selector)
        if node is not None and (url := absolute_url(node.attributes.get("href"), page_url)):
            return url
    current = _offset(page_url)
    later = [
        (off, url)
        for a in tree.css('a[href*="b_start:int="]')
        if (url := absolute_url(a.attributes.get("href"), page_url)) and (off := _offset(url)) > current
    ]
    return min(later)[1] if later else None


def parse_listing_page(
    html: str, base_url: str, agency: str | None = None, sites: frozenset[str] | None = None
) -> ListingPage:
    """Items and next-page URL of a classic listing page.

    Items and a next-page link not on ``sites`` (default: the site of ``base_url``, see
    :func:`dgb.scraper.sites.own_sites`) are dropped and counted in ``off_site_dropped``.

    Raises ``anti_bot`` for challenge pages, ``empty_content`` for a blank document and
    ``html_changed`` when no known listing shape (nor ``div#content-core``) is present. A valid
    listing with no entries (``div#content-core`` present, zero items) is an empty page.
    """
    if detect_anti_bot(html):
        raise AntiBotError(f"listing {base_url} is an anti-bot challenge page")
    if not html or not html.strip():
        raise EmptyContentError(f"listing {base_url} is an empty document")
    tree = parse_html(html)
    for shape in ITEM_SHAPES:
        nodes = tree.css(shape)
        if shape == "article.tileItem" and tree.css("div#content-core article.tileItem"):
            nodes = tree.css("div#content-core article.tileItem")
        items: list[ListingItem] = []
        seen: set[str] = set()
        for node in nodes:
            item = _parse_item(node, base_url, agency)
            if item is not None and item.url not in seen:
                seen.add(item.url)
                items.append(item)
        if items:
            page = ListingPage(items, next_page_url(tree, base_url))
            return keep_on_site(page, own_sites(base_url) if sites is None else sites, label=base_url)
    if tree.css_first("div#content-core") is not None:
        return ListingPage([], None)
    raise HtmlChangedError(f"listing {base_url}: none of the known listing shapes ({', '.join(ITEM_SHAPES)})")


def parse_listing_html(
    html: str, base_url: str, agency: str | None = None, sites: frozenset[str] | None = None
) -> list[ListingItem]:
    """The items of a classic listing page (see :func:`parse_listing_page`)."""
    return parse_listing_page(html, base_url, agency, sites).items
