"""Parser results: :class:`ListingItem`, :class:`ListingPage`, :class:`Article`.

This is the boundary where page text enters our models, so it is made safe here, once, for
everything downstream (PostgreSQL, events, the classifier and embedder): NUL characters
(PostgreSQL refuses them in text) and lone UTF-16 surrogates (``"\\ud800"`` in JSON; not
encodable as UTF-8) are removed from every text field (:func:`clean_text`), and each field is
capped (:data:`MAX_TITLE_CHARS`, :data:`MAX_CONTENT_CHARS`, ...), so no model later sees unbounded
text. A capped field is cut at the cap; the cut happens before ``unique_id`` and ``content_hash``
are computed, so they are stable across re-scrapes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dgb.scraper.dates import iso
from dgb.scraper.identity import brasilia_wall_clock, content_hash, listing_day, unique_id

MAX_TITLE_CHARS = 1_000  # gov.br titles are < 300 characters
MAX_SUBTITLE_CHARS = 4_000  # subtitle, editorial lead, category, listing summary
MAX_CONTENT_CHARS = 200_000  # article Markdown; real articles are < 50k characters
MAX_URL_CHARS = 2_000  # under the btree index entry limit (url is indexed)
MAX_TAGS, MAX_TAG_CHARS = 100, 200

_UNSAFE = re.compile("[\x00\ud800-\udfff]")


def clean_text(value: str | None, limit: int | None = None) -> str | None:
    """``value`` without NUL characters and lone surrogates, cut to ``limit`` characters.
    None stays None; a number becomes its text; any other non-string (a JSON object or list
    where text was expected) gives None rather than its Python repr."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        value = str(value)
    elif not isinstance(value, str):
        return None
    value = _UNSAFE.sub("", value)
    return value[:limit] if limit is not None else value


def _clean_tags(tags) -> list[str]:
    out = [clean_text(t, MAX_TAG_CHARS) for t in list(tags or [])[:MAX_TAGS]]
    return [t for t in out if t]


ARTICLE_FIELDS: tuple[str, ...] = (
    "title",
    "subtitle",
    "editorial_lead",
    "category",
    "tags",
    "published_at",
    "updated_at",
    "image_url",
    "video_url",
    "content",
    "unique_id",
    "content_hash",
)


@dataclass
class Article:
    """One parsed news article. Datetimes are tz-aware (America/Sao_Paulo).

    ``unique_id`` is None only when no publication date was found (see
    :meth:`with_published_at` to supply the listing's date). ``id_date`` is the date text that
    production's unique-id hash used for this article (see :mod:`dgb.scraper.identity`); each
    parser sets it from the source it read and documents its rule, and without it the Brasília
    wall clock of ``published_at`` with a fixed -03:00 offset is used (production's rule for
    text dates).
    """

    url: str
    agency: str
    title: str
    subtitle: str | None = None
    editorial_lead: str | None = None
    category: str | None = None
    tags: list[str] = field(default_factory=list)
    published_at: datetime | None = None
    updated_at: datetime | None = None
    image_url: str | None = None
    video_url: str | None = None
    content: str = ""
    id_date: str | None = None
    unique_id: str | None = field(default=None, init=False)
    content_hash: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.url = clean_text(self.url, MAX_URL_CHARS) or ""
        self.agency = clean_text(self.agency, MAX_TAG_CHARS) or ""
        self.title = clean_text(self.title, MAX_TITLE_CHARS) or ""
        self.subtitle = clean_text(self.subtitle, MAX_SUBTITLE_CHARS)
        self.editorial_lead = clean_text(self.editorial_lead, MAX_SUBTITLE_CHARS)
        self.category = clean_text(self.category, MAX_SUBTITLE_CHARS)
        self.tags = _clean_tags(self.tags)
        self.image_url = clean_text(self.image_url, MAX_URL_CHARS)
        self.video_url = clean_text(self.video_url, MAX_URL_CHARS)
        self.content = clean_text(self.content, MAX_CONTENT_CHARS) or ""
        self.id_date = clean_text(self.id_date, MAX_TAG_CHARS)
        self.content_hash = content_hash(self.title, self.content)
        if self.published_at is not None:
            if self.id_date is None:
                self.id_date = brasilia_wall_clock(self.published_at)
            self.unique_id = unique_id(self.agency, self.id_date, self.title)

    def with_published_at(self, published_at: datetime, id_date: str | None = None) -> Article:
        """Fill a missing publication date (e.g. from the listing) and compute ``unique_id``.

        Without ``id_date`` the hash uses midnight of ``published_at``'s Brasília date at -03:00:
        production kept only the listing's day when it fell back to the listing.
        """
        if self.published_at is None:
            self.published_at = published_at
            self.id_date = id_date or listing_day(published_at)
            self.unique_id = unique_id(self.agency, self.id_date, self.title)
        return self

    def to_dict(self) -> dict[str, Any]:
        """The ``dgb parse-article`` JSON object: exactly :data:`ARTICLE_FIELDS`."""
        out = {name: getattr(self, name) for name in ARTICLE_FIELDS}
        out["published_at"], out["updated_at"] = iso(self.published_at), iso(self.updated_at)
        out["tags"] = list(self.tags)
        return out


@dataclass
class ListingItem:
    """One entry of a listing page. Plone 6 JSON items also carry the full article fields."""

    title: str
    url: str
    published_at: datetime | None = None
    category: str | None = None
    summary: str | None = None
    image_url: str | None = None
    updated_at: datetime | None = None
    tags: list[str] = field(default_factory=list)
    content: str | None = None  # set only when the listing holds the full text (Plone 6)
    id_date: str | None = None  # production's hashed date string, for full items (Plone 6)

    def __post_init__(self) -> None:
        self.title = clean_text(self.title, MAX_TITLE_CHARS) or ""
        self.url = clean_text(self.url, MAX_URL_CHARS) or ""
        self.category = clean_text(self.category, MAX_SUBTITLE_CHARS)
        self.summary = clean_text(self.summary, MAX_SUBTITLE_CHARS)
        self.image_url = clean_text(self.image_url, MAX_URL_CHARS)
        self.tags = _clean_tags(self.tags)
        self.content = clean_text(self.content, MAX_CONTENT_CHARS)
        self.id_date = clean_text(self.id_date, MAX_TAG_CHARS)

    def to_dict(self, full: bool = False) -> dict[str, Any]:
        """``title``, ``url``, ``published_at``; with ``full`` also updated_at, tags, image_url, content."""
        out: dict[str, Any] = {"title": self.title, "url": self.url, "published_at": iso(self.published_at)}
        if full:
            out.update(
                updated_at=iso(self.updated_at),
                tags=list(self.tags),
                image_url=self.image_url,
                content=self.content,
            )
        return out

    def to_article(self, agency: str) -> Article:
        """An :class:`Article` from a full listing item (Plone 6): subtitle = description."""
        return Article(
            url=self.url,
            agency=agency,
            title=self.title,
            subtitle=self.summary,
            editorial_lead=self.category,
            category=self.category,
            tags=list(self.tags),
            published_at=self.published_at,
            updated_at=self.updated_at,
            image_url=self.image_url,
            content=self.content or "",
            id_date=self.id_date,
        )


@dataclass
class ListingPage:
    items: list[ListingItem]
    next_url: str | None = None
    # items the parser could not read (one hostile item does not lose the page's others)
    errors: list = field(default_factory=list)
    # items and next-page link on another site, dropped by the parser (dgb.scraper.sites)
    off_site_dropped: int = 0
