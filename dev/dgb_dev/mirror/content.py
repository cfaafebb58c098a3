"""Content model of the mirror: articles and agencies as the site holds them, how an article
file is read, the per-article markup variant, and the small text/date helpers pages share."""

from __future__ import annotations

import hashlib
import html
import json
import logging
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from dgb.scraper.dags import CORPUS

log = logging.getLogger("dgb_dev.mirror")

BRT = timezone(timedelta(hours=-3))
GOVBR = "www.gov.br"
DEFAULT_LISTING_PATH = "pt-br/assuntos/noticias"
# The corpus stays in the shipped package: the scraper's mirror-mode agency selection reads it too.
DEFAULT_CORPUS = CORPUS
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


def md5_int(*parts: str) -> int:
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
    return dt.astimezone(UTC).isoformat(timespec="seconds")


def http_date(dt: datetime) -> str:
    return format_datetime(dt.astimezone(UTC), usegmt=True)


def mirror_url(base: str, url: str) -> str:
    """``https://host/p?q`` -> ``{base}/host/p?q``; anything else unchanged."""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.netloc:
        return f"{base}/{parts.netloc}{parts.path}" + (f"?{parts.query}" if parts.query else "")
    return url


def query_params(query: str) -> dict[str, str]:
    """Last value per key; ``+`` and ``%20`` both decode to a space."""
    return {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}


def int_param(params: Mapping[str, str], *names: str, default: int = 0) -> int:
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
    return Article(
        agency=agency,
        slug=slug,
        title=title,
        content=str(content or ""),
        published_at=published,
        modified_at=modified,
        subtitle=str(data.get("subtitle") or ""),
        category=str(data.get("category") or ""),
        tags=tuple(str(t) for t in tags),
        image_url=data.get("image_url") or None,
        source=source,
    )


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
            for obj in data if isinstance(data, list) and path.suffix == ".json" else [data]:
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
    v = md5_int(a.agency, a.slug)
    jsonld = "present" if v % 10 < 7 else "malformed" if v % 10 == 7 else "absent"
    byline = "full" if jsonld != "absent" or (v // 10) % 2 == 0 else "text"
    return Variant(
        jsonld,
        byline,
        "relative" if (v // 20) % 2 == 0 else "absolute",
        (v // 40) % 5 == 0,
        PLONE_BODIES[(v // 200) % 8] if (v // 200) % 8 < 4 else "slate",
        ("data-echo", "noscript", "src")[(v // 1600) % 3],
        ("span", "text")[(v // 4800) % 2],
    )


def listing_shape(key: str) -> str:
    if key in FIXED_SHAPES:
        return FIXED_SHAPES[key]
    n = int(hashlib.md5(key.encode()).hexdigest()[:8], 16) % 10
    return SHAPES[max(0, n - 6)]


def listing_icons(key: str) -> bool:
    return (int(hashlib.md5(key.encode()).hexdigest()[:8], 16) // 10) % 2 == 0


def recent_base(articles: list[Article], now: datetime, newest_age_s: float) -> list[Article]:
    """Each agency's articles moved in time together, so that its newest is ``newest_age_s`` old at
    ``now`` (the gaps between them, and each one's publication -> modification span, kept).

    A corpus of real articles carries the dates they had months ago; served as they are, every
    agency looks dormant to a cadence that learns from publication times, which the agencies under
    production's load are not (``scripts/bench_chaos.py``: ``DGB_MIRROR_BASE_NEWEST_AGE``)."""
    if newest_age_s < 0:
        raise ValueError(f"the base's newest article cannot be {newest_age_s} s in the future")
    newest: dict[str, datetime] = {}
    for a in articles:
        if a.agency not in newest or a.published_at > newest[a.agency]:
            newest[a.agency] = a.published_at
    target = now - timedelta(seconds=newest_age_s)
    out = []
    for a in articles:
        shift = target - newest[a.agency]
        out.append(replace(a, published_at=a.published_at + shift, modified_at=a.modified_at + shift))
    return out


def mirror_agencies(registry: Mapping[str, Any] | None) -> dict[str, MirrorAgency]:
    """The agencies the site serves, by key, from the agency catalogue (``None``: ours,
    :func:`dgb.agencies.load_agencies`): where each one's listing lives, and whether it is EBC's."""
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
