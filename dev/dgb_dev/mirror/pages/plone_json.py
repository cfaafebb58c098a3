"""The Plone 6 REST API of a gov.br agency (``++api++``): ``@search`` results and item JSON.

Item body (``article_variant(a).plone_body``, ``(v // 200) % 8`` with v = md5("<agency>/<slug>") as
int; the shapes real Plone 6 sites serve, none losing text): 0 one ``text`` block whose ``text`` is
an HTML string, 1 one ``textBlock`` per paragraph with a plain string, 2 no text blocks but the
item's ``text`` RichText ``{"data": html, "content-type": ...}``, 3 no text blocks but ``text`` as
a plain string, 4-7 one ``slate`` block per paragraph / heading / list (``value`` and
``plaintext``); always after a ``title`` block. ``effective``/``modified`` are UTC with
``+00:00``, as the Plone REST API writes them. The search's order (``sort_on``) and a summary's
catalog columns (``metadata_fields``) are :mod:`.plone_catalog`'s.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from dgb_dev.mirror.content import GOVBR, Article, MirrorAgency, article_variant, int_param, iso_utc
from dgb_dev.mirror.pages import plone_catalog
from dgb_dev.mirror.pages.blocks import block_html, block_slate, parse_blocks, plain

if TYPE_CHECKING:  # the Site calls these renderers with itself; only its public methods are used
    from dgb_dev.mirror.site import Site


def plone_search(site: Site, base: str, ag: MirrorAgency, path: str, params: Mapping[str, str]) -> dict:
    in_scope = ag.path == path or ag.path.startswith(path + "/") or path == ""
    ptype = params.get("portal_type", "News Item")
    items = site.articles(ag.key) if in_scope and ptype in ("News Item", "") else []
    if params.get("Title"):  # Plone's Title index: every word of the query in the title
        words = [w for w in re.findall(r"\w+", params["Title"].lower()) if w]
        items = [a for a in items if all(w in re.findall(r"\w+", a.title.lower()) for w in words)]
    items = plone_catalog.sort_items(items, params)
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
    page = items[start : start + size]
    out["items"] = [{**plone_catalog.columns(a, params), **plone_item(site, base, a, full)} for a in page]
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
