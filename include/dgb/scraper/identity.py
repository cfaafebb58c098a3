"""Article identity: readable ``unique_id`` and the dedup ``content_hash``.

``unique_id(agency, published_at, title)`` is ``<slug>_<suffix>`` where

* ``slug`` = :func:`slugify_title` of the title (ASCII, lowercase, hyphens, <= 100 chars,
  cut at a word boundary; ``"sem-titulo"`` when the title has no letters or digits);
* ``suffix`` = first 6 hex digits of ``md5("<agency>_<iso>_<title>")`` (UTF-8), where ``iso`` is
  ``published_at.isoformat()`` after converting it to America/Sao_Paulo (a naive datetime is taken
  as Brasília time). Parsers give second precision, so ``iso`` looks like
  ``2026-02-10T17:05:00-03:00`` (microseconds would appear only if the datetime had them), and the
  same instant expressed in UTC yields the same id.

``content_hash(title, content)`` = first 16 hex digits of
``sha256(normalise_text(title) + "\\n" + normalise_text(content))``; normalising (NFC, whitespace
runs collapsed to one space, stripped) makes it insensitive to re-wrapping and blank lines.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from datetime import datetime
from zoneinfo import ZoneInfo

BRASILIA = ZoneInfo("America/Sao_Paulo")
SLUG_MAX = 100
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_WS = re.compile(r"\s+")


def slugify_title(title: str | None, max_length: int = SLUG_MAX) -> str:
    """ASCII, lowercase, hyphen-separated slug of ``title``, at most ``max_length`` characters."""
    ascii_text = unicodedata.normalize("NFKD", title or "").encode("ascii", "ignore").decode("ascii")
    slug = _NON_ALNUM.sub("-", ascii_text.lower()).strip("-")
    if len(slug) > max_length:
        cut = slug[:max_length]
        # Prefer a word boundary; a single over-long word is cut hard.
        slug = cut.rsplit("-", 1)[0] if "-" in cut else cut
    return slug.strip("-")


def _iso_brasilia(published_at: datetime) -> str:
    if published_at.tzinfo is None:
        published_at = published_at.replace(tzinfo=BRASILIA)
    return published_at.astimezone(BRASILIA).isoformat()


def unique_id(agency: str, published_at: datetime, title: str) -> str:
    """``<slug>_<6 hex of md5("<agency>_<published_at iso>_<title>")>`` (see module docstring)."""
    key = f"{agency}_{_iso_brasilia(published_at)}_{title}"
    suffix = hashlib.md5(key.encode("utf-8"), usedforsecurity=False).hexdigest()[:6]
    return f"{slugify_title(title) or 'sem-titulo'}_{suffix}"


def normalise_text(s: str | None) -> str:
    """NFC-normalise, collapse every whitespace run to one space, strip."""
    return _WS.sub(" ", unicodedata.normalize("NFC", s or "")).strip()


def content_hash(title: str | None, content: str | None) -> str:
    """First 16 hex digits of sha256(normalised title + "\\n" + normalised content)."""
    data = normalise_text(title) + "\n" + normalise_text(content)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()[:16]
