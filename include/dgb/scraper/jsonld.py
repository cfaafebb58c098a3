"""JSON-LD (``script[type="application/ld+json"]``) article metadata, tolerant of broken JSON."""

from __future__ import annotations

import html as htmllib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from dgb.scraper.dates import parse_iso_datetime
from dgb.scraper.identity import iso_as_given
from dgb.scraper.models import clean_text

_ARTICLE_TYPES = ("NewsArticle", "ReportageNewsArticle", "AnalysisNewsArticle", "Article", "BlogPosting")
MAX_JSONLD_CHARS = 1_000_000  # one ld+json script; real ones are a few kB
_MAX_WALK_DEPTH = 8  # lists and @graph levels looked into for the article object


@dataclass
class JsonLdArticle:
    headline: str | None = None
    published_at: datetime | None = None
    updated_at: datetime | None = None
    image: str | None = None


def loads_jsonld(raw: str, *, strict: bool = True) -> Any:
    """One ld+json script as JSON. Raises ``ValueError`` (never RecursionError) for a script
    that is not JSON, over :data:`MAX_JSONLD_CHARS`, or nested deeper than the parser allows:
    every caller already treats ValueError as "not usable JSON-LD"."""
    if len(raw) > MAX_JSONLD_CHARS:
        raise ValueError(f"ld+json script of {len(raw)} characters is over the cap {MAX_JSONLD_CHARS}")
    try:
        return json.loads(raw, strict=strict)
    except RecursionError as exc:
        raise ValueError("ld+json script nested too deep") from exc


def _walk(data: Any) -> Iterator[dict]:
    """The objects of a JSON-LD document: itself, list entries and ``@graph`` members, in document
    order, looking at most :data:`_MAX_WALK_DEPTH` levels down (iterative: any nesting is safe)."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > _MAX_WALK_DEPTH:
            continue
        if isinstance(node, list):
            stack.extend((entry, depth + 1) for entry in reversed(node))
        elif isinstance(node, dict):
            yield node
            stack.append((node.get("@graph"), depth + 1))


def _types(obj: dict) -> list[str]:
    """``@type`` as a list of strings; anything else (a number, an object) counts as no type."""
    kind = obj.get("@type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    return []


def _rank(obj: dict) -> int:
    types = _types(obj)
    return next(
        (i for i, name in enumerate(_ARTICLE_TYPES) if name in types),
        len(_ARTICLE_TYPES) if "datePublished" in obj else 99,
    )


def _image(value: Any) -> str | None:
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, dict):
        value = value.get("url") or value.get("contentUrl")
    return value if isinstance(value, str) and value.strip() else None


def _regex_field(raw: str, name: str) -> str | None:
    match = re.search(rf'"{name}"\s*:\s*"([^"]*)"', raw)
    return match.group(1) if match else None


def extract_jsonld_article(tree: LexborHTMLParser) -> JsonLdArticle:
    """Headline, dates and image of the page's article object.

    Every ld+json script is read (lists and ``@graph`` included); a NewsArticle is preferred over
    other article types, then over any object with ``datePublished``. Scripts that are not valid
    JSON (e.g. an unescaped quote in ``headline``) still yield their ``datePublished`` /
    ``dateModified`` through a regular expression; their headline is not trusted.
    """
    candidates: list[dict] = []
    broken: list[str] = []
    for script in tree.css('script[type="application/ld+json"]'):
        raw = script.text(deep=True) or ""
        if not raw.strip():
            continue
        try:
            candidates.extend(_walk(loads_jsonld(raw, strict=False)))
        except ValueError:
            broken.append(raw)
    ranked = sorted((c for c in candidates if _rank(c) < 99), key=_rank)
    if ranked:
        obj = ranked[0]
        headline = obj.get("headline") or obj.get("name")
        return JsonLdArticle(
            headline=" ".join(clean_text(htmllib.unescape(headline)).split())
            if isinstance(headline, str)
            else None,
            published_at=parse_iso_datetime(obj.get("datePublished")),
            updated_at=parse_iso_datetime(obj.get("dateModified")),
            image=_image(obj.get("image")),
        )
    for raw in broken:
        published = parse_iso_datetime(_regex_field(raw, "datePublished"))
        if published:
            return JsonLdArticle(
                published_at=published, updated_at=parse_iso_datetime(_regex_field(raw, "dateModified"))
            )
    return JsonLdArticle()


def production_date_published(tree: LexborHTMLParser) -> str | None:
    """The JSON-LD ``datePublished`` text production's unique id hashed, or None.

    Production read the ld+json scripts in order with a strict JSON parser, looked only at a top-level
    object or the entries of a top-level list (no ``@graph``), took the first whose ``@type`` is
    exactly ``"NewsArticle"`` and has a ``datePublished`` key, and re-printed it through
    ``datetime.fromisoformat`` (:func:`~dgb.scraper.identity.iso_as_given`). A script that is not
    valid JSON, or a value ``fromisoformat`` refuses, moved it on to the next script; anything else
    unexpected (an entry that is not an object, a ``datePublished`` that is not a string) made it
    give up on JSON-LD altogether and read the page text instead.
    """
    for script in tree.css('script[type="application/ld+json"]'):
        try:
            data = loads_jsonld(script.text(deep=True) or "")
        except ValueError:
            continue
        for entry in data if isinstance(data, list) else [data]:
            if not isinstance(entry, dict):
                return None
            if entry.get("@type") == "NewsArticle" and "datePublished" in entry:
                value = entry["datePublished"]
                if not isinstance(value, str):
                    return None
                printed = iso_as_given(value)
                if printed is not None:
                    return printed
                break  # production's ValueError skipped the rest of this script
    return None
