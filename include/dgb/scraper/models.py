"""Parser results: :class:`ListingItem`, :class:`ListingPage`, :class:`Article`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dgb.scraper.dates import iso
from dgb.scraper.identity import brasilia_wall_clock, content_hash, listing_day, unique_id

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
