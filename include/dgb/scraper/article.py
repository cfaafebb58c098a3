"""Classic gov.br (Plone 5) article pages.

Field rules:

* ``title``: ``h1.documentFirstHeading``, else JSON-LD ``headline``, else ``og:title``.
* ``category`` and ``editorial_lead``: the "chapéu" ``p.nitfSubtitle`` (the kicker above the
  title). Production stores it in both columns: ``editorial_lead`` from ``p.nitfSubtitle`` and
  ``category`` from the listing's ``span.subtitle``, which Plone renders from the same field.
* ``subtitle``: the "linha fina" ``div.documentDescription`` (the summary under the title).
* ``published_at`` / ``updated_at``: JSON-LD ``datePublished`` / ``dateModified`` (malformed
  JSON-LD read by regex), then the byline ``span.documentPublished span.value`` /
  ``span.documentModified span.value`` ("10/02/2026 17h05"), then the free text
  "Publicado em ..." / "Atualizado em ...", all Brasília time.
* ``image_url``: lead image (``.newsImageContainer``, ``#media``), else the first body image,
  else JSON-LD/og image; ``resolveuid`` links resolve against the site root
  (:func:`dgb.scraper.markup.absolute_url`).
* ``video_url``: the first YouTube/Vimeo/``/embed/`` iframe, else a ``video`` tag source.
* ``tags``: ``a[href*="origem=keyword"]`` texts, else the ``div.keywords`` / ``#category`` links.
* ``content``: Markdown of ``div#parent-fieldname-text`` (else ``div#content-core``) without
  scripts, styles, breadcrumbs, bylines, share ("Compartilhe") and tag blocks, and without the
  trailing "Assessoria de Comunicação" contact footer.
"""

from __future__ import annotations

import re
from datetime import datetime

from selectolax.lexbor import LexborHTMLParser, LexborNode

from dgb.scrape_errors import AntiBotError, EmptyContentError, detect_anti_bot
from dgb.scraper.dates import labelled_datetime, parse_br_datetime, production_text_date
from dgb.scraper.identity import listing_day
from dgb.scraper.jsonld import extract_jsonld_article, production_date_published
from dgb.scraper.markup import (
    absolute_url,
    absolutise_links,
    decode_bytes,
    drop_nodes,
    first_path_segment,
    first_text,
    meta_content,
    parse_html,
    text_lengths,
    text_of,
    to_markdown,
)
from dgb.scraper.models import Article

_BODY = ("#parent-fieldname-text", "#content-core", '[itemprop="articleBody"]')
_NOISE = (
    "script",
    "style",
    "noscript",
    "template",
    "form",
    "button",
    "nav",
    "iframe",
    "video",
    "object",
    "embed",
    ".portal-breadcrumbs",
    "#portal-breadcrumbs",
    ".documentByLine",
    "#plone-document-byline",
    ".keywords",
    "#category",
    ".social-links",
    "#social-share",
    ".compartilhar",
    ".share",
    ".sharing",
    "#viewlet-social-like",
    ".documentActions",
    ".visualClear",
)
_VIDEO_HOSTS = re.compile(r"(?i)youtube(-nocookie)?\.com|youtu\.be|vimeo\.com|/embed/")
_SHARE = re.compile(r"(?i)^compartilh[ea]")
_FOOTER_START = re.compile(
    r"(?i)^(assessoria (de )?(comunica[cç][aã]o|imprensa)|ascom\b|"
    r"coordena[cç][aã]o(-geral)? de comunica[cç][aã]o|"
    r"n[uú]cleo de comunica[cç][aã]o|informa[cç][oõ]es (para|[aà]) imprensa|atendimento [aà] imprensa)"
)
FOOTER_MAX_CHARS = 600


def is_share_text(text: str) -> bool:
    """A share widget's words ("Compartilhe ...", short): left out of an article's text."""
    return bool(_SHARE.match(text)) and len(text) < 200


def footer_starts(text: str) -> bool:
    """The first block of a press-office contact footer; it and what follows (at most
    ``FOOTER_MAX_CHARS`` characters in all) are left out of an article's text."""
    return bool(_FOOTER_START.match(text))


# raw (uncollapsed) text above which a block cannot be a share/byline block (those are < 200
# characters once whitespace is collapsed; markup indentation may add a lot of raw whitespace)
_SHORT_BLOCK_RAW_CHARS = 4000
# Plone marks folder/collection views on <body class="portaltype-folder template-listing_view ...">.
_LISTING_BODY = re.compile(
    r"\b(portaltype-(folder|collection)|template-(summary_view|listing_view|folder_listing|"
    r"tabular_view|album_view))\b"
)
_BYLINE_TEXT = re.compile(r"(?i)^(publicado em|atualizado em)\s*:?\s*\d{1,2}/\d{1,2}/\d{4}")


def _video_url(tree: LexborHTMLParser, url: str) -> str | None:
    for frame in tree.css("iframe[src], iframe[data-src]"):
        src = frame.attributes.get("src") or frame.attributes.get("data-src") or ""
        if _VIDEO_HOSTS.search(src):
            return absolute_url(src, url)
    for node in tree.css("video[src], video source[src]"):
        if found := absolute_url(node.attributes.get("src"), url):
            return found
    return meta_content(tree, "og:video:url", "og:video")


def _image_url(
    tree: LexborHTMLParser, body: LexborNode | None, url: str, agency: str | None, jsonld_image: str | None
) -> str | None:
    for selector in (".newsImageContainer img[src]", "#media img[src]", "figure.image-principal img[src]"):
        if (node := tree.css_first(selector)) is not None:
            return absolute_url(node.attributes.get("src"), url, agency)
    if body is not None:
        for node in body.css("img[src]"):
            if found := absolute_url(node.attributes.get("src"), url, agency):
                return found
    fallback = jsonld_image or meta_content(tree, "og:image")
    return absolute_url(fallback, url, agency) if fallback and "logo" not in fallback.lower() else None


def _tags(tree: LexborHTMLParser) -> list[str]:
    for selector in ('a[href*="origem=keyword"]', ".keywords a", "#category a", ".tags a"):
        tags = [text_of(a) for a in tree.css(selector)]
        if tags := list(dict.fromkeys(t for t in tags if t)):
            return tags
    return []


def _container(body: LexborNode) -> LexborNode:
    """Descend through single wrapper divs to the node whose children are the paragraphs."""
    while True:
        children = list(body.iter())
        own_text = "".join(c.text(deep=False) for c in body.iter(include_text=True) if c.is_text_node).strip()
        if len(children) == 1 and children[0].tag in ("div", "section", "article") and not own_text:
            body = children[0]
        else:
            return body


_CREDIT = re.compile(r"^\s*(foto|fotos|imagem|crédito|credito)s?\s*:", re.IGNORECASE)


def _drop_lead_image(body: LexborNode, image_url: str | None, url: str, agency: str | None) -> None:
    """Remove the lead image (already ``image_url``) and its caption/credit from the body when
    it opens the text, so the content is the text and republished copies compare equal.
    Images further down the article stay."""
    if not image_url:
        return
    for block in list(_container(body).iter()):
        text = text_of(block, " ").strip()
        imgs = [block] if block.tag == "img" else block.css("img[src]")
        if (
            imgs
            and len(text) <= 200
            and absolute_url(imgs[0].attributes.get("src"), url, agency) == image_url
        ):
            block.decompose()
            continue
        if text and _CREDIT.match(text) and len(text) <= 200:
            block.decompose()
            continue
        if text or block.tag in ("p", "div", "section"):
            break


def clean_body(body: LexborNode) -> None:
    """Remove boilerplate from an article body in place (see module docstring)."""
    inside = [n for sel in _NOISE for n in body.css(sel) if n.mem_id != body.mem_id]
    drop_nodes(inside)
    tag_blocks = []
    # short blocks are recognised by their text; long subtrees are skipped unread (keeps this linear)
    lengths = text_lengths(body)
    for link in body.css('a[href*="origem=keyword"]'):
        block = link.parent
        while block is not None and block.tag in ("span", "li", "ul", "strong", "em"):
            block = block.parent
        keep_block = (
            block is None
            or block.mem_id == body.mem_id
            or lengths.get(block.mem_id, 0) > _SHORT_BLOCK_RAW_CHARS
            or len(text_of(block)) > 200
        )
        tag_blocks.append(link if keep_block else block)
    drop_nodes(tag_blocks)
    boilerplate = []
    lengths = text_lengths(body)
    for node in body.css("div, section, aside, p, ul, span, strong"):
        if node.mem_id == body.mem_id or lengths.get(node.mem_id, 0) > _SHORT_BLOCK_RAW_CHARS:
            continue
        text = text_of(node, " ")
        if is_share_text(text) or (_BYLINE_TEXT.match(text) and len(text) < 120):
            boilerplate.append(node)
    drop_nodes(boilerplate)
    blocks = list(_container(body).iter())
    for start in range(len(blocks) - 1, -1, -1):
        if footer_starts(text_of(blocks[start], " ")):
            if sum(len(text_of(b, " ")) for b in blocks[start:]) <= FOOTER_MAX_CHARS:
                for trailing in blocks[start:]:
                    trailing.decompose()
            break


def _production_id_date(tree: LexborHTMLParser) -> str | None:
    """The date text production's unique id used for this page, in production's order of sources.

    JSON-LD first (:func:`production_date_published`), then the value of the first
    ``span.documentPublished``, then any text node that says "publicado em" with a date production's
    patterns read (:func:`production_text_date`). None means production fell back to the listing's day.
    """
    found = production_date_published(tree)
    if found is None:
        published = tree.css_first("span.documentPublished")
        value = published.css_first("span.value") if published is not None else None
        found = production_text_date(value.text(deep=True)) if value is not None else None
    if found is None and tree.body is not None:
        for node in tree.body.traverse(include_text=True):
            text = node.text_content if node.tag == "-text" else None
            if text and "publicado em" in text.lower() and (found := production_text_date(text.strip())):
                break
    return found


def parse_article_html(
    html: str, url: str, agency: str | None = None, published_fallback: datetime | None = None
) -> Article:
    """Parse a classic gov.br article page (rules in the module docstring).

    ``agency`` defaults to the URL's first path segment. ``published_fallback`` (e.g. the
    listing date) is used when the page has no date; without any date ``published_at`` and
    ``unique_id`` are None. Raises ``anti_bot`` for challenge pages and ``empty_content`` for
    pages without a title, without any body, or that are listings rather than articles.
    """
    if detect_anti_bot(html):
        raise AntiBotError(f"{url} is an anti-bot challenge page")
    tree = parse_html(html or "")
    agency = agency or first_path_segment(url)
    body_class = (tree.body.attributes.get("class") or "") if tree.body is not None else ""
    if tree.css_first("#parent-fieldname-text") is None and (
        tree.css_first("#content-core article.tileItem") is not None or _LISTING_BODY.search(body_class)
    ):
        raise EmptyContentError(f"{url} is a listing page, not an article")
    ld = extract_jsonld_article(tree)
    title = first_text(tree, "h1.documentFirstHeading") or ld.headline or meta_content(tree, "og:title")
    body = next((node for sel in _BODY if (node := tree.css_first(sel)) is not None), None)
    if not title:
        raise EmptyContentError(f"{url} has no article title" + ("" if body else " and no body"))
    scope = tree.css_first("#content") or tree.body or tree.root
    page_text = text_of(scope, " ")
    published = (
        ld.published_at
        or parse_br_datetime(first_text(tree, "span.documentPublished span.value"))
        or labelled_datetime(page_text, "Publicado em")
        or published_fallback
    )
    updated = (
        ld.updated_at
        or parse_br_datetime(first_text(tree, "span.documentModified span.value"))
        or labelled_datetime(page_text, "Atualizado em")
    )
    chapeu = first_text(tree, "p.nitfSubtitle", ".nitfSubtitle")
    subtitle = first_text(
        tree, "div.documentDescription", ".documentDescription", "#parent-fieldname-description", sep=" "
    )
    image_url = _image_url(tree, body, url, agency, ld.image)
    video_url = _video_url(tree, url)
    content = ""
    if body is not None:
        clean_body(body)
        _drop_lead_image(body, image_url, url, agency)
        absolutise_links(body, url, agency)
        content = to_markdown(body.html or "")
    if not content and not subtitle and not video_url:
        raise EmptyContentError(f"{url} has no article body")
    id_date = _production_id_date(tree)
    if id_date is None and published_fallback is not None:
        id_date = listing_day(published_fallback)
    return Article(
        url=url,
        agency=agency,
        title=title,
        subtitle=subtitle,
        editorial_lead=chapeu,
        category=chapeu,
        tags=_tags(tree),
        published_at=published,
        updated_at=updated,
        image_url=image_url,
        video_url=video_url,
        content=content,
        id_date=id_date,
    )


def parse_article_bytes(
    data: bytes,
    url: str,
    agency: str | None = None,
    charset: str | None = None,
    published_fallback: datetime | None = None,
) -> Article:
    """Decode (see :func:`dgb.scraper.markup.decode_bytes`) then :func:`parse_article_html`."""
    return parse_article_html(decode_bytes(data, charset), url, agency, published_fallback)
