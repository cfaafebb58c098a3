"""EBC sources: Agência Brasil and TV Brasil (``https://{agenciabrasil,tvbrasil}.ebc.com.br/ultimas``).

What the real sites serve, as production's EBC scraper (public repository
destaquesgovbr/scraper) reads it; only the elements named here are read, the rest of the page
is ignored. Agency keys are production's: ``agencia_brasil`` and ``tvbrasil``.

Listing pages: ``/ultimas``, then ``/ultimas?page=1``, ``?page=2`` ... (0-based). Production
does not follow a pager link: it asks for the next page number until a page has no article
links, and so does :func:`parse_ebc_listing` (``next_url`` is ``page + 1`` while the page had
items). A page after the first with no items is the end of the listing; a first page with
neither shape below is ``html_changed``.

* Agência Brasil: every article is an ``a.capa-noticia`` link (a card: the anchor wraps the
  picture and the headline) whose ``href`` holds ``/noticia/`` (``/economia/noticia/2026-11/slug``,
  relative to the host). Links repeated on the page count once. Title: the heading inside the
  anchor (``h1``-``h6``), else its ``title`` attribute, else its text. Optional: a date
  "DD/MM/YYYY - HH:MM" in the card (the anchor or its parent), a lazy-loaded ``img``.
* TV Brasil: a Drupal view ``div.view-ultimas``; every article is the link of an ``h3.heading``
  in it (``/programa/2026/11/slug``); its text is the title. Optional: the date of the
  ``div.views-row`` (``span.date-display-single`` "DD/MM/YYYY - HH:MM") and its ``img``.

Navigation links (:func:`dgb.scraper.listing.is_navigation_link`) are never items.

Agência Brasil article::

    <h1 class="titulo-materia">Título</h1>                               <!-- title -->
    <div class="autor-noticia">Repórter da Agência Brasil</div>          <!-- not stored -->
    <div class="data">Publicado em 27/11/2026 - 14:30</div>              <!-- date, Brasília time -->
    <figure><img data-echo="https://imagens.ebc.com.br/...jpg" src=".../loading_v2.gif">
      <noscript><img src="https://imagens.ebc.com.br/...jpg"></noscript></figure>   <!-- image -->
    <div class="conteudo-noticia"><p>...</p> ...</div>                   <!-- body -->
    <a href="/tags/inflacao">Inflação</a> ...                            <!-- tags, anywhere -->

TV Brasil article (programme pages)::

    <h4 class="txtNoticias"><a href="/caminhos-da-reportagem">Caminhos da Reportagem</a></h4>
                                                        <!-- editorial_lead (the programme) -->
    <h1>Título</h1>                                     <!-- title: the first h1, no class -->
    <h5>No AR em <span class="date-display-single">26/11/2026 - 22:00</span></h5>
                                                        <!-- air date: the first h5 (the span, else
                                                             the h5 text without "No AR em") -->
    <video><source src="/sites/default/files/videos/x.mp4" type="video/mp4"></video>  <!-- video -->
    <article><p>...</p> ...</article>                   <!-- body: the p of the first article -->

On both: ``script[type="application/ld+json"]`` with a ``NewsArticle`` may carry
``datePublished`` / ``dateModified``; tags are the texts of every link whose ``href`` holds
``/tags/`` anywhere on the page (case-insensitive duplicates dropped, first spelling kept;
ours: menu links are skipped), else the links of ``div.row-tags``.

Field rules:

* ``published_at``: JSON-LD ``datePublished`` (a malformed script still gives it through
  :func:`dgb.scraper.jsonld.extract_jsonld_article`), else the first date of the page's date
  text ("DD/MM/YYYY - HH:MM", also "HHhMM"; a date alone is midnight) as Brasília wall-clock
  time (:func:`dgb.scraper.dates.parse_br_datetime`: the true instant, with the zone's
  historical offsets); ``updated_at``: JSON-LD ``dateModified``, else "Atualizado em ..." in the
  date text.
* ``id_date`` (what production hashes into ``unique_id``): production takes the first JSON-LD
  script that is valid JSON (strict parsing) holding an object, or a list of objects, with
  ``"@type": "NewsArticle"`` and ``datePublished``, parses it with ``datetime.fromisoformat`` and
  hashes its ``isoformat()``: the offset as written, seconds and fractions as written (a
  missing seconds field becomes ``:00``, ``Z`` becomes ``+00:00``). Without it, it reads the date
  text (``div.data`` with "Publicado em" removed; on TV Brasil the first ``h5`` as above) with
  the patterns ``DD/MM/YYYY - H:MM`` (first match anywhere in the text) else ``DD/MM/YYYY``
  (midnight), builds a datetime with the FIXED offset ``timezone(timedelta(hours=-3))``, zero
  seconds, and hashes its ``isoformat()``: ``"2026-11-27T14:30:00-03:00"``. None when neither
  gives a date (production stores no article without one).
* ``category``: "Notícias" for every EBC article (production's constant); ``subtitle``: None
  (production reads none); ``editorial_lead``: the TV Brasil programme, else None.
* ``image_url``: Agência Brasil's first ``figure img``: ``data-echo`` (lazy loading), else the
  ``noscript`` copy's ``src``, else ``src`` unless it is the ``loading_v2.gif`` placeholder;
  else (ours) JSON-LD ``image`` / ``og:image``.
* ``video_url``: the first ``video`` element's ``source[type="video/mp4"]``; else (ours) a
  YouTube / ``/embed/`` iframe of the body.
* ``content``: Markdown of the body (Agência Brasil: ``div.conteudo-noticia``; TV Brasil: the
  ``p`` elements of the first ``article``) without scripts, figures and share blocks, without
  paragraphs that have no text (image-only paragraphs, tracking pixels), without the notices
  "*Restrição de uso...", "Clique aqui para saber..." and "Tags: ...", and without credit lines
  "*Com informações ..." after the first paragraph.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from selectolax.lexbor import LexborHTMLParser, LexborNode

from dgb.scrape_errors import AntiBotError, EmptyContentError, HtmlChangedError, detect_anti_bot
from dgb.scraper.article import clean_body
from dgb.scraper.dates import labelled_datetime, parse_br_datetime
from dgb.scraper.jsonld import extract_jsonld_article, loads_jsonld
from dgb.scraper.listing import is_navigation_link
from dgb.scraper.markup import (
    absolute_url,
    absolutise_links,
    drop_nodes,
    first_text,
    meta_content,
    parse_html,
    text_of,
    to_markdown,
)
from dgb.scraper.models import Article, ListingItem, ListingPage
from dgb.scraper.sites import keep_on_site, own_sites, unresolved_link

EBC_HOST_SUFFIX = "ebc.com.br"
AGENCIA_BRASIL_HOST = "agenciabrasil.ebc.com.br"
TV_BRASIL_HOST = "tvbrasil.ebc.com.br"
# The host label -> the agency key production uses (and the agency catalogue).
EBC_AGENCY_KEYS = {"agenciabrasil": "agencia_brasil", "tvbrasil": "tvbrasil"}
EBC_CATEGORY = "Notícias"  # production stores this category for every EBC article
ID_OFFSET = timezone(timedelta(hours=-3))  # production's fixed offset for dates read from page text

_DATE_TIME = re.compile(r"(\d{2})/(\d{2})/(\d{4})\s*-\s*(\d{1,2}):(\d{2})")
_DATE_ONLY = re.compile(r"(\d{2})/(\d{2})/(\d{4})")
_NOTICES = re.compile(r"^(\*Restrição de uso|Clique aqui para saber|Tags:)")
_CREDIT = re.compile(r"^\*Com informações")
_VIDEO_FRAME = re.compile(r"(?i)youtube(-nocookie)?\.com|youtu\.be|vimeo\.com|/embed/")
_PLACEHOLDER = "loading_v2.gif"


def is_ebc_url(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host == EBC_HOST_SUFFIX or host.endswith("." + EBC_HOST_SUFFIX)


def ebc_agency(url: str) -> str:
    """Agency key of an EBC URL (``agencia_brasil``, ``tvbrasil``), as production keys them.

    The EBC host may also appear in the path (the local mirror serves
    ``http://127.0.0.1:P/tvbrasil.ebc.com.br/...``); another EBC host gives its label; a
    non-EBC URL gives ``ebc``.
    """
    lowered = url.lower()
    for host, key in ((TV_BRASIL_HOST, "tvbrasil"), (AGENCIA_BRASIL_HOST, "agencia_brasil")):
        if host in lowered:
            return key
    if not is_ebc_url(url):
        return "ebc"
    label = (urlsplit(url).hostname or "").split(".")[0]
    return EBC_AGENCY_KEYS.get(label, label)


# -- dates -------------------------------------------------------------------------------------


def _text_date(text: str | None) -> tuple[int, int, int, int, int] | None:
    """(year, month, day, hour, minute) of production's EBC date patterns in ``text``."""
    if not text:
        return None
    match = _DATE_TIME.search(text)
    if match:
        day, month, year, hour, minute = (int(g) for g in match.groups())
    elif match := _DATE_ONLY.search(text):
        (day, month, year), hour, minute = (int(g) for g in match.groups()), 0, 0
    else:
        return None
    try:
        datetime(year, month, day, hour, minute)
    except ValueError:
        return None
    return year, month, day, hour, minute


def ebc_text_id_date(text: str | None) -> str | None:
    """The string production hashes for a date read from page text (fixed ``-03:00``)."""
    fields = _text_date(text)
    return datetime(*fields, tzinfo=ID_OFFSET).isoformat() if fields else None


def jsonld_id_date(tree: LexborHTMLParser) -> str | None:
    """``isoformat()`` of the JSON-LD ``datePublished`` production would use (module docstring)."""
    for script in tree.css('script[type="application/ld+json"]'):
        raw = script.text(deep=True)
        if not raw:
            return None  # production's scan stops on an empty script
        try:
            data = loads_jsonld(raw)
        except ValueError:
            continue
        for obj in data if isinstance(data, list) else [data]:
            if not isinstance(obj, dict):
                return None  # production's scan stops on a non-object entry
            if obj.get("@type") == "NewsArticle" and "datePublished" in obj:
                value = obj["datePublished"]
                try:
                    return datetime.fromisoformat(value).isoformat()
                except ValueError:
                    break  # this script is given up; the next one is read
                except TypeError:
                    return None  # not a string: production's scan stops
    return None


# -- listing -----------------------------------------------------------------------------------


def _page_number(url: str) -> int:
    try:
        return int((parse_qs(urlsplit(url).query).get("page") or ["0"])[0])
    except ValueError:
        return 0


def page_url(url: str, page: int) -> str:
    """``url`` asking for listing page ``page`` (``?page=N``; other query parameters kept)."""
    parts = urlsplit(url)
    query = [
        (k, v)
        for k, values in parse_qs(parts.query, keep_blank_values=True).items()
        for v in values
        if k != "page"
    ]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query + [("page", str(page))]), ""))


def _image_src(img: LexborNode | None, page: str) -> str | None:
    if img is None:
        return None
    src = img.attributes.get("data-echo") or img.attributes.get("data-src") or img.attributes.get("src")
    if not src or src.endswith(_PLACEHOLDER):
        return None
    return absolute_url(src, page)


def _listing_item(link: LexborNode, card: LexborNode, title: str, base_url: str) -> ListingItem | None:
    href = link.attributes.get("href")
    url = absolute_url(href, base_url) or unresolved_link(href)  # dropped as off-site
    if not url or not title:
        return None
    return ListingItem(
        title=title,
        url=url,
        published_at=parse_br_datetime(text_of(card, " ")),
        image_url=_image_src(card.css_first("img"), base_url),
    )


def _agencia_items(tree: LexborHTMLParser, base_url: str) -> list[ListingItem]:
    items = []
    for link in tree.css("a.capa-noticia[href]"):
        href = link.attributes.get("href") or ""
        parent = link.parent
        # The card: the anchor's parent when it holds no other article link, else the anchor.
        card = (
            parent
            if parent is not None
            and parent.tag != "body"
            and all((a.attributes.get("href") or "") == href for a in parent.css("a.capa-noticia"))
            else link
        )
        if "/noticia/" not in href or is_navigation_link(link, card):
            continue
        heading = next((h for h in link.css("h1, h2, h3, h4, h5, h6") if text_of(h)), None)
        title = (
            (text_of(heading) if heading is not None else "")
            or " ".join((link.attributes.get("title") or "").split())
            or text_of(link, " ")
        )
        if (item := _listing_item(link, card, title, base_url)) is not None:
            items.append(item)
    return items


def _tvbrasil_items(tree: LexborHTMLParser, base_url: str) -> list[ListingItem]:
    items = []
    for view in tree.css("div.view-ultimas"):
        for link in view.css("h3.heading a[href]"):
            if is_navigation_link(link, view):
                continue
            card = link.parent
            while (
                card is not None
                and card.mem_id != view.mem_id
                and "views-row" not in (card.attributes.get("class") or "")
            ):
                card = card.parent
            card = card if card is not None and card.mem_id != view.mem_id else link.parent
            if (item := _listing_item(link, card, text_of(link), base_url)) is not None:
                items.append(item)
    return items


def parse_ebc_listing(html: str, base_url: str, sites: frozenset[str] | None = None) -> ListingPage:
    """Items and next page of an EBC ``/ultimas`` page (shapes in the module docstring); items
    not on ``sites`` (default: the site of ``base_url``: the portal's own host) are dropped and
    counted (:func:`dgb.scraper.sites.keep_on_site`)."""
    if detect_anti_bot(html):
        raise AntiBotError(f"listing {base_url} is an anti-bot challenge page")
    tree = parse_html(html or "")
    found = _agencia_items(tree, base_url) + _tvbrasil_items(tree, base_url)
    items, seen = [], set()
    for item in found:
        if item.url not in seen:
            seen.add(item.url)
            items.append(item)
    page = _page_number(base_url)
    if not items and page == 0 and tree.css_first("a.capa-noticia, div.view-ultimas") is None:
        raise HtmlChangedError(f"EBC listing {base_url}: no a.capa-noticia links and no div.view-ultimas")
    listing = ListingPage(items, page_url(base_url, page + 1) if items else None)
    return keep_on_site(listing, own_sites(base_url) if sites is None else sites, label=base_url)


# -- article -----------------------------------------------------------------------------------


def _is_tvbrasil(url: str, tree: LexborHTMLParser) -> bool:
    lowered = url.lower()
    if TV_BRASIL_HOST in lowered or AGENCIA_BRASIL_HOST in lowered:
        return TV_BRASIL_HOST in lowered
    if tree.css_first("h1.titulo-materia, div.conteudo-noticia") is not None:
        return False
    return tree.css_first("h4.txtNoticias") is not None or any(
        "No AR em" in text_of(h) for h in tree.css("h5")
    )


def _strip_text(node: LexborNode | None) -> str:
    """Node text as production reads it: each text piece stripped, joined with nothing."""
    return node.text(deep=True, separator="", strip=True) if node is not None else ""


def _tvbrasil_date_text(tree: LexborHTMLParser) -> str:
    h5 = tree.css_first("h5")
    if h5 is None:
        return ""
    span = h5.css_first("span.date-display-single")
    if span is not None:
        return _strip_text(span)
    text = _strip_text(h5)
    return text.replace("No AR em", "").strip() if "No AR em" in text else ""


def _agencia_date_text(tree: LexborHTMLParser) -> str:
    text = _strip_text(tree.css_first("div.data"))
    return text.replace("Publicado em", "").strip()


def _agencia_image(tree: LexborHTMLParser, url: str) -> str | None:
    figure = tree.css_first("figure")
    img = figure.css_first("img") if figure is not None else None
    if img is None:
        return None
    if img.attributes.get("data-echo"):
        return absolute_url(img.attributes["data-echo"], url)
    noscript = figure.css_first("noscript")
    if noscript is not None:
        copy = noscript.css_first("img[src]")
        src = copy.attributes.get("src") if copy is not None else None
        if src is None and (m := re.search(r"""src\s*=\s*["']([^"']+)""", noscript.text(deep=True) or "")):
            src = m.group(1)
        return absolute_url(src, url) if src else None
    src = img.attributes.get("src")
    return absolute_url(src, url) if src and not src.endswith(_PLACEHOLDER) else None


def _video_url(tree: LexborHTMLParser, body: LexborNode | None, url: str) -> str | None:
    video = tree.css_first("video")
    if video is not None:
        source = video.css_first('source[type="video/mp4"][src]')
        if source is not None:
            return absolute_url(source.attributes.get("src"), url)
    for frame in body.css("iframe[src]") if body is not None else []:
        if _VIDEO_FRAME.search(frame.attributes.get("src") or ""):
            return absolute_url(frame.attributes.get("src"), url)
    return None


def _tags(tree: LexborHTMLParser) -> list[str]:
    for links in (tree.css('a[href*="/tags/"]'), tree.css("div.row-tags a")):
        tags, seen = [], set()
        for link in links:
            if is_navigation_link(link):  # ours: site menus linking to tag pages are not tags
                continue
            if (tag := text_of(link)) and tag.lower() not in seen:
                seen.add(tag.lower())
                tags.append(tag)
        if tags:
            return tags
    return []


def _drop_noise_paragraphs(root: LexborNode) -> None:
    noise, kept = [], 0
    for p in root.css("p"):
        text = text_of(p, " ")
        if not text or _NOTICES.match(text) or (_CREDIT.match(text) and kept > 0):
            noise.append(p)
        else:
            kept += 1
    drop_nodes(noise)


def _body_markdown(body: LexborNode, url: str) -> str:
    drop_nodes(
        [
            n
            for n in body.css("figure, figcaption, noscript, .compartilhar, .share, .social")
            if n.mem_id != body.mem_id
        ]
    )
    clean_body(body)
    _drop_noise_paragraphs(body)
    absolutise_links(body, url)
    return to_markdown(body.html or "")


def _tvbrasil_markdown(article: LexborNode, url: str) -> str:
    parts = []
    _drop_noise_paragraphs(article)
    for p in article.css("p"):
        absolutise_links(p, url)
        if md := to_markdown(p.html or ""):
            parts.append(md)
    return "\n\n".join(parts)


def parse_ebc_article(
    html: str, url: str, agency: str | None = None, published_fallback: datetime | None = None
) -> Article:
    """An EBC article (markup and field rules in the module docstring).

    ``agency`` defaults to :func:`ebc_agency`. Agência Brasil or TV Brasil markup is chosen
    by the URL (``tvbrasil.ebc.com.br`` in it, as production does), else by the page.
    """
    if detect_anti_bot(html):
        raise AntiBotError(f"{url} is an anti-bot challenge page")
    tree = parse_html(html or "")
    agency = agency or ebc_agency(url)
    ld = extract_jsonld_article(tree)
    tv = _is_tvbrasil(url, tree)
    tags = _tags(tree)  # before the body is cleaned: a "Tags: ..." paragraph holds tag links too
    if tv:
        title = first_text(tree, "h1") or ld.headline
        lead_node = tree.css_first("h4.txtNoticias")
        editorial_lead = (
            (text_of(lead_node.css_first("a")) or text_of(lead_node)) if lead_node is not None else None
        )
        id_text = date_text = _tvbrasil_date_text(tree)
        if not _text_date(date_text):  # ours: any h5 "No AR em ..." when the first h5 is another one
            date_text = next((t for h in tree.css("h5") if "No AR em" in (t := text_of(h, " "))), date_text)
        updated_text = ""
        body = tree.css_first("article")
        image_url = None
    else:
        title = first_text(tree, "h1.titulo-materia") or ld.headline
        editorial_lead = None
        id_text = date_text = _agencia_date_text(tree)
        updated_text = text_of(tree.css_first("div.data"), " ")
        body = tree.css_first("div.conteudo-noticia")
        image_url = _agencia_image(tree, url)
    if not title:
        raise EmptyContentError(f"{url} has no article title ({'h1' if tv else 'h1.titulo-materia'})")
    video_url = _video_url(tree, body, url)
    content = ""
    if body is not None:
        content = _tvbrasil_markdown(body, url) if tv else _body_markdown(body, url)
    if not content and not video_url:
        where = "article p" if tv else "div.conteudo-noticia"
        raise EmptyContentError(f"{url} has no article body ({where})")
    published = ld.published_at or parse_br_datetime(date_text)
    id_date = jsonld_id_date(tree) or ebc_text_id_date(id_text)
    updated = ld.updated_at or labelled_datetime(updated_text, "Atualizado em")
    fallback_image = ld.image or meta_content(tree, "og:image")
    return Article(
        url=url,
        agency=agency,
        title=title,
        subtitle=None,
        editorial_lead=editorial_lead or None,
        category=EBC_CATEGORY,
        tags=tags,
        published_at=published or published_fallback,
        updated_at=updated,
        image_url=image_url or absolute_url(fallback_image, url),
        video_url=video_url,
        content=content,
        id_date=id_date,
    )
