"""Article text as the mirror's pages carry it: the corpus's Markdown-ish text split into blocks
(paragraphs, headings, lists, quotes), rendered as HTML or as Plone 6 slate blocks."""

from __future__ import annotations

import html
import re

from dgb_dev.mirror.content import esc, mirror_url

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
