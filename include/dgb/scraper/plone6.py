"""Plone 6 (Volto) agencies, read through the REST API ``@search`` endpoint.

Request shape: ``https://www.gov.br/<agency>/++api++/<path>/@search?portal_type=News Item&
sort_on=effective&sort_order=descending&b_start=N&b_size=25&fullobjects=1``.

Each entry of ``items[]`` becomes a full :class:`ListingItem`: ``@id`` (``/++api++`` removed) is
the URL, ``title``, ``effective`` -> published_at, ``modified`` -> updated_at, ``description`` ->
summary (the article's subtitle), ``head_title`` (the chapéu, when present) -> category,
``Subject`` -> tags, ``image.download`` / ``image.scales`` / ``image_scales`` -> image_url, and
``blocks`` rendered to Markdown in ``blocks_layout.items`` order (slate blocks from their
``value`` tree, else ``plaintext``; text/html blocks from their HTML; title/description blocks
skipped as they repeat the metadata). ``batching.next`` is the next page.

Body text variants, all kept (none is dropped):

* ``slate`` blocks: their ``value`` tree, else ``plaintext``;
* ``text`` and ``textBlock`` blocks: ``text`` as HTML (converted to Markdown), as a plain string
  (kept as written), as a RichText object ``{"data": html}`` or as a draft.js object
  ``{"blocks": [{"text": ...}]}``; ``html`` blocks from their ``html``;
* when no block yields text, the item's own ``text`` field: a RichText object
  ``{"data": html, "content-type": "text/html"}`` or a plain string (HTML or not).

Identity date (:attr:`Article.id_date`): production parses ``effective`` with
``datetime.fromisoformat`` and hashes that datetime's ``isoformat()``, so ``id_date`` is
``datetime.fromisoformat(effective).isoformat()``: the offset the API gave is kept, not
converted (``"2026-03-10T17:05:07+00:00"`` stays ``+00:00``; a trailing ``Z`` becomes
``+00:00``; a naive value stays naive). None when ``effective`` is missing or not ISO (production
stores no such article). ``published_at`` is still the true instant (in Brasília time), falling
back to ``created``.
"""

from __future__ import annotations

import html as htmllib
import json
import re
from datetime import datetime
from typing import Any
from urllib.parse import urljoin

from dgb.scrape_errors import (
    TOO_DEEP,
    AntiBotError,
    EmptyContentError,
    HtmlChangedError,
    as_scrape_error,
    detect_anti_bot,
)
from dgb.scraper.dates import parse_iso_datetime
from dgb.scraper.markup import to_markdown
from dgb.scraper.models import Article, ListingItem, ListingPage
from dgb.scraper.sites import keep_on_site, own_sites

_SLATE_TAGS = {
    "p": "p",
    "paragraph": "p",
    "h1": "h2",
    "h2": "h2",
    "h3": "h3",
    "h4": "h4",
    "ul": "ul",
    "ol": "ol",
    "li": "li",
    "blockquote": "blockquote",
    "strong": "strong",
    "b": "strong",
    "em": "em",
    "i": "em",
    "u": "u",
    "del": "del",
    "sub": "sub",
    "sup": "sup",
    "code": "code",
}
_TEXT_BLOCKS = {"text", "textBlock"}
_HTML_TAG = re.compile(r"<[A-Za-z/!][^>]*>")
_SKIP_BLOCKS = {"title", "description", "documentByLine", "toc", "listing", "search"}


def _page_url(api_url: str) -> str:
    return api_url.replace("/++api++", "")


_SLATE_MAX_DEPTH = 40  # slate children deeper than this are dropped (real values are a few levels deep)


def _slate_html(nodes: Any, depth: int = 0) -> str:
    """HTML of a slate value (list of nodes: text leaves or elements with ``type``/``children``)."""
    if depth > _SLATE_MAX_DEPTH:
        return ""
    if isinstance(nodes, dict):
        nodes = [nodes]
    out = []
    for node in nodes if isinstance(nodes, list) else []:
        if not isinstance(node, dict):
            continue
        if "text" in node and "type" not in node:
            out.append(htmllib.escape(str(node["text"])).replace("\n", "<br>"))
            continue
        inner = _slate_html(node.get("children"), depth + 1)
        kind = node.get("type")
        if kind == "link":
            href = (node.get("data") or {}).get("url") or ""
            out.append(f'<a href="{htmllib.escape(href, quote=True)}">{inner}</a>' if href else inner)
        elif kind in _SLATE_TAGS:
            out.append(f"<{_SLATE_TAGS[kind]}>{inner}</{_SLATE_TAGS[kind]}>")
        else:
            out.append(inner)
    return "".join(out)


def _text_markdown(value: Any) -> str:
    """Markdown of a text value: HTML string, plain string, ``{"data": html}`` or draft.js."""
    if isinstance(value, dict) and isinstance(value.get("data"), str):  # RichText {"data": "<p>..."}
        value = value["data"]
    elif isinstance(value, dict):  # draft.js {"blocks": [{"text": ...}]}
        return "\n\n".join(
            b["text"].strip()
            for b in value.get("blocks") or []
            if isinstance(b, dict) and isinstance(b.get("text"), str) and b["text"].strip()
        )
    if not isinstance(value, str) or not value.strip():
        return ""
    if _HTML_TAG.search(value):
        return to_markdown(value)
    # Plain text: kept as written; paragraphs stay separated by one blank line.
    paragraphs = (" ".join(line.split()) for line in re.split(r"\n\s*\n", value.replace("\r\n", "\n")))
    return "\n\n".join(p for p in paragraphs if p)


def _block_markdown(block: dict, base: str) -> str:
    kind = block.get("@type")
    if kind in _SKIP_BLOCKS:
        return ""
    if kind == "slate":
        rendered = to_markdown(_slate_html(block.get("value"))) if block.get("value") else ""
        return rendered or " ".join(str(block.get("plaintext") or "").split())
    if kind in _TEXT_BLOCKS or kind == "html":
        value = block.get("html") if kind == "html" else block.get("text")
        return _text_markdown(value if value is not None else block.get("value"))
    if kind == "image" and isinstance(block.get("url"), str):
        alt = " ".join(str(block.get("alt") or "").split())
        return f"![{alt}]({urljoin(base + '/', block['url'])})"
    return ""


def _blocks_markdown(item: dict, base: str) -> str:
    blocks = item.get("blocks") if isinstance(item.get("blocks"), dict) else {}
    order = (item.get("blocks_layout") or {}).get("items") or list(blocks)
    parts = [_block_markdown(blocks[key], base) for key in order if isinstance(blocks.get(key), dict)]
    if not any(parts):  # the item's own text field: RichText object or plain string
        parts = [_text_markdown(item.get("text"))]
    return "\n\n".join(p for p in parts if p).strip()


def _image_url(item: dict, base: str) -> str | None:
    image = item.get("image")
    if isinstance(image, dict):
        scales = image.get("scales") or {}
        src = image.get("download") or (scales.get("great") or scales.get("large") or {}).get("download")
        if src:
            return _page_url(urljoin(base + "/", src))
    scales = (item.get("image_scales") or {}).get("image")
    if isinstance(scales, list) and scales and isinstance(scales[0], dict) and scales[0].get("download"):
        return _page_url(urljoin(base + "/", scales[0]["download"]))
    return None


def production_id_date(effective: Any) -> str | None:
    """The date string production hashes for a Plone 6 item (see module docstring)."""
    if not isinstance(effective, str) or not effective:
        return None
    try:
        return datetime.fromisoformat(effective).isoformat()
    except ValueError:
        return None


def parse_plone6_item(item: dict, base_url: str) -> ListingItem | None:
    """One ``@search`` item (None when it has no ``@id`` or title)."""
    api_url, title = item.get("@id"), item.get("title")
    title = " ".join(title.split()) if isinstance(title, str) else ""  # an object is no title
    if not isinstance(api_url, str) or not api_url or not title:
        return None
    url = _page_url(urljoin(base_url, api_url))
    subjects = item.get("Subject") or item.get("subjects") or []
    return ListingItem(
        title=title,
        url=url,
        published_at=parse_iso_datetime(item.get("effective")) or parse_iso_datetime(item.get("created")),
        updated_at=parse_iso_datetime(item.get("modified")),
        category=" ".join(str(item.get("head_title") or "").split()) or None,
        summary=" ".join(str(item.get("description") or "").split()) or None,
        tags=[str(s).strip() for s in subjects if str(s).strip()] if isinstance(subjects, list) else [],
        image_url=_image_url(item, url),
        content=_blocks_markdown(item, url),
        id_date=production_id_date(item.get("effective")),
    )


def parse_plone6_search(
    json_text: str, base_url: str, agency: str | None = None, sites: frozenset[str] | None = None
) -> ListingPage:
    """Items and ``batching.next`` of a Plone 6 ``@search`` response.

    Items and a next link not on ``sites`` (default: the site of ``base_url``) are dropped and
    counted (:func:`dgb.scraper.sites.keep_on_site`).

    Not JSON (or JSON without an ``items`` list) raises ``html_changed``; an anti-bot page
    served instead of JSON raises ``anti_bot``.
    """
    try:
        data = json.loads(json_text)
    except RecursionError as exc:
        raise HtmlChangedError(f"Plone 6 API {base_url}: JSON nested too deep", kind=TOO_DEEP) from exc
    except ValueError as exc:
        if detect_anti_bot(json_text):
            raise AntiBotError(f"Plone 6 API {base_url} returned an anti-bot challenge page") from exc
        raise HtmlChangedError(f"Plone 6 API {base_url} did not return valid JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise HtmlChangedError(f"Plone 6 API {base_url}: response has no 'items' list")
    items, errors = [], []
    for raw in data["items"]:
        if not isinstance(raw, dict):
            continue
        try:  # one hostile item is reported, the others of the page are kept
            item = parse_plone6_item(raw, base_url)
        except Exception as exc:
            where = f" in Plone 6 item {str(raw.get('@id'))[:200]!r}"
            errors.append(as_scrape_error(exc, where=where))
            continue
        if item is not None:
            items.append(item)
    batching = data.get("batching") if isinstance(data.get("batching"), dict) else {}
    next_url = batching.get("next") if isinstance(batching.get("next"), str) else None
    page = ListingPage(items, urljoin(base_url, next_url) if next_url else None, errors=errors)
    return keep_on_site(page, own_sites(base_url) if sites is None else sites, label=base_url)


def parse_plone6_article(json_text: str, url: str, agency: str) -> Article:
    """A single Plone 6 content object (``GET .../++api++/<path>``) as an :class:`Article`."""
    try:
        data = json.loads(json_text)
    except RecursionError as exc:
        raise HtmlChangedError(f"Plone 6 API {url}: JSON nested too deep", kind=TOO_DEEP) from exc
    except ValueError as exc:
        raise HtmlChangedError(f"Plone 6 API {url} did not return valid JSON: {exc}") from exc
    item = parse_plone6_item(data, url) if isinstance(data, dict) else None
    if item is None:
        raise EmptyContentError(f"Plone 6 API {url}: object has no @id or title")
    return item.to_article(agency)
