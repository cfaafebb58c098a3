"""Entry point to every page parser, and the choice of parser for a page.

* classic gov.br HTML: :func:`parse_listing_page` / :func:`parse_listing_html`,
  :func:`parse_article_html` / :func:`parse_article_bytes`;
* Plone 6 JSON API: :func:`parse_plone6_search`, :func:`parse_plone6_article`;
* EBC: :func:`parse_ebc_listing`, :func:`parse_ebc_article`.

:func:`detect_source` picks one: JSON text -> ``plone6``; an ``*.ebc.com.br`` URL (also as a path
segment, ``http://127.0.0.1:P/tvbrasil.ebc.com.br/...``) or EBC markup
(``div.view-ultimas``, ``a.capa-noticia``, ``h1.titulo-materia``, ``div.conteudo-noticia`` or
``h4.txtNoticias`` without ``div#content-core``, as the local mirror serves EBC pages from its
own host) -> ``ebc``; anything else -> ``classic``.
"""

from __future__ import annotations

import re

from dgb.scraper.article import parse_article_bytes, parse_article_html
from dgb.scraper.ebc import ebc_agency, is_ebc_url, parse_ebc_article, parse_ebc_listing
from dgb.scraper.listing import next_page_url, parse_listing_html, parse_listing_page
from dgb.scraper.markup import decode_bytes, first_path_segment
from dgb.scraper.models import Article, ListingItem, ListingPage
from dgb.scraper.plone6 import parse_plone6_article, parse_plone6_search

__all__ = [
    "CLASSIC",
    "EBC",
    "PLONE6",
    "Article",
    "ListingItem",
    "ListingPage",
    "decode_bytes",
    "default_agency",
    "detect_source",
    "next_page_url",
    "parse_any_article",
    "parse_any_listing",
    "parse_article_bytes",
    "parse_article_html",
    "parse_ebc_article",
    "parse_ebc_listing",
    "parse_listing_html",
    "parse_listing_page",
    "parse_plone6_article",
    "parse_plone6_search",
]

CLASSIC, PLONE6, EBC = "classic", "plone6", "ebc"
_EBC_MARKUP = re.compile(
    r"""class=["'][^"']*\b(view-ultimas|capa-noticia|titulo-materia|conteudo-noticia|txtNoticias)\b"""
)
_PLONE_MARKUP = re.compile(r"""id=["']content-core["']""")


def detect_source(url: str, text: str) -> str:
    """``plone6``, ``ebc`` or ``classic`` (see module docstring)."""
    if text.lstrip("\ufeff \t\r\n").startswith("{"):
        return PLONE6
    if is_ebc_url(url) or ebc_agency(url) != "ebc":
        return EBC
    if _EBC_MARKUP.search(text) and not _PLONE_MARKUP.search(text):
        return EBC
    return CLASSIC


def default_agency(url: str) -> str:
    """Agency key implied by a URL: the EBC source's key (production's, ``agencia_brasil`` /
    ``tvbrasil``, also for the mirror's ``.../tvbrasil.ebc.com.br/...`` URLs), else the first
    path segment (gov.br)."""
    if is_ebc_url(url) or ebc_agency(url) != "ebc":
        return ebc_agency(url)
    return first_path_segment(url)


def parse_any_listing(
    text: str, url: str, agency: str | None = None, sites: frozenset[str] | None = None
) -> tuple[str, ListingPage]:
    """(source, page) for a listing page or Plone 6 ``@search`` response; links not on ``sites``
    (default: the site of ``url``) dropped and counted in ``page.off_site_dropped``."""
    source = detect_source(url, text)
    if source == PLONE6:
        return source, parse_plone6_search(text, url, agency, sites)
    if source == EBC:
        return source, parse_ebc_listing(text, url, sites)
    return source, parse_listing_page(text, url, agency or default_agency(url), sites)


def parse_any_article(text: str, url: str, agency: str | None = None) -> Article:
    """An article page (classic HTML, EBC HTML or a Plone 6 content object)."""
    source = detect_source(url, text)
    agency = agency or default_agency(url)
    if source == PLONE6:
        return parse_plone6_article(text, url, agency)
    if source == EBC:
        return parse_ebc_article(text, url, agency)
    return parse_article_html(text, url, agency)
