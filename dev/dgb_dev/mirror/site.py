"""Content model and page rendering of the mirror (a local gov.br-like site).

URL map (``B`` = the request's base, e.g. ``http://127.0.0.1:8090``; every link in a page is an
absolute ``B/<host>/...`` URL, external hosts included, so nothing leaves the mirror):

====================================================================  ==============================
``B/health``                                                          ``{"status": "ok", ...}``
``B/robots.txt``, ``B/<host>/robots.txt``                             allow all but
                                                                      ``/www.gov.br/<agency>/privado``
``B/www.gov.br/<agency>[/pt-br]``                                     portal home (links to listing)
``B/www.gov.br/<agency>/<listing>?b_start:int=N``                     classic listing, 30 a page
``B/www.gov.br/<agency>/<listing>/<slug>``                            classic article
``B/www.gov.br/<agency>/++api++[/<listing>]/@search?...``             Plone 6 search JSON (``Title=``
                                                                      filters on title words)
``B/www.gov.br/<agency>/++api++/<listing>/<slug>``                    Plone 6 item JSON
``.../resolveuid/<uid>[/@@images/image]``, ``.../<slug>/@@images/..``  JPEG (unknown uid: 404)
``.../imagens/...``, any path ending .jpg/.jpeg/.png/.gif              JPEG / PNG
``B/agenciabrasil.ebc.com.br/ultimas?page=N`` (and tvbrasil)          EBC listing, 10 a page
``B/<ebc host>/<section>/noticia/<YYYY-MM>/<slug>``                   EBC article
====================================================================  ==============================

``<listing>`` is the agency's path from ``dgb.agencies.load_agencies()`` (the part of its
``url`` after ``/<key>/``), default ``pt-br/assuntos/noticias``.

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
* YouTube iframe (``B/www.youtube.com/embed/<id>``) when ``(v // 40) % 5 == 0``;
* Plone JSON body (``(v // 200) % 8``; the shapes real Plone 6 sites serve, none losing text): 0 one
  ``text`` block whose ``text`` is an HTML string, 1 one ``textBlock`` per paragraph with a plain
  string, 2 no text blocks but the item's ``text`` RichText ``{"data": html, "content-type": ...}``,
  3 no text blocks but ``text`` as a plain string, 4-7 one ``slate`` block per paragraph / heading /
  list (``value`` and ``plaintext``); always after a ``title`` block. ``effective``/``modified``
  are UTC with ``+00:00``, as the Plone REST API writes them.

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
import html
import json
import logging
import os
import random
import re
import struct
import threading
import unicodedata
import uuid
import zlib
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path
from typing import Any, Iterable, Mapping
from urllib.parse import parse_qs, quote, urlsplit

from dgb.scraper.dags import CORPUS

log = logging.getLogger("dgb_dev.mirror")

BRT = timezone(timedelta(hours=-3))
GOVBR = "www.gov.br"
DEFAULT_LISTING_PATH = "pt-br/assuntos/noticias"
# The corpus stays in the shipped package: the scraper's mirror-mode agency selection reads it too.
DEFAULT_CORPUS = CORPUS
EXTRA_ENV = "DGB_MIRROR_EXTRA"
PAGE_SIZE = 30
EBC_PAGE_SIZE = 10
EBC_REUSED = 12
# Production's agency keys for the EBC hosts (when the agency catalogue names none).
EBC_DEFAULTS = {"agenciabrasil.ebc.com.br": "agencia_brasil", "tvbrasil.ebc.com.br": "tvbrasil"}
TV_BRASIL = "tvbrasil.ebc.com.br"
EBC_NAMES = {"agenciabrasil.ebc.com.br": "Agência Brasil", "tvbrasil.ebc.com.br": "TV Brasil"}
PLONE_BODIES = ("text_html", "textblock_plain", "item_text_rich", "item_text_plain")
SHAPES = ("tileItem", "ul.noticias", "div.entries", "div.item")
# Registry agencies pinned to a fallback shape so the stack always meets every shape.
FIXED_SHAPES = {"mds": "ul.noticias", "mma": "div.entries", "turismo": "div.item", "mec": "tileItem"}
KEY_RE = re.compile(r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$")  # production's keys may hold "_" (agencia_brasil)
_IMAGE_EXT = (".jpg", ".jpeg", ".png", ".gif")


# -- small helpers ------------------------------------------------------------------------------


def _h(*parts: str) -> int:
    return int(hashlib.md5("/".join(parts).encode()).hexdigest(), 16)


def esc(text: Any) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def slugify(text: str, max_len: int = 120) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    return slug[:max_len].rstrip("-") or "noticia"


def parse_when(value: Any) -> datetime:
    """ISO 8601 (``Z``, offsets, naive = Brasília time, date only) -> aware datetime."""
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, date):
        dt = datetime(value.year, value.month, value.day)
    elif isinstance(value, str) and value.strip():
        dt = datetime.fromisoformat(value.strip().replace(" ", "T", 1))
    else:
        raise ValueError(f"published_at must be an ISO 8601 string, got {value!r}")
    return dt if dt.tzinfo else dt.replace(tzinfo=BRT)


def br_date(dt: datetime) -> str:
    return dt.astimezone(BRT).strftime("%d/%m/%Y")


def br_time(dt: datetime) -> str:
    return dt.astimezone(BRT).strftime("%Hh%M")


def iso_brt(dt: datetime) -> str:
    return dt.astimezone(BRT).isoformat(timespec="seconds")


def iso_utc(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="seconds")


def http_date(dt: datetime) -> str:
    return format_datetime(dt.astimezone(timezone.utc), usegmt=True)


def mirror_url(base: str, url: str) -> str:
    """``https://host/p?q`` -> ``{base}/host/p?q``; anything else unchanged."""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.netloc:
        return f"{base}/{parts.netloc}{parts.path}" + (f"?{parts.query}" if parts.query else "")
    return url


def query_params(query: str) -> dict[str, str]:
    """Last value per key; ``+`` and ``%20`` both decode to a space."""
    return {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}


def _int_param(params: Mapping[str, str], *names: str, default: int = 0) -> int:
    for name in names:
        raw = params.get(name)
        if raw not in (None, ""):
            try:
                return max(0, int(raw))
            except ValueError:
                return default
    return default


def is_image_path(path: str) -> bool:
    segs = [s for s in path.split("/") if s]
    if any(s in ("@@images", "resolveuid", "imagens") for s in segs):
        return True
    return bool(segs) and segs[-1].lower().endswith(_IMAGE_EXT)


# -- images ---------------------------------------------------------------------------------------


def _huffman_codes(counts: list[int], symbols: list[int]) -> dict[int, tuple[int, int]]:
    codes, code, k = {}, 0, 0
    for length, n in enumerate(counts, start=1):
        for _ in range(n):
            codes[symbols[k]] = (code, length)
            code, k = code + 1, k + 1
        code <<= 1
    return codes


def make_jpeg(level: int, size: int = 16) -> bytes:
    """A valid baseline greyscale JPEG of one flat colour (quant table of 1s, DC-only blocks)."""
    def seg(marker: int, payload: bytes) -> bytes:
        return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload

    dc_counts, dc_syms = [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0], list(range(12))
    ac_counts, ac_syms = [1] + [0] * 15, [0]  # a single symbol: end-of-block
    dc_codes = _huffman_codes(dc_counts, dc_syms)
    bits: list[int] = []

    def put(value: int, length: int) -> None:
        bits.extend((value >> i) & 1 for i in range(length - 1, -1, -1))

    prev, dc = 0, 8 * (max(0, min(255, level)) - 128)
    for _ in range((size // 8) ** 2):
        diff, prev = dc - prev, dc
        cat = abs(diff).bit_length()
        put(*dc_codes[cat])
        if cat:
            put(diff if diff > 0 else diff + (1 << cat) - 1, cat)
        put(0, 1)  # EOB
    bits.extend([1] * (-len(bits) % 8))
    data = bytearray()
    for i in range(0, len(bits), 8):
        byte = int("".join(map(str, bits[i:i + 8])), 2)
        data.append(byte)
        if byte == 0xFF:
            data.append(0)
    return b"".join([
        b"\xff\xd8",
        seg(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"),
        seg(0xDB, b"\x00" + bytes([1] * 64)),
        seg(0xC0, struct.pack(">BHHB", 8, size, size, 1) + bytes([1, 0x11, 0])),
        seg(0xC4, b"\x00" + bytes(dc_counts) + bytes(dc_syms) + b"\x10" + bytes(ac_counts) + bytes(ac_syms)),
        seg(0xDA, bytes([1, 1, 0x00, 0, 63, 0])),
        bytes(data),
        b"\xff\xd9",
    ])


def make_png(rgb: tuple[int, int, int], size: int = 16) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + bytes(rgb) * size for _ in range(size))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


# -- content: Markdown-ish text -> blocks -> HTML / Plone blocks ---------------------------------

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
    out = _LINK_RE.sub(lambda m: f'<a href="{esc(mirror_url(base, html.unescape(m.group(2))))}">{m.group(1)}</a>', out)
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
        value = [{"type": kind, "children": [{"type": "li", "children": [{"text": plain(i)}]} for i in block[1]]}]
        return {"@type": "slate", "value": value, "plaintext": "\n".join(plain(i) for i in block[1])}
    text = plain(block[-1])
    node_type = {"p": "p", "quote": "blockquote"}.get(kind, f"h{block[1] if kind == 'h' else 2}")
    return {"@type": "slate", "value": [{"type": node_type, "children": [{"text": text}]}], "plaintext": text}


# -- model ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Article:
    agency: str
    slug: str
    title: str
    content: str
    published_at: datetime
    modified_at: datetime
    subtitle: str = ""
    category: str = ""
    tags: tuple[str, ...] = ()
    image_url: str | None = None
    source: str = "corpus"  # corpus | control | extra | ebc-reuse | held
    origin_slug: str | None = None  # the slug it was created under (kept by a move, as Plone keeps UIDs)

    @property
    def key(self) -> tuple[str, str]:
        return (self.agency, self.slug)

    @property
    def uid(self) -> str:
        return hashlib.md5(f"{self.agency}/{self.origin_slug or self.slug}".encode()).hexdigest()

    @property
    def image_uid(self) -> str | None:
        if not self.image_url:
            return None
        origin = self.origin_slug or self.slug
        return hashlib.md5(f"{self.agency}/{origin}/{self.image_url}".encode()).hexdigest()


def normalise_key(value: Any) -> str:
    key = str(value or "").strip().lower()
    if not KEY_RE.match(key):
        raise ValueError(f"agency key {value!r} is not a valid key (lowercase [a-z0-9], joined by - or _)")
    return key


def article_from_dict(data: Any, *, now: datetime | None = None, source: str = "corpus") -> Article:
    """Build an Article; ``now`` given = control publish (published_at/content optional)."""
    if not isinstance(data, Mapping):
        raise ValueError(f"an article must be a JSON object, got {type(data).__name__}")
    agency = normalise_key(data.get("agency"))
    title = str(data.get("title") or "").strip()
    if not title:
        raise ValueError("missing 'title'")
    content = data.get("content")
    if content is None and now is None:
        raise ValueError("missing 'content'")
    if data.get("published_at") in (None, "") and now is None:
        raise ValueError("missing 'published_at'")
    published = parse_when(data.get("published_at") or now)
    modified_raw = data.get("modified_at") or data.get("updated_at") or data.get("updated_datetime")
    modified = max(published, parse_when(modified_raw)) if modified_raw else published
    tags = data.get("tags") or ()
    if isinstance(tags, str):
        tags = [t for t in (s.strip() for s in tags.split(",")) if t]
    slug = slugify(str(data.get("url_slug") or "").strip("/").split("/")[-1] or title)
    return Article(agency=agency, slug=slug, title=title, content=str(content or ""),
                   published_at=published, modified_at=modified,
                   subtitle=str(data.get("subtitle") or ""), category=str(data.get("category") or ""),
                   tags=tuple(str(t) for t in tags), image_url=data.get("image_url") or None, source=source)


def read_articles(path: Path, source: str) -> list[Article]:
    """Articles of a ``.json`` (object or list) or ``.jsonl`` file; bad items logged and skipped."""
    out: list[Article] = []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("mirror: skipping %s: cannot read: %s", path, exc)
        return out
    if path.suffix == ".jsonl":
        items = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    else:
        items = [(1, text)]
    for lineno, raw in items:
        try:
            data = json.loads(raw)
            for obj in (data if isinstance(data, list) and path.suffix == ".json" else [data]):
                out.append(article_from_dict(obj, source=source))
        except ValueError as exc:  # JSONDecodeError is a ValueError
            log.warning("mirror: skipping %s line %d: %s", path, lineno, exc)
    return out


@dataclass(frozen=True)
class MirrorAgency:
    key: str
    host: str  # www.gov.br or an EBC host
    path: str  # listing path (gov.br) or "ultimas" (EBC)
    name: str
    registered: bool

    @property
    def is_ebc(self) -> bool:
        return self.host != GOVBR


@dataclass(frozen=True)
class Variant:
    jsonld: str  # present | malformed | absent
    byline: str  # full | text
    image_ref: str  # relative | absolute
    video: bool
    plone_body: str  # slate | text_html | textblock_plain | item_text_rich | item_text_plain
    ebc_image: str  # data-echo | noscript | src  (Agência Brasil's lazy-loaded figure)
    tv_date: str  # span | text  (TV Brasil's "No AR em" h5)


def article_variant(a: Article) -> Variant:
    v = _h(a.agency, a.slug)
    jsonld = "present" if v % 10 < 7 else "malformed" if v % 10 == 7 else "absent"
    byline = "full" if jsonld != "absent" or (v // 10) % 2 == 0 else "text"
    return Variant(jsonld, byline, "relative" if (v // 20) % 2 == 0 else "absolute",
                   (v // 40) % 5 == 0, PLONE_BODIES[(v // 200) % 8] if (v // 200) % 8 < 4 else "slate",
                   ("data-echo", "noscript", "src")[(v // 1600) % 3], ("span", "text")[(v // 4800) % 2])


def listing_shape(key: str) -> str:
    if key in FIXED_SHAPES:
        return FIXED_SHAPES[key]
    n = int(hashlib.md5(key.encode()).hexdigest()[:8], 16) % 10
    return SHAPES[max(0, n - 6)]


def listing_icons(key: str) -> bool:
    return (int(hashlib.md5(key.encode()).hexdigest()[:8], 16) // 10) % 2 == 0


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    last_modified: datetime | None = None

    @classmethod
    def html(cls, text: str, status: int = 200, **kw: Any) -> "Response":
        return cls(status, text.encode("utf-8"), **kw)

    @classmethod
    def json(cls, obj: Any, status: int = 200) -> "Response":
        return cls(status, json.dumps(obj, ensure_ascii=False, indent=1).encode("utf-8"),
                   "application/json; charset=utf-8")


@dataclass(frozen=True)
class Route:
    kind: str  # home | listing | article | api_search | api_item | image | robots | privado | index | missing
    agency: MirrorAgency | None = None
    slug: str = ""
    path: str = ""


# -- the site ----------------------------------------------------------------------------------

_UNSET: Any = object()


class Site:
    """Articles by agency, with publish/edit/remove, extra articles and page rendering.

    Thread-safe: public methods take an internal lock; rendering works on frozen Article
    snapshots.
    """

    def __init__(self, corpus_path: str | Path | None = None, *, extra_dir: str | Path | None = _UNSET,
                 registry: Mapping[str, Any] | None = None, removed_status: int = 404,
                 hold_back: float = 0.0, seed: int = 0, clock: Any = None) -> None:
        self.corpus_path = Path(corpus_path) if corpus_path else None
        self._extra_dir_arg = extra_dir
        self.removed_status = removed_status
        self.hold_back = hold_back
        self.seed = seed
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self._lock = threading.RLock()
        self._registry = self._load_registry(registry)
        self._ebc_key_by_host = {a.host: k for k, a in self._registry.items() if a.is_ebc}
        for host, key in EBC_DEFAULTS.items():
            if host not in self._ebc_key_by_host:
                self._ebc_key_by_host[host] = key
                self._registry[key] = MirrorAgency(key, host, "ultimas", EBC_NAMES[host], False)
        self._extra: dict[tuple[str, str], Article] = {}
        self._extra_sig: tuple = ()
        self.reset()

    # -- loading -------------------------------------------------------------------------------
    @staticmethod
    def _load_registry(registry: Mapping[str, Any] | None) -> dict[str, MirrorAgency]:
        if registry is None:
            try:
                from dgb.agencies import load_agencies
                registry = load_agencies()
            except Exception as exc:  # missing module or bad catalogue: run without it
                log.warning("mirror: agency catalogue unavailable (%s); default listing paths", exc)
                registry = {}
        out: dict[str, MirrorAgency] = {}
        for key, agency in registry.items():
            parts = urlsplit(getattr(agency, "url", "") or "")
            name = getattr(agency, "name", None) or key.upper()
            if parts.netloc.endswith(".ebc.com.br"):
                out[key] = MirrorAgency(key, parts.netloc, "ultimas", name, True)
            else:
                segs = [s for s in parts.path.split("/") if s]
                path = "/".join(segs[1:]) or DEFAULT_LISTING_PATH
                out[key] = MirrorAgency(key, GOVBR, path, name, True)
        return out

    def reset(self) -> None:
        """Back to the corpus as loaded: drop publishes, edits, removals; re-hold held-back."""
        with self._lock:
            corpus = read_articles(self.corpus_path, "corpus") if self.corpus_path and self.corpus_path.exists() else []
            if self.corpus_path and not self.corpus_path.exists():
                log.warning("mirror: corpus %s not found; starting empty", self.corpus_path)
            corpus.sort(key=lambda a: (a.published_at, a.slug))
            n_held = round(len(corpus) * self.hold_back) if self.hold_back > 0 else 0
            self._held = [replace(a, source="held") for a in corpus[len(corpus) - n_held:]] if n_held else []
            visible = corpus[:len(corpus) - n_held]
            self._base = {a.key: a for a in visible}
            self._add_ebc_reuse(visible)
            self._removed: dict[tuple[str, str], int] = {}
            self._moved: dict[tuple[str, str], str | None] = {}   # old key -> new slug (None: no redirect)
            self._rng = random.Random(self.seed)
            self._ticks = 0
            self._edited: set[tuple[str, str]] = set()
            self._extra_sig = ()
            self._dirty = True

    def _add_ebc_reuse(self, articles: list[Article]) -> None:
        govbr = [a for a in articles if not self._agency_for(a.agency).is_ebc]
        for host, key in self._ebc_key_by_host.items():
            picked = sorted(govbr, key=lambda a: _h(host, a.agency, a.slug))[:EBC_REUSED]
            for a in picked:
                if (key, a.slug) not in self._base:
                    self._base[(key, a.slug)] = replace(a, agency=key, source="ebc-reuse")

    def _agency_for(self, key: str) -> MirrorAgency:
        return self._registry.get(key) or MirrorAgency(key, GOVBR, DEFAULT_LISTING_PATH, key.upper(), False)

    @property
    def extra_dir(self) -> Path | None:
        raw = os.environ.get(EXTRA_ENV) if self._extra_dir_arg is _UNSET else self._extra_dir_arg
        return Path(raw) if raw else None

    def refresh_extra(self) -> None:
        """Rescan ``DGB_MIRROR_EXTRA`` when its listing or any file's mtime/size changed.

        An extra article with the (agency, slug) of a corpus article replaces it while its file
        exists; control-API edits of extra articles last until their folder changes.
        """
        folder = self.extra_dir
        sig: tuple = ()
        if folder and folder.is_dir():
            try:
                sig = (str(folder),) + tuple(sorted(
                    (e.name, e.stat().st_mtime_ns, e.stat().st_size) for e in os.scandir(folder)
                    if e.is_file() and e.name.endswith((".json", ".jsonl"))))
            except OSError as exc:
                log.warning("mirror: cannot scan %s: %s", folder, exc)
                return
        with self._lock:
            if sig == self._extra_sig:
                return
            self._extra_sig = sig
            extra: dict[tuple[str, str], Article] = {}
            for name, _, _ in sorted(sig[1:]):
                for a in read_articles(folder / name, "extra"):
                    extra[a.key] = a
            self._extra = extra
            self._dirty = True

    # -- index -------------------------------------------------------------------------------
    def _rebuild(self) -> None:
        if not self._dirty:
            return
        merged = {**self._base, **self._extra}
        by_agency: dict[str, list[Article]] = {k: [] for k in self._registry}
        images: dict[str, Article] = {}
        for key, a in merged.items():
            if key in self._removed:
                continue
            by_agency.setdefault(a.agency, []).append(a)
            if a.image_uid:
                images[a.image_uid] = a
        for items in by_agency.values():
            items.sort(key=lambda a: (a.published_at, a.slug), reverse=True)
        self._index, self._images, self._dirty = by_agency, images, False

    def articles(self, agency: str) -> list[Article]:
        """Visible articles of ``agency``, newest first."""
        with self._lock:
            self._rebuild()
            return list(self._index.get(agency, ()))

    def get(self, agency: str, slug: str) -> Article | None:
        with self._lock:
            key = (agency, slug)
            if key in self._removed:
                return None
            return self._extra.get(key) or self._base.get(key)

    def agency(self, key: str) -> MirrorAgency | None:
        with self._lock:
            self._rebuild()
            return self._agency_for(key) if key in self._index else None

    def agency_keys(self) -> list[str]:
        """Every agency key the mirror serves (catalogue, corpus, published and extra)."""
        with self._lock:
            self._rebuild()
            return sorted(self._index)

    def unknown_agency_keys(self) -> list[str]:
        """Served keys missing from the agency catalogue (add them to the local config)."""
        with self._lock:
            self._rebuild()
            return sorted(k for k in self._index if k not in self._registry)

    # -- changes -----------------------------------------------------------------------------
    def _now(self) -> datetime:
        return self.clock().astimezone(timezone.utc).replace(microsecond=0)

    def publish(self, data: Mapping[str, Any]) -> Article:
        """Add an article (top of its agency's listing when newest); a taken slug gets ``-2``..."""
        with self._lock:
            a = article_from_dict(data, now=self._now(), source="control")
            slug, n = a.slug, 2
            while (a.agency, slug) in self._base or (a.agency, slug) in self._extra:
                slug, n = f"{a.slug}-{n}", n + 1
            a = replace(a, slug=slug)
            self._base[a.key] = a
            self._dirty = True
            return a

    def edit(self, agency: str, slug: str, *, title: str | None = None, content: str | None = None,
             image_url: Any = _UNSET, subtitle: str | None = None) -> Article:
        """Change an article in place; ``modified_at`` moves forward at least one second."""
        with self._lock:
            a = self.get(agency, slug)
            if a is None:
                raise KeyError(f"no article {agency}/{slug}")
            changes: dict[str, Any] = {"modified_at": max(self._now(), a.modified_at + timedelta(seconds=1))}
            if title is not None:
                changes["title"] = title
            if content is not None:
                changes["content"] = content
            if subtitle is not None:
                changes["subtitle"] = subtitle
            if image_url is not _UNSET:
                changes["image_url"] = image_url or None
            new = replace(a, **changes)
            (self._extra if a.key in self._extra else self._base)[a.key] = new
            self._edited.add(a.key)
            self._dirty = True
            return new

    def remove(self, agency: str, slug: str, status: int | None = None) -> None:
        """Take an article down; its URL then answers ``status`` (default ``removed_status``)."""
        with self._lock:
            if self.get(agency, slug) is None:
                raise KeyError(f"no article {agency}/{slug}")
            self._removed[(agency, slug)] = int(status or self.removed_status)
            self._dirty = True

    def move(self, agency: str, slug: str, new_slug: str, *, redirect: bool = True) -> Article:
        """Move an article to ``new_slug`` (a URL migration): it is served there (same UID and
        image); its old URL answers 301 to the new one when ``redirect``, else 404."""
        with self._lock:
            a = self.get(agency, slug)
            if a is None:
                raise KeyError(f"no article {agency}/{slug}")
            if not new_slug or "/" in new_slug or (agency, new_slug) in self._base \
                    or (agency, new_slug) in self._extra:
                raise ValueError(f"cannot move {agency}/{slug} to {new_slug!r} (empty, nested or taken)")
            store = self._extra if a.key in self._extra else self._base
            del store[a.key]
            new = replace(a, slug=new_slug, origin_slug=a.origin_slug or a.slug)
            store[new.key] = new
            self._moved[(agency, slug)] = new_slug if redirect else None
            self._dirty = True
            return new

    def moved_to(self, agency: str, slug: str) -> str | None:
        """The slug an old URL redirects to (following chained moves), or None."""
        with self._lock:
            seen = set()
            target = None
            while (agency, slug) in self._moved and slug not in seen:
                seen.add(slug)
                slug = self._moved[(agency, slug)]
                if slug is None:
                    return None
                target = slug
            return target

    def tick(self) -> dict[str, Any]:
        """One step of a live site: publish the oldest held-back article, edit a random one."""
        with self._lock:
            self._ticks += 1
            out: dict[str, Any] = {"tick": self._ticks, "published": None, "edited": None}
            if self._held:
                a = replace(self._held.pop(0), source="corpus")
                self._base[a.key] = a
                self._dirty = True
                out["published"] = f"{a.agency}/{a.slug}"
            keys = sorted(k for k, a in self._base.items() if k not in self._removed and a.source != "ebc-reuse")
            if keys:
                agency, slug = self._rng.choice(keys)
                a = self._base[(agency, slug)]
                if self._rng.random() < 0.8:  # production: 80% of edits were title edits
                    title = re.sub(r" \(atualizada \d+\)$", "", a.title) + f" (atualizada {self._ticks})"
                    self.edit(agency, slug, title=title)
                else:
                    note = f"Atualização {self._ticks}: texto complementado pela assessoria."
                    self.edit(agency, slug, content=a.content.rstrip() + "\n\n" + note)
                out["edited"] = f"{agency}/{slug}"
            return out

    def state(self) -> dict[str, Any]:
        with self._lock:
            self._rebuild()
            return {
                "articles": sum(len(v) for v in self._index.values()),
                "agencies": {k: len(v) for k, v in sorted(self._index.items())},
                "held_back": len(self._held),
                "ticks": self._ticks,
                "published": sorted(f"{a.agency}/{a.slug}" for a in self._base.values() if a.source == "control"),
                "edited": sorted(f"{k[0]}/{k[1]}" for k in self._edited),
                "removed": {f"{k[0]}/{k[1]}": s for k, s in sorted(self._removed.items())},
                "moved": {f"{k[0]}/{k[1]}": s for k, s in sorted(self._moved.items())},
                "extra_dir": str(self.extra_dir) if self.extra_dir else None,
                "extra_articles": len(self._extra),
                "unknown_agencies": sorted(k for k in self._index if k not in self._registry),
            }

    # -- URLs ----------------------------------------------------------------------------------
    def listing_url(self, base: str, ag: MirrorAgency) -> str:
        if ag.is_ebc:
            return f"{base}/{ag.host}/{ag.path}"
        return f"{base}/{GOVBR}/{ag.key}/{ag.path}"

    def article_url(self, base: str, a: Article) -> str:
        ag = self._agency_for(a.agency)
        if ag.is_ebc:
            section = slugify(a.category, 40) if a.category else "geral"
            return f"{base}/{ag.host}/{section}/noticia/{a.published_at.astimezone(BRT):%Y-%m}/{a.slug}"
        return f"{self.listing_url(base, ag)}/{a.slug}"

    def image_src(self, base: str, a: Article, relative: bool = False) -> str | None:
        if not a.image_uid:
            return None
        ag = self._agency_for(a.agency)
        if ag.is_ebc:
            return f"{base}/{ag.host}/sites/default/files/thumbnails/image/{a.slug}.jpg"
        rel = f"resolveuid/{a.image_uid}/@@images/image"
        return rel if relative else f"{base}/{GOVBR}/{a.agency}/{rel}"

    def thumb_src(self, base: str, a: Article) -> str | None:
        if not a.image_url:
            return None
        if self._agency_for(a.agency).is_ebc:
            return self.image_src(base, a)
        url = a.image_url
        if urlsplit(url).scheme:
            return mirror_url(base, url)
        if is_image_path(url):
            return f"{base}/{GOVBR}{url}" if url.startswith("/") else f"{base}/{GOVBR}/{a.agency}/{url}"
        return f"{self.article_url(base, a)}/@@images/image/thumb"

    # -- routing -------------------------------------------------------------------------------
    def route(self, path: str) -> Route:
        segs = [s for s in path.split("/") if s]
        if not segs:
            return Route("index")
        if segs[-1] == "robots.txt" and len(segs) <= 2:
            return Route("robots", path=segs[0] if len(segs) == 2 else "")
        host = segs[0]
        with self._lock:
            self._rebuild()
            if host == GOVBR and len(segs) >= 2 and segs[1] in self._index:
                return self._route_govbr(self._agency_for(segs[1]), segs[2:])
            key = self._ebc_key_by_host.get(host)
            if key and key in self._index:
                ag = self._agency_for(key)
                rest = segs[1:]
                if rest == [ag.path]:
                    return Route("listing", ag)
                if is_image_path("/".join(rest)):
                    return Route("image", ag, path="/".join(rest))
                if len(rest) >= 2:
                    return Route("article", ag, rest[-1])
        return Route("missing")

    def _route_govbr(self, ag: MirrorAgency, rest: list[str]) -> Route:
        listing = ag.path.split("/")
        if not rest or rest == ["pt-br"]:
            return Route("home", ag)
        if rest[0] == "privado":
            return Route("privado", ag)
        if rest[0] == "++api++":
            rest = rest[1:]
            if rest and rest[-1] == "@search":
                return Route("api_search", ag, path="/".join(rest[:-1]))
            if rest[:len(listing)] == listing and len(rest) == len(listing) + 1:
                return Route("api_item", ag, rest[-1])
            return Route("missing", ag)
        if is_image_path("/".join(rest)):
            return Route("image", ag, path="/".join(rest))
        if rest == listing:
            return Route("listing", ag)
        if rest[:len(listing)] == listing and len(rest) == len(listing) + 1:
            return Route("article", ag, rest[-1])
        return Route("missing", ag)

    # -- rendering -----------------------------------------------------------------------------
    def render(self, route: Route, base: str, query: str = "", *, malformed_jsonld: bool = False) -> Response:
        params = query_params(query)
        kind, ag = route.kind, route.agency
        if kind == "index":
            return Response.html(self._index_page(base))
        if kind == "robots":
            return Response(200, self.robots().encode(), "text/plain; charset=utf-8")
        if kind == "home":
            return Response.html(self._home_page(base, ag))
        if kind == "privado":
            return Response.html(_page(base, ag, "Área restrita", "<p>Conteúdo de acesso restrito.</p>"))
        if kind == "listing":
            if ag.is_ebc:
                return Response.html(self._ebc_listing(base, ag, _int_param(params, "page")))
            return Response.html(self._listing(base, ag, _int_param(params, "b_start:int", "b_start")))
        if kind == "api_search":
            return Response.json(self._plone_search(base, ag, route.path, params))
        if kind == "image":
            return self._image(route)
        if kind in ("article", "api_item"):
            with self._lock:
                status = self._removed.get((ag.key, route.slug))
            a = self.get(ag.key, route.slug)
            target = self.moved_to(ag.key, route.slug) if a is None and not status else None
            if target:
                moved = self.get(ag.key, target)
                if moved is not None:
                    url = self.article_url(base, moved)
                    if kind == "api_item":
                        url = f"{base}/{GOVBR}/{ag.key}/++api++/{ag.path}/{moved.slug}"
                    return Response(301, b"", "text/html; charset=utf-8", {"Location": url})
            if status or a is None:
                code = status or 404
                if kind == "api_item":
                    return Response.json({"type": "NotFound", "message": "Resource not found"}, code)
                return Response.html(_error_page(base, code), code)
            if kind == "api_item":
                return Response.json(self._plone_item(base, a, full=True))
            variant = article_variant(a)
            if malformed_jsonld:
                variant = replace(variant, jsonld="malformed")
            page = self._ebc_article(base, ag, a, variant) if ag.is_ebc else self._article(base, ag, a, variant)
            return Response.html(page, last_modified=a.modified_at)
        return Response.html(_error_page(base, 404), 404)

    def robots(self) -> str:
        keys = [k for k in self.agency_keys() if not self._agency_for(k).is_ebc]
        lines = ["User-agent: *"] + [f"Disallow: /{GOVBR}/{k}/privado" for k in keys] + ["Allow: /", ""]
        return "\n".join(lines)

    def _image(self, route: Route) -> Response:
        segs = route.path.split("/")
        if "resolveuid" in segs:
            i = segs.index("resolveuid")
            uid = segs[i + 1] if i + 1 < len(segs) else ""
            with self._lock:
                self._rebuild()
                known = uid in self._images
            if not known:
                return Response(404, b"Not Found", "text/plain; charset=utf-8")
        elif "@@images" in segs and route.agency and not route.agency.is_ebc:
            slug = segs[segs.index("@@images") - 1] if segs.index("@@images") else ""
            if self.get(route.agency.key, slug) is None:
                return Response(404, b"Not Found", "text/plain; charset=utf-8")
        seed = _h(route.agency.key if route.agency else "", route.path)
        if segs[-1].lower().endswith(".png"):
            return Response(200, make_png((seed % 256, (seed >> 8) % 256, (seed >> 16) % 256)), "image/png")
        return Response(200, make_jpeg(40 + seed % 180), "image/jpeg")

    def _index_page(self, base: str) -> str:
        links = []
        for key in self.agency_keys():
            ag = self._agency_for(key)
            links.append(f'<li><a href="{esc(self.listing_url(base, ag))}">{esc(ag.name)}</a> ({key})</li>')
        return (f'<!DOCTYPE html><html lang="pt-br"><head><meta charset="utf-8"><title>dgb mirror</title></head>'
                f"<body><h1>dgb mirror</h1><ul>{''.join(links)}</ul></body></html>")

    def _home_page(self, base: str, ag: MirrorAgency) -> str:
        body = f'<p><a href="{esc(self.listing_url(base, ag))}">Notícias</a></p>'
        return _page(base, ag, ag.name, body)

    # classic listing ----------------------------------------------------------------------
    def _listing(self, base: str, ag: MirrorAgency, start: int) -> str:
        items = self.articles(ag.key)
        page = items[start:start + PAGE_SIZE]
        shape, icons = listing_shape(ag.key), listing_icons(ag.key)
        rendered = "\n".join(self._listing_item(base, a, shape, icons) for a in page)
        if shape == "ul.noticias":
            rendered = f'<ul class="noticias listagem-noticias-com-foto">\n{rendered}\n</ul>'
        elif shape == "div.entries":
            rendered = f'<div class="entries">\n{rendered}\n</div>'
        elif shape == "div.item" and page:  # a menu block in the same shape as the items
            root = f"{base}/{GOVBR}/{ag.key}/pt-br"
            rendered = (f'<div class="item"><a class="btn btn-menu" href="{esc(root)}/assuntos">Menu</a> '
                        f'<a class="button" href="{esc(root)}/canais_atendimento">Clique Aqui</a></div>\n'
                        + rendered)
        if not page:
            rendered = '<p class="discreet">Não há itens nesta pasta.</p>'
        url = self.listing_url(base, ag)
        core = f'<div id="content-core">\n{rendered}\n{_pager(url, start, len(items))}\n</div>'
        content = (f'<h1 class="documentFirstHeading">Notícias</h1>\n{core}\n{_share(base, url)}')
        return _page(base, ag, "Notícias", content, breadcrumbs=[("Notícias", None)], canonical=url)

    def _listing_item(self, base: str, a: Article, shape: str, icons: bool) -> str:
        url, title = esc(self.article_url(base, a)), esc(a.title)
        d, t = br_date(a.published_at), br_time(a.published_at)
        cat, desc = esc(a.category), esc(a.subtitle)
        thumb = self.thumb_src(base, a)
        if shape == "tileItem":
            img = (f'<div class="tileImage"><a href="{url}"><img class="tileImage" src="{esc(thumb)}" '
                   f'alt="{title}" width="128" height="86"></a></div>') if thumb else ""
            if icons:
                byline = (f'<span class="summary-view-icon"><i class="icon-day"></i>{d}</span> '
                          f'<span class="summary-view-icon"><i class="icon-hour"></i>{t}</span> '
                          f'<span class="summary-view-icon"><i class="icon-type"></i>Notícia</span>')
            else:
                byline = f"{d} {t}"
            return (f'<article class="tileItem visualIEFloatFix tile-collective-nitf-content">{img}'
                    f'<div class="tileContent"><span class="subtitle">{cat}</span>'
                    f'<h2 class="tileHeadline"><a href="{url}" class="summary url">{title}</a></h2>'
                    f'<p class="tileBody"><span class="description">{desc}</span></p></div>'
                    f'<div class="tileInfo"><span class="documentByLine">{byline}</span></div>'
                    f'<div class="visualClear"></div></article>')
        img = f'<img src="{esc(thumb)}" alt="{title}">' if thumb else ""
        if shape == "ul.noticias":
            return (f'<li>{img}<span class="subtitle">{cat}</span><h2 class="titulo"><a href="{url}">{title}</a></h2>'
                    f'<p class="descricao">{desc}</p><span class="data">{d} {t}</span></li>')
        if shape == "div.entries":
            return (f'<article class="entry"><header><span class="subtitle">{cat}</span>'
                    f'<h3 class="entry-title"><a class="url" href="{url}">{title}</a></h3></header>{img}'
                    f'<p class="description">{desc}</p><span class="documentByLine">{d} - {t}</span></article>')
        return (f'<div class="item">{img}<span class="subtitle">{cat}</span><h2><a href="{url}">{title}</a></h2>'
                f'<p class="description">{desc}</p><p class="byline">Publicado em {d} {t}</p></div>')

    # classic article ----------------------------------------------------------------------
    def _article(self, base: str, ag: MirrorAgency, a: Article, v: Variant) -> str:
        url = self.article_url(base, a)
        root = f"{base}/{GOVBR}/{ag.key}"
        pub, mod = a.published_at, a.modified_at
        img_abs = self.image_src(base, a)
        head = [f'<meta name="description" content="{esc(a.subtitle)}">',
                f'<meta property="og:title" content="{esc(a.title)}">',
                f'<meta property="og:url" content="{esc(url)}">']
        if v.jsonld != "absent":
            crumbs = {"@context": "https://schema.org", "@type": "BreadcrumbList", "itemListElement": [
                {"@type": "ListItem", "position": 1, "name": "Notícias", "item": self.listing_url(base, ag)},
                {"@type": "ListItem", "position": 2, "name": a.title, "item": url}]}
            head.append(_ldjson(crumbs))
            news = {"@context": "https://schema.org", "@type": "NewsArticle", "headline": "__HEADLINE__",
                    "description": a.subtitle, "datePublished": iso_brt(pub), "dateModified": iso_brt(mod),
                    "mainEntityOfPage": {"@type": "WebPage", "@id": url}, "articleSection": a.category,
                    "keywords": list(a.tags), "image": [img_abs] if img_abs else [],
                    "author": {"@type": "Organization", "name": ag.name},
                    "publisher": {"@type": "Organization", "name": ag.name}}
            headline = json.dumps(a.title, ensure_ascii=False)
            if v.jsonld == "malformed":
                headline = '"' + _with_raw_quotes(a.title) + '"'
            head.append(_ldjson(news).replace('"__HEADLINE__"', headline.replace("</", "<\\/")))
        if v.byline == "full":
            modified = (f'<span class="documentModified"><span>Atualizado em</span> '
                        f'<span class="value">{br_date(mod)} {br_time(mod)}</span></span>')
            byline = (f'<div id="plone-document-byline" class="documentByLine">'
                      f'<span class="documentPublished"><span>Publicado em</span> '
                      f'<span class="value">{br_date(pub)} {br_time(pub)}</span></span> {modified}</div>')
        else:
            later = f" - Atualizado em {br_date(mod)} {br_time(mod)}" if mod > pub else ""
            byline = f'<p class="documentByLine">Publicado em {br_date(pub)} {br_time(pub)}{later}</p>'
        body = [block_html(b, base) for b in parse_blocks(a.content)]
        if a.image_uid:
            src = self.image_src(base, a, relative=v.image_ref == "relative")
            body.insert(0, f'<figure class="image-richtext image-inline"><img src="{esc(src)}" '
                           f'alt="{esc(a.title)}" class="image-inline"><figcaption>Foto: Divulgação/'
                           f'{esc(ag.key.upper())}</figcaption></figure>')
        if v.video:
            vid = hashlib.md5(a.uid.encode()).hexdigest()[:11]
            body.append(f'<p><iframe width="560" height="315" src="{base}/www.youtube.com/embed/{vid}" '
                        f'title="YouTube video player" frameborder="0" allowfullscreen></iframe></p>')
        phone = 2000 + _h(ag.key) % 8000
        body.append(f"<p>Assessoria de Comunicação Social - {esc(ag.name)}<br>Telefone: (61) 2030-{phone:04d}"
                    f"<br>E-mail: imprensa@{esc(ag.key)}.gov.br</p>")
        tags = " ".join(
            f'<span><a class="link-category" rel="tag" href="{esc(root)}/pt-br/search?origem=keyword&amp;'
            f'Subject%3Alist={quote(t)}">{esc(t)}</a></span>' for t in a.tags)
        content = "\n".join([
            f'<p class="nitfSubtitle">{esc(a.category)}</p>' if a.category else "",
            f'<h1 class="documentFirstHeading">{esc(a.title)}</h1>',
            f'<div class="documentDescription">{esc(a.subtitle)}</div>' if a.subtitle else "",
            byline,
            _share(base, url),
            '<div id="content-core"><div id="parent-fieldname-text" class="parent-fieldname-text">',
            "\n".join(body),
            "</div></div>",
            f'<div id="category" class="keywords documentByLine"><span class="tags-label">Tags:</span> {tags}</div>'
            if a.tags else "",
        ])
        return _page(base, ag, a.title, content, head="\n".join(head), canonical=url,
                     breadcrumbs=[("Notícias", self.listing_url(base, ag)), (a.title, None)],
                     body_class="template-view portaltype-collective-nitf-content")

    # Plone 6 JSON -------------------------------------------------------------------------
    def _plone_search(self, base: str, ag: MirrorAgency, path: str, params: Mapping[str, str]) -> dict:
        in_scope = ag.path == path or ag.path.startswith(path + "/") or path == ""
        ptype = params.get("portal_type", "News Item")
        items = self.articles(ag.key) if in_scope and ptype in ("News Item", "") else []
        if params.get("Title"):   # Plone's Title index: every word of the query in the title
            words = [w for w in re.findall(r"\w+", params["Title"].lower()) if w]
            items = [a for a in items if all(w in re.findall(r"\w+", a.title.lower()) for w in words)]
        if params.get("sort_order", "descending") in ("ascending", "asc"):
            items = items[::-1]
        start = _int_param(params, "b_start")
        size = _int_param(params, "b_size", default=25) or 25
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
        out["items"] = [self._plone_item(base, a, full) for a in items[start:start + size]]
        return out

    def _plone_item(self, base: str, a: Article, full: bool) -> dict:
        url = self.article_url(base, a)
        item: dict[str, Any] = {"@id": url, "@type": "News Item", "title": a.title, "description": a.subtitle,
                                "review_state": "published", "type_title": "Notícia"}
        if not full:
            return item
        item.update({"UID": a.uid, "id": a.slug, "head_title": a.category, "language": "pt-br",
                     "created": iso_utc(a.published_at), "effective": iso_utc(a.published_at),
                     "modified": iso_utc(a.modified_at), "Subject": list(a.tags), "subjects": list(a.tags)})
        if a.image_uid:
            item["image"] = {"download": f"{url}/@@images/image-1200-{a.image_uid[:12]}.jpeg",
                             "content-type": "image/jpeg", "filename": f"{a.slug}.jpg", "width": 1200,
                             "height": 675, "scales": {"thumb": {
                                 "download": f"{url}/@@images/image-128-{a.image_uid[:12]}.jpeg",
                                 "width": 128, "height": 72}}}
        else:
            item["image"] = None
        blocks_src = parse_blocks(a.content)
        ids = [str(uuid.UUID(hashlib.md5(f"{a.uid}/{i}".encode()).hexdigest())) for i in range(len(blocks_src) + 1)]
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
            item["text"] = "\n\n".join("\n".join(plain(i) for i in b[1]) if b[0] in ("ul", "ol")
                                       else plain(b[-1]) for b in blocks_src)
        else:
            for bid, b in zip(ids[1:], blocks_src):
                blocks[bid] = block_slate(b)
        item["blocks"] = blocks
        item["blocks_layout"] = {"items": list(blocks)}
        return item

    # EBC -------------------------------------------------------------------------------------
    def _ebc_listing(self, base: str, ag: MirrorAgency, page: int) -> str:
        items = self.articles(ag.key)
        chunk = items[page * EBC_PAGE_SIZE:(page + 1) * EBC_PAGE_SIZE]
        url = self.listing_url(base, ag)
        more = (page + 1) * EBC_PAGE_SIZE < len(items)
        if ag.host == TV_BRASIL:
            rows = []
            for i, a in enumerate(chunk, 1):
                img, href = self.image_src(base, a), esc(self.article_url(base, a))
                rows.append(
                    f'<div class="views-row views-row-{i} views-row-{"odd" if i % 2 else "even"}">'
                    + (f'<div class="views-field-field-imagem"><a href="{href}">'
                       f'<img src="{esc(img)}" alt=""></a></div>' if img else "")
                    + f'<h3 class="heading"><a href="{href}">{esc(a.title)}</a></h3>'
                    f'<span class="date-display-single">{_ebc_when(a.published_at)}</span></div>')
            prev_link, next_link = f"{esc(url)}?page={page - 1}", f"{esc(url)}?page={page + 1}"
            pager = ['<ul class="pager">']
            if page > 0:
                pager.append(f'<li class="pager-previous"><a href="{prev_link}">‹ anterior</a></li>')
            pager.append(f'<li class="pager-current">{page + 1}</li>')
            if more:
                pager.append(f'<li class="pager-next"><a href="{next_link}">próxima ›</a></li>')
            pager.append("</ul>")
            content = "".join(rows) or '<div class="view-empty">Nenhum conteúdo.</div>'
            body = (f'<div class="view view-ultimas view-id-ultimas view-display-id-page">'
                    f'<div class="view-content">{content}</div>{"".join(pager)}</div>')
            return _ebc_page(base, ag, "Últimas", body)
        cards = []
        placeholder = f"{base}/{ag.host}/themes/agenciabrasil/images/loading_v2.gif"
        for a in chunk:
            href, img = esc(self.article_url(base, a)), self.image_src(base, a)
            cards.append(
                f'<div class="post-item col-md-12"><a class="capa-noticia" href="{href}">'
                + (f'<img class="img-fluid" data-echo="{esc(img)}" src="{placeholder}" alt="">'
                   if img else "")
                + (f'<span class="chapeu">{esc(a.category)}</span>' if a.category else "")
                + f'<h4 class="titulo-capa">{esc(a.title)}</h4></a>'
                f'<div class="data">{_ebc_when(a.published_at)}</div>'
                f'<a class="capa-noticia btn btn-link" href="{href}">Leia mais</a></div>')
        item = '<li class="page-item"><a class="page-link" href="{}?page={}">{}</a></li>'
        pages = [item.format(esc(url), page - 1, "Anterior") if page > 0 else "",
                 f'<li class="page-item active"><span class="page-link">{page + 1}</span></li>',
                 item.format(esc(url), page + 1, "Próxima") if more else ""]
        body = (f'<div class="container"><h1 class="titulo-pagina">Últimas notícias</h1>'
                f'<div class="row lista-noticias">{"".join(cards)}</div>'
                f'<nav aria-label="Paginação"><ul class="pagination">{"".join(pages)}</ul></nav></div>')
        return _ebc_page(base, ag, "Últimas notícias", body)

    def _ebc_article(self, base: str, ag: MirrorAgency, a: Article, v: Variant) -> str:
        pub, mod = a.published_at.astimezone(BRT), a.modified_at.astimezone(BRT)
        img, site = self.image_src(base, a), EBC_NAMES.get(ag.host, ag.name)
        head = f'<meta property="og:image" content="{esc(img)}">' if img else ""
        if v.jsonld != "absent":
            news = {"@context": "https://schema.org", "@type": "NewsArticle", "headline": "__HEADLINE__",
                    "description": a.subtitle, "datePublished": iso_brt(pub), "dateModified": iso_brt(mod),
                    "articleSection": a.category, "image": [img] if img else [],
                    "author": {"@type": "Organization", "name": site},
                    "publisher": {"@type": "Organization", "name": "EBC - Empresa Brasil de Comunicação"}}
            headline = (('"' + _with_raw_quotes(a.title) + '"') if v.jsonld == "malformed"
                        else json.dumps(a.title, ensure_ascii=False))
            head += _ldjson(news).replace('"__HEADLINE__"', headline.replace("</", "<\\/"))
        paras = [block_html(b, base) for b in parse_blocks(a.content)]
        tags = [f'<a href="{base}/{ag.host}/tags/{slugify(t)}">{esc(t)}</a>' for t in a.tags]
        if ag.host == TV_BRASIL:  # TV Brasil's text is paragraphs only
            paras = [f"<p>{inline_html(text, base)}</p>" for b in parse_blocks(a.content)
                     for text in (b[1] if b[0] in ("ul", "ol") else [b[-1]])]
            return _ebc_page(base, ag, a.title, self._tvbrasil_body(base, ag, a, v, paras, tags), head=head)
        later = f'<span class="atualizado"> Atualizado em {_ebc_when(mod)}</span>' if mod > pub else ""
        if v.video:
            vid = hashlib.md5(a.uid.encode()).hexdigest()[:11]
            paras.append(f'<p><iframe src="{base}/www.youtube.com/embed/{vid}" allowfullscreen></iframe></p>')
        paras.append(f'<p><img src="{base}/{ag.host}/pixel/{a.uid[:8]}.gif" width="1" height="1" alt=""></p>')
        if _h(a.uid, "credit") % 3 == 0:
            paras.append(f"<p>*Com informações da {esc(site)}</p>")
        figure = ""
        if img:
            placeholder, alt = f"{base}/{ag.host}/themes/agenciabrasil/images/loading_v2.gif", esc(a.title)
            if v.ebc_image == "data-echo":
                tag = f'<img class="img-fluid" data-echo="{esc(img)}" src="{placeholder}" alt="{alt}">'
            elif v.ebc_image == "noscript":
                tag = (f'<img class="img-fluid lazy" src="{placeholder}" alt="{alt}">'
                       f'<noscript><img src="{esc(img)}" alt="{alt}"></noscript>')
            else:
                tag = f'<img class="img-fluid" src="{esc(img)}" alt="{alt}">'
            figure = (f'<figure class="figure">{tag}'
                      f'<figcaption>Foto: Divulgação/{esc(site)}</figcaption></figure>')
        u = quote(self.article_url(base, a), safe="")
        share = (f'<div class="compartilhar">Compartilhe '
                 f'<a href="{base}/www.facebook.com/sharer/sharer.php?u={u}">Facebook</a> '
                 f'<a href="{base}/api.whatsapp.com/send?text={u}">WhatsApp</a></div>')
        body = (f'<div class="container"><article class="materia">'
                f'<h1 class="titulo-materia">{esc(a.title)}</h1>'
                f'<div class="autor-noticia">Repórter da {esc(site)}*</div>'
                f'<div class="data">Publicado em {_ebc_when(pub)}{later}</div>'
                f'{figure}{share}<div class="conteudo-noticia">{"".join(paras)}</div>'
                f'<div class="row-tags">{" ".join(tags)}</div></article></div>')
        return _ebc_page(base, ag, a.title, body, head=head)

    def _tvbrasil_body(self, base: str, ag: MirrorAgency, a: Article, v: Variant, paras: list[str],
                       tags: list[str]) -> str:
        programme = a.category or "Repórter Brasil"
        when = _ebc_when(a.published_at)
        aired = (f'<h5>No AR em <span class="date-display-single">{when}</span></h5>' if v.tv_date == "span"
                 else f"<h5>No AR em {when}</h5>")
        mp4 = f"{base}/{ag.host}/sites/default/files/videos/{a.slug}.mp4"
        video = (f'<div class="player"><video controls><source src="{mp4}" type="video/mp4"></video></div>'
                 if v.video else "")
        notices = ['<p>*Restrição de uso: imagens cedidas apenas para exibição nos canais da EBC.</p>',
                   '<p>Clique aqui para saber como sintonizar a TV Brasil na sua cidade.</p>']
        tag_line = f'<p>Tags: {", ".join(tags)}</p>' if tags else ""
        programme_url = f"{base}/{ag.host}/{slugify(programme)}"
        return (f'<div class="programa"><h4 class="txtNoticias">'
                f'<a href="{programme_url}">{esc(programme)}</a></h4></div>'
                f'<h1>{esc(a.title)}</h1>{aired}{video}'
                f'<article>{"".join(paras)}{"".join(notices)}{tag_line}</article>')


def _ebc_when(dt: datetime) -> str:
    """EBC's date text: ``27/11/2026 - 14:30`` (Brasília time)."""
    return f"{br_date(dt)} - {dt.astimezone(BRT):%H:%M}"


# -- page chrome ---------------------------------------------------------------------------------


def _ldjson(obj: dict) -> str:
    text = json.dumps(obj, ensure_ascii=False).replace("</", "<\\/")
    return f'<script type="application/ld+json">{text}</script>'


def _with_raw_quotes(title: str) -> str:
    """The title with unescaped double quotes (what breaks JSON-LD in the wild)."""
    if '"' in title:
        return title
    words = title.split(" ")
    i = next((n for n, w in enumerate(words) if len(w) >= 4), 0)
    words[i] = f'"{words[i]}"'
    return " ".join(words)


def _pager(url: str, start: int, total: int) -> str:
    if total <= PAGE_SIZE:
        return ""
    lis = []
    if start > 0:
        lis.append(f'<li class="previous"><a class="anterior" href="{esc(url)}?b_start:int={max(0, start - PAGE_SIZE)}">'
                   f"« Anterior</a></li>")
    for n, off in enumerate(range(0, total, PAGE_SIZE), 1):
        if off == start:
            lis.append(f'<li class="active"><span>{n}</span></li>')
        else:
            lis.append(f'<li><a href="{esc(url)}?b_start:int={off}">{n}</a></li>')
    if start + PAGE_SIZE < total:
        lis.append(f'<li class="next"><a class="proximo" href="{esc(url)}?b_start:int={start + PAGE_SIZE}">'
                   f"Próximo »</a></li>")
    return f'<div class="pagination"><ul class="paginacao listingBar">{"".join(lis)}</ul></div>'


def _share(base: str, url: str) -> str:
    u = quote(url, safe="")
    return (f'<div class="social-links documentActions"><span class="share-title">Compartilhe:</span> '
            f'<a class="share-facebook" href="{base}/www.facebook.com/sharer/sharer.php?u={u}">Facebook</a> '
            f'<a class="share-twitter" href="{base}/twitter.com/intent/tweet?url={u}">Twitter</a> '
            f'<a class="share-linkedin" href="{base}/www.linkedin.com/shareArticle?url={u}">LinkedIn</a> '
            f'<a class="share-whatsapp" href="{base}/api.whatsapp.com/send?text={u}">WhatsApp</a> '
            f'<a class="link-copy" href="{esc(url)}">Copiar link</a></div>')


def _page(base: str, ag: MirrorAgency, title: str, content: str, *, head: str = "", canonical: str = "",
          breadcrumbs: Iterable[tuple[str, str | None]] = (), body_class: str = "template-listing_view") -> str:
    root = f"{base}/{GOVBR}/{ag.key}"
    menu = [("Assuntos", f"{root}/pt-br/assuntos"), ("Notícias", f"{root}/{ag.path}"),
            ("Acesso à Informação", f"{root}/pt-br/acesso-a-informacao"), ("Composição", f"{root}/pt-br/composicao"),
            ("Canais de Atendimento", f"{root}/pt-br/canais_atendimento")]
    menu_html = "".join(f'<li><a href="{esc(u)}">{esc(t)}</a></li>' for t, u in menu)
    crumbs = [f'<li><a href="{esc(root)}/pt-br">Página Inicial</a></li>']
    for text, href in breadcrumbs:
        crumbs.append(f'<li><a href="{esc(href)}">{esc(text)}</a></li>' if href else
                      f'<li class="active"><span>{esc(text)}</span></li>')
    canon = f'<link rel="canonical" href="{esc(canonical)}">' if canonical else ""
    return f"""<!DOCTYPE html>
<html lang="pt-br" xml:lang="pt-br">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)} — {esc(ag.name)}</title>
{canon}
{head}
</head>
<body class="{body_class} site-{esc(ag.key)}">
<div id="wrapper">
<header id="header" role="banner">
<div id="barra-brasil"><a href="{base}/{GOVBR}">gov.br</a> <a href="{base}/{GOVBR}/pt-br/orgaos-do-governo">Órgãos do Governo</a></div>
<div id="portal-title"><a href="{esc(root)}/pt-br">{esc(ag.name)}</a></div>
<nav id="portal-globalnav" class="portal-menu"><ul>{menu_html}</ul></nav>
</header>
<main id="main" role="main"><div id="portal-column-content">
<nav class="portal-breadcrumbs" id="portal-breadcrumbs" aria-label="Você está aqui:"><ol>{"".join(crumbs)}</ol></nav>
<div id="content">
{content}
</div>
</div></main>
<footer id="portal-footer">
<div class="footer-links"><a href="{esc(root)}/pt-br/acesso-a-informacao">Acesso à Informação</a>
<a href="{base}/{GOVBR}/pt-br/termos-de-uso">Termos de Uso</a> <a href="{esc(root)}/pt-br/canais_atendimento/ouvidoria">Ouvidoria</a></div>
<p>Todo o conteúdo deste site está publicado sob a licença Creative Commons Atribuição-SemDerivações 3.0 Não Adaptada.</p>
</footer>
</div>
</body>
</html>
"""


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
<header class="site-header"><a class="logo" href="{base}/{ag.host}/">{esc(site)}</a><nav class="menu-editorias"><ul>{menu}</ul></nav></header>
<main id="main-content">
{body}
</main>
<footer class="site-footer"><a href="{base}/www.ebc.com.br/">EBC - Empresa Brasil de Comunicação</a>
<a href="{base}/{ag.host}/termos-de-uso">Termos de uso</a></footer>
</body>
</html>
"""


def _error_page(base: str, status: int) -> str:
    title = "Este conteúdo foi removido" if status == 410 else "Página não encontrada"
    return (f'<!DOCTYPE html><html lang="pt-br"><head><meta charset="utf-8"><title>{title} — gov.br</title></head>'
            f'<body><div id="content"><h1 class="documentFirstHeading">{title}</h1>'
            f'<p>Desculpe, não foi possível encontrar o conteúdo solicitado.</p>'
            f'<p><a href="{base}/{GOVBR}">Ir para o gov.br</a></p></div></body></html>')
