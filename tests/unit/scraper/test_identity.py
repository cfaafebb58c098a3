"""Identity contracts shared with production: slug, unique_id (and its date text), content_hash.

Expected values are computed here from the documented formulas with literal strings (the text
production fed its hashes), never through the code under test.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from dgb.scraper.article import parse_article_html
from dgb.scraper.dates import production_text_date
from dgb.scraper.identity import (
    brasilia_wall_clock,
    content_hash,
    iso_as_given,
    normalise_text,
    slugify_title,
    unique_id,
)
from dgb.scraper.models import Article

BRT = ZoneInfo("America/Sao_Paulo")
TITLE = "Governo anuncia R$ 1,2 bilhão para escolas em tempo integral"
SLUG = "governo-anuncia-r-1-2-bilhao-para-escolas-em-tempo-integral"
URL = "https://www.gov.br/mec/pt-br/assuntos/noticias/governo-anuncia"


def md5_6(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()[:6]


def sha16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def test_slugify_ascii_lowercase_hyphens():
    assert slugify_title(TITLE) == SLUG
    assert slugify_title("  Ação “Pé-de-Meia” começa já!  ") == "acao-pe-de-meia-comeca-ja"
    assert slugify_title("???") == ""


def test_slugify_caps_at_100_chars_on_a_word_boundary():
    long_title = " ".join(["Ministério da Integração e do Desenvolvimento Regional"] * 5)
    slug = slugify_title(long_title)
    assert len(slug) <= 100
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", slug)
    assert slug.startswith("ministerio-da-integracao-e-do-desenvolvimento-regional-ministerio")
    assert len(slugify_title("a" * 150)) == 100


def test_unique_id_hashes_the_date_text_it_is_given():
    uid = unique_id("mec", "2026-02-10T17:05:07-03:00", TITLE)
    assert uid == f"{SLUG}_{md5_6(f'mec_2026-02-10T17:05:07-03:00_{TITLE}')}"
    assert (
        unique_id("mec", "2026-02-10T20:05:07+00:00", TITLE)
        == f"{SLUG}_{md5_6(f'mec_2026-02-10T20:05:07+00:00_{TITLE}')}"
    )
    assert unique_id("mec", "x", "???") == f"sem-titulo_{md5_6('mec_x_???')}"


def test_unique_id_prints_a_datetime_with_its_own_offset():
    """Production printed the datetime it held; the same instant in UTC is another id."""
    utc = datetime(2026, 2, 10, 20, 5, 7, tzinfo=UTC)
    fixed = datetime(2026, 2, 10, 17, 5, 7, tzinfo=timezone(timedelta(hours=-3)))
    assert unique_id("mec", utc, TITLE) == unique_id("mec", "2026-02-10T20:05:07+00:00", TITLE)
    assert unique_id("mec", fixed, TITLE) == unique_id("mec", "2026-02-10T17:05:07-03:00", TITLE)
    assert unique_id("mec", utc, TITLE) != unique_id("mec", fixed, TITLE)


def test_iso_as_given_keeps_offset_and_fraction_like_fromisoformat():
    assert iso_as_given("2026-02-10T20:05:07+00:00") == "2026-02-10T20:05:07+00:00"
    assert iso_as_given("2026-02-10T20:05:07.250000+00:00") == "2026-02-10T20:05:07.250000+00:00"
    assert iso_as_given("2026-02-10T20:05:07Z") == "2026-02-10T20:05:07+00:00"
    assert iso_as_given("2026-02-10T17:05:07") == "2026-02-10T17:05:07"  # naive stays naive
    assert iso_as_given("10/02/2026") is None
    assert iso_as_given(None) is None


def test_text_dates_use_a_fixed_minus_three_offset_even_in_old_summer_time():
    # January 2018: Brasília was on summer time (-02:00); production still wrote -03:00.
    summer = datetime(2018, 1, 15, 17, 5, tzinfo=BRT)
    assert summer.utcoffset() == timedelta(hours=-2)
    assert brasilia_wall_clock(summer) == "2018-01-15T17:05:00-03:00"
    assert brasilia_wall_clock(datetime(2026, 2, 10, 20, 5, tzinfo=UTC)) == "2026-02-10T17:05:00-03:00"
    assert production_text_date("Publicado em 10/02/2026 17h05") == "2026-02-10T17:05:00-03:00"
    assert production_text_date("17/11/2025 - 18:58") == "2025-11-17T18:58:00-03:00"
    # Shapes production's two patterns did not read: it fell back to the listing's day.
    assert production_text_date("10/02/2026 17h") is None
    assert production_text_date("1/2/2026 17h05") is None


def test_normalise_text_folds_case_accents_punctuation_and_spaces():
    assert normalise_text("  Educação\n\n  em\ttempo   integral \u00a0") == "educacao em tempo integral"
    assert normalise_text("Educac\u0327a\u0303o") == "educacao"  # decomposed input, same result
    assert normalise_text("R$ 1,2 bilhão — “já”!") == "r 12 bilhao ja"
    assert normalise_text("snake_case fica") == "snake_case fica"  # underscore is a word character
    assert normalise_text(None) == ""


def test_content_hash_matches_the_documented_formula():
    h = content_hash(TITLE, "Primeiro parágrafo.\n\nSegundo parágrafo.")
    assert h == sha16(
        "governo anuncia r 12 bilhao para escolas em tempo integral\nprimeiro paragrafo segundo paragrafo"
    )
    assert content_hash(TITLE.upper(), "primeiro PARAGRAFO;  segundo paragrafo") == h
    assert content_hash(TITLE, "Primeiro parágrafo. Terceiro parágrafo.") != h
    assert content_hash("", "") is None and content_hash(None, "  !! ") is None
    assert content_hash("Só título", None) == sha16("so titulo\n")


def _page(head: str = "", byline: str = "") -> str:
    return f"""<html><head>{head}</head><body><div id="content">
      <h1 class="documentFirstHeading">{TITLE}</h1>
      <div id="plone-document-byline">{byline}</div>
      <div id="content-core"><div id="parent-fieldname-text"><p>Primeiro parágrafo.</p></div></div>
    </div></body></html>"""


BYLINE = (
    '<span class="documentPublished"><span>Publicado em</span>'
    '<span class="value">10/02/2026 17h05</span></span>'
)


def test_article_id_uses_jsonld_date_as_the_page_wrote_it():
    head = (
        '<script type="application/ld+json">{"@type": "NewsArticle", '
        '"datePublished": "2026-02-10T20:05:07+00:00"}</script>'
    )
    art = parse_article_html(_page(head, BYLINE), URL, "mec")
    assert art.id_date == "2026-02-10T20:05:07+00:00"
    assert art.unique_id == f"{SLUG}_{md5_6(f'mec_2026-02-10T20:05:07+00:00_{TITLE}')}"
    assert art.published_at == datetime(2026, 2, 10, 17, 5, 7, tzinfo=BRT)  # the true instant


def test_article_id_falls_back_where_production_did():
    # Broken JSON (an unescaped quote) and an @graph object were not read by production: byline next.
    broken = (
        '<script type="application/ld+json">{"@type": "NewsArticle", "headline": "a "b" c", '
        '"datePublished": "2026-02-10T17:05:07-03:00"}</script>'
    )
    graph = (
        '<script type="application/ld+json">{"@graph": [{"@type": "NewsArticle", '
        '"datePublished": "2026-02-10T17:05:07-03:00"}]}</script>'
    )
    for head in (broken, graph):
        art = parse_article_html(_page(head, BYLINE), URL, "mec")
        assert art.id_date == "2026-02-10T17:05:00-03:00"
        assert art.unique_id == f"{SLUG}_{md5_6(f'mec_2026-02-10T17:05:00-03:00_{TITLE}')}"
    # No date production could read: the listing's day at midnight, whatever time our parser found.
    listing = datetime(2026, 2, 10, 16, 40, tzinfo=BRT)
    art = parse_article_html(_page(), URL, "mec", published_fallback=listing)
    assert art.id_date == "2026-02-10T00:00:00-03:00"
    assert art.published_at == listing


def test_listing_fallback_on_an_article_without_date():
    art = Article(url=URL, agency="mec", title=TITLE, content="x")
    assert art.unique_id is None
    art.with_published_at(datetime(2026, 2, 10, 16, 40, tzinfo=BRT))
    assert art.unique_id == f"{SLUG}_{md5_6(f'mec_2026-02-10T00:00:00-03:00_{TITLE}')}"
