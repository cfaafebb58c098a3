"""Shared HTML helpers: byte decoding, text extraction, URL resolution, Markdown conversion.

Hostile markup is bounded here, for every parser: :func:`parse_html` refuses a page deeper than
:data:`MAX_DOM_DEPTH` or with more than :data:`MAX_DOM_NODES` nodes (``html_changed``, kind
``too_deep``) instead of walking it, and :func:`to_markdown` flattens anything nested deeper than
:data:`MARKDOWN_MAX_DEPTH` to its text before markdownify (which recurses per level). The
clean-up helpers (:func:`drop_nodes`, :func:`text_lengths`) are linear in the node count.
"""

from __future__ import annotations

import codecs
import re
from urllib.parse import urljoin, urlsplit

from markdownify import markdownify
from selectolax.lexbor import LexborHTMLParser, LexborNode

from dgb.scrape_errors import TOO_DEEP, HtmlChangedError
from dgb.scraper.models import MAX_CONTENT_CHARS

# Real gov.br/EBC pages are ~30-40 elements deep with a few thousand nodes; these caps leave a wide
# margin while keeping every walk over a page (and markdownify's recursion) bounded.
MAX_DOM_DEPTH = 200
MAX_DOM_NODES = 60_000
MARKDOWN_MAX_DEPTH = 40  # levels below the fragment root kept as markup; deeper -> plain text

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
# Browsers decode these labels as windows-1252.
_AS_CP1252 = {"iso-8859-1", "iso8859-1", "latin-1", "latin1", "l1", "us-ascii", "ascii", "cp819"}
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    label = label.strip().strip("\"'").lower()
    if label in _AS_CP1252:
        return "cp1252"
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


def decode_bytes(data: bytes, charset: str | None = None) -> str:
    """Decode a fetched page: its declared charset (HTTP header, else ``<meta charset>``), or,
    when it declares none, UTF-8 then cp1252.

    A page whose bytes are invalid in the charset it declares is broken, not guessed at (a
    guess would store mojibake): :class:`~dgb.scrape_errors.HtmlChangedError`. So is input
    that decodes under no candidate, or decodes to text full of control characters (binary);
    a few stray NUL characters in a text page are removed.
    """
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
        charset = "utf-8"
    meta = _META_CHARSET.search(data[:4096])
    declared = _codec(charset) or _codec(meta.group(1).decode("ascii") if meta else None)
    candidates = [declared] if declared else ["utf-8", "cp1252"]
    for codec in candidates:
        try:
            text = data.decode(codec)
        except (UnicodeDecodeError, LookupError) as exc:
            if declared:
                raise HtmlChangedError(
                    f"broken encoding: page declares {declared} but its bytes are not valid {declared} "
                    f"({exc.reason} at byte {getattr(exc, 'start', '?')})"
                ) from exc
            continue
        if len(_CONTROL.findall(text)) > max(8, len(text) // 200):
            break  # decodes, but it is binary
        return text.replace("\x00", "")  # a few stray NULs in a text page: dropped (PostgreSQL refuses them)
    raise HtmlChangedError(
        f"undecodable page: {len(data)} bytes are not UTF-8 or cp1252 text (binary content?)"
    )


def parse_html(html: str) -> LexborHTMLParser:
    """The page's DOM, refused (``html_changed``, kind ``too_deep``) when it is deeper than
    :data:`MAX_DOM_DEPTH` or has more than :data:`MAX_DOM_NODES` nodes: no page we know looks
    like that, and every later walk stays bounded."""
    tree = LexborHTMLParser(html)
    check_dom_limits(tree)
    return tree


def check_dom_limits(tree: LexborHTMLParser, max_depth: int = MAX_DOM_DEPTH, max_nodes: int = MAX_DOM_NODES):
    """Raise ``html_changed`` (kind ``too_deep``) when ``tree`` exceeds the depth or node cap.
    One iterative walk that stops at the first excess (no recursion)."""
    root = tree.root
    if root is None:
        return
    stack, count = [(root, 0)], 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if depth > max_depth:
            raise HtmlChangedError(f"page nested deeper than {max_depth} levels", kind=TOO_DEEP)
        if count > max_nodes:
            raise HtmlChangedError(f"page has more than {max_nodes} nodes", kind=TOO_DEEP)
        child = node.child
        while child is not None:
            stack.append((child, depth + 1))
            child = child.next


def text_lengths(root: LexborNode) -> dict[int, int]:
    """Raw text length of every node's subtree under ``root`` (by ``mem_id``), in one post-order
    walk: lets clean-up skip nodes whose text is too long to matter without re-reading each
    subtree (which is quadratic on nested markup)."""
    lengths: dict[int, int] = {}
    stack: list[tuple[LexborNode, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if node.tag == "-text":
            lengths[node.mem_id] = len(node.text_content or "")
            continue
        child = node.child
        if done:
            total = 0
            while child is not None:
                total += lengths.get(child.mem_id, 0)
                child = child.next
            lengths[node.mem_id] = total
            continue
        stack.append((node, True))
        while child is not None:
            stack.append((child, False))
            child = child.next
    return lengths


def trim_text(root: LexborNode, max_chars: int) -> bool:
    """Cut the subtree of ``root`` after its first ``max_chars`` characters of text (in place):
    what follows the cut is removed, the text node it falls in is shortened. Linear; True when
    something was cut. Lets the Markdown conversion see only what the content cap keeps."""
    lengths = text_lengths(root)
    if lengths.get(root.mem_id, 0) <= max_chars:
        return False
    budget, node = max_chars, root
    while node is not None:
        inside = None
        for child in list(node.iter(include_text=True)):
            if inside is not None or budget <= 0:
                child.decompose()  # after the cut
                continue
            size = lengths.get(child.mem_id, 0)
            if size <= budget:
                budget -= size
            else:
                inside = child  # the cut falls in this child
        if inside is not None and inside.tag == "-text":
            inside.replace_with((inside.text_content or "")[:budget])
            break
        node = inside
    return True


def flatten_deep(root: LexborNode, max_depth: int = MARKDOWN_MAX_DEPTH) -> int:
    """Replace every element ``max_depth`` levels below ``root`` that still has element children
    by its text (in place); returns how many subtrees were flattened."""
    stack, deep = [(root, 0)], []
    while stack:
        node, depth = stack.pop()
        if depth >= max_depth:
            if node.tag != "-text" and any(c.tag != "-text" for c in node.iter(include_text=True)):
                deep.append(node)
            continue
        child = node.child
        while child is not None:
            stack.append((child, depth + 1))
            child = child.next
    for node in deep:
        node.replace_with(" ".join(node.text(deep=True, separator=" ").split()))
    return len(deep)


def text_of(node: LexborNode | None, sep: str = "") -> str:
    """Node text with whitespace collapsed ("" for None). ``sep`` joins text nodes."""
    if node is None:
        return ""
    return " ".join(node.text(deep=True, separator=sep).split())


def first_text(root: LexborNode | LexborHTMLParser, *selectors: str, sep: str = "") -> str | None:
    """Text of the first node matching one of ``selectors`` (in order) that has any text."""
    for selector in selectors:
        for node in root.css(selector):
            text = text_of(node, sep)
            if text:
                return text
    return None


def meta_content(tree: LexborHTMLParser, *names: str) -> str | None:
    for name in names:
        node = tree.css_first(f'meta[property="{name}"], meta[name="{name}"]')
        if node is not None and (node.attributes.get("content") or "").strip():
            return (node.attributes.get("content") or "").strip()
    return None


def first_path_segment(url: str) -> str:
    """``mec`` for ``https://www.gov.br/mec/pt-br/...`` (the gov.br agency key); "" for a bare host."""
    return next((part for part in urlsplit(url).path.split("/") if part), "")


def site_root(page_url: str, agency: str | None = None) -> str:
    """``https://host/<agency>/``: the Plone site that serves ``page_url``.

    The site root ends at the agency's path segment, keeping any prefix before it (the local
    mirror serves ``http://127.0.0.1:P/www.gov.br/<agency>/...``). When ``agency`` is not
    given, or not in the path, the page URL's first segment is used.
    """
    parts = urlsplit(page_url)
    segments = [p for p in parts.path.split("/") if p]
    if agency and agency in segments:
        prefix = segments[: segments.index(agency) + 1]
    else:
        prefix = segments[:1] if (agency is None or not segments) else [agency]
    path = "/".join(prefix)
    return f"{parts.scheme or 'https'}://{parts.netloc}/{path + '/' if path else ''}"


def drop_nodes(nodes: list[LexborNode]) -> None:
    """Destroy ``nodes``, skipping those inside another one of them (destroyed with it).

    Destroying a node frees its subtree, so nested matches must not be touched afterwards.
    """
    unique = list({n.mem_id: n for n in nodes}.values())
    ids = {n.mem_id for n in unique}
    # ancestors already walked, by whether one of ``nodes`` is above them: keeps this linear
    covered: dict[int, bool] = {}
    outer = []
    for node in unique:
        path, parent, inside = [], node.parent, False
        while parent is not None:
            if parent.mem_id in ids:
                inside = True
                break
            if parent.mem_id in covered:
                inside = covered[parent.mem_id]
                break
            path.append(parent.mem_id)
            parent = parent.parent
        for mem_id in path:
            covered[mem_id] = inside
        if not inside:
            outer.append(node)
    for node in outer:
        node.decompose()


def absolute_url(href: str | None, page_url: str, agency: str | None = None) -> str | None:
    """Make ``href`` absolute against ``page_url``.

    resolveuid rule: a relative link containing ``resolveuid/<uid>`` (``resolveuid/abc``,
    ``../../resolveuid/abc/@@images/image``) points at Plone's UID resolver of the *site root*,
    so everything from ``resolveuid/`` on is appended to ``https://host/<agency>/``
    (:func:`site_root`), whatever the page's own path. Absolute URLs are kept as they are
    (protocol-relative ones get the page's scheme); ``data:``/``javascript:``/``mailto:`` and
    bare fragments give None.
    """
    href = (href or "").strip()
    if not href or href.startswith("#") or re.match(r"(?i)(data|javascript|mailto|tel):", href):
        return None
    if not urlsplit(href).scheme and not href.startswith("//"):
        idx = href.find("resolveuid/")
        if idx >= 0:
            return site_root(page_url, agency) + href[idx:]
    return urljoin(page_url, href)


def absolutise_links(root: LexborNode, page_url: str, agency: str | None = None) -> None:
    """Rewrite ``img[src]`` and ``a[href]`` under ``root`` to absolute URLs (in place)."""
    for attr, selector in (("src", "img[src]"), ("href", "a[href]")):
        for node in root.css(selector):
            url = absolute_url(node.attributes.get(attr), page_url, agency)
            if url:
                node.attrs[attr] = url


def to_markdown(html: str, max_chars: int = MAX_CONTENT_CHARS) -> str:
    """Markdown of an HTML fragment: ATX headings, "-" bullets, at most one blank line in a row.

    Bounded on hostile input: a fragment over the node cap is refused (``html_changed``), text
    past ``max_chars`` (the stored content cap) is cut before conversion, and markup nested
    deeper than :data:`MARKDOWN_MAX_DEPTH` is flattened to text, so markdownify (which parses
    again and recurses per level) only ever sees a bounded, shallow fragment."""
    if html and "<" in html:
        fragment = LexborHTMLParser(html)
        check_dom_limits(fragment, max_depth=MAX_DOM_NODES)  # depth is flattened just below
        body = fragment.body
        if body is not None and (trim_text(body, max_chars) | bool(flatten_deep(body))):
            html = body.inner_html or ""
    md = markdownify(html, heading_style="ATX", bullets="-", strip=["iframe", "video", "audio", "source"])
    lines = [line.rstrip() for line in md.replace("\xa0", " ").splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
