"""The hostile corpus (dgb_dev.hostile) through the parsers: a sane article or a clear error kind.

Each page is parsed as the scraper parses a fetched page; the run-level behaviour (fetch, the URL
guard, storage, the other articles kept) is in tests/integration/scraper/test_hostile.py.
"""

from __future__ import annotations

import json

import pytest

from dgb.scrape_errors import TOO_DEEP, EmptyContentError, HtmlChangedError, ScrapeError, as_scrape_error
from dgb.scraper.article import parse_article_bytes, parse_article_html
from dgb.scraper.jsonld import extract_jsonld_article
from dgb.scraper.markup import MAX_DOM_DEPTH, drop_nodes, parse_html, to_markdown
from dgb.scraper.models import MAX_CONTENT_CHARS, MAX_TITLE_CHARS, Article, ListingItem, clean_text
from dgb.scraper.plone6 import parse_plone6_search
from dgb_dev.hostile import PUBLISHED_ISO, hostile_pages, page

URL = "http://127.0.0.1:9/www.gov.br/mec/pt-br/assuntos/noticias/"
PARSED = [p for p in hostile_pages(big_mb=1) if not p.redirect_to and p.expect != "too_large"]


@pytest.mark.parametrize("hostile", PARSED, ids=[p.slug for p in PARSED])
def test_hostile_page_gives_an_article_or_a_category(hostile):
    try:
        art = parse_article_bytes(hostile.body, URL + hostile.slug, "mec")
    except ScrapeError as exc:
        assert hostile.expect == exc.kind, str(exc)
        assert exc.category == "html_changed"
        return
    assert hostile.expect == "stored"
    assert art.title == hostile.title and art.unique_id and art.published_at is not None
    for text in (art.title, art.content, art.subtitle or ""):
        assert "\x00" not in text and not any("\ud800" <= c <= "\udfff" for c in text)
        text.encode("utf-8")  # strict: PostgreSQL and the models get valid text
    assert len(art.title) <= MAX_TITLE_CHARS and len(art.content) <= MAX_CONTENT_CHARS


def test_caps_and_cleaning_happen_at_the_model_boundary():
    art = Article(
        url=URL + "x\x00",
        agency="mec",
        title="A\x00b\ud800c" + "t" * 5000,
        content="corpo\x00" + "c" * (MAX_CONTENT_CHARS + 10),
        tags=["ok", "\x00", "\udfff" * 3, "x" * 500] + ["t"] * 500,
    )
    assert art.title.startswith("Abc") and len(art.title) == MAX_TITLE_CHARS
    assert art.content.startswith("corpoc") and len(art.content) == MAX_CONTENT_CHARS
    assert art.url.endswith("/x") and art.tags[:2] == ["ok", "x" * 200] and len(art.tags) <= 100
    item = ListingItem(title="T\ud83d", url=URL + "y\x00", summary="s\x00")
    assert (item.title, item.url[-1], item.summary) == ("T", "y", "s")
    assert clean_text("emoji \U0001f600 fica") == "emoji \U0001f600 fica"  # real characters are kept
    assert clean_text(None) is None and clean_text(5) == "5" and clean_text({"a": 1}) is None


def test_jsonld_hostile_shapes_are_ignored_safely():
    deep = "[" * 100_000 + "]" * 100_000
    odd = json.dumps([{"@type": 5, "datePublished": PUBLISHED_ISO, "headline": 3}, {"@type": {"a": 1}}])
    graph = json.dumps({"@graph": [[[[[[[[[[{"@type": "NewsArticle", "headline": "fundo"}]]]]]]]]]]})
    for ld in (deep, odd, graph, '{"@type": ["NewsArticle", 5, null], "headline": "Lista"}'):
        tree = parse_html(f'<html><head><script type="application/ld+json">{ld}</script></head></html>')
        found = extract_jsonld_article(tree)  # never raises
        assert found.headline in (None, "Lista")
    html = page("", "<p>x</p>", h1=False, head=f'<script type="application/ld+json">{odd}</script>')
    with pytest.raises(EmptyContentError):  # a numeric headline is no title: a clear category
        parse_article_html(html, URL + "odd", "mec")


def test_dom_caps_refuse_instead_of_recursing():
    with pytest.raises(HtmlChangedError) as exc:
        parse_html("<div>" * (MAX_DOM_DEPTH + 10) + "x")
    assert exc.value.kind == TOO_DEEP and str(exc.value).startswith("html_changed: ")
    # markdownify input deeper than its limit is flattened, not recursed into
    md = to_markdown("<div>" * 900 + "<p>no fundo <b>negrito</b></p>" + "</div>" * 900)
    assert "no fundo" in md and "negrito" in md


def test_drop_nodes_is_linear_on_nested_matches():
    tree = parse_html("<div id='r'>" + "<span class='s'>" * 150 + "x" + "</span>" * 150 + "<p>fica</p></div>")
    drop_nodes(tree.css("span.s"))
    assert tree.css_first("span") is None and tree.css_first("#r").text() == "fica"


def test_plone6_bad_item_is_reported_and_the_others_kept():
    nested = '{"type": "strong", "children": [' * 300 + '{"text": "fundo"}' + "]}" * 300
    deep = json.loads(f'{{"@type": "slate", "value": [{{"type": "p", "children": [{nested}]}}]}}')
    good = {
        "@id": URL + "boa",
        "title": "Boa",
        "effective": PUBLISHED_ISO,
        "blocks": {"a": {"@type": "slate", "value": [{"type": "p", "children": [{"text": "corpo"}]}]}},
        "blocks_layout": {"items": ["a"]},
    }
    deep_item = {**good, "@id": URL + "funda", "title": "Funda", "blocks": {"a": deep}}
    bad = {**good, "@id": URL + "ruim", "title": "Ruim", "effective": 5, "image": {"scales": 7}}
    text = json.dumps({"items": [good, deep_item, bad]})
    listing = parse_plone6_search(text, URL + "@search", "mec")
    assert [i.title for i in listing.items] == ["Boa", "Funda"]
    assert "fundo" not in (listing.items[1].content or "")  # slate deeper than its cap is dropped
    [err] = listing.errors  # the item whose image is not an object: reported, not raised
    assert (err.category, err.kind) == ("html_changed", "parse_error") and "AttributeError" in str(err)
    assert "ruim" in str(err)
    odd = parse_plone6_search(json.dumps({"items": [{**good, "title": {"a": 1}}]}), URL + "@search", "mec")
    assert odd.items == []  # an object where a title was expected is no title (not its repr)
    with pytest.raises(HtmlChangedError) as exc:
        parse_plone6_search("[" * 100_000 + "]" * 100_000, URL + "@search", "mec")
    assert exc.value.kind in (TOO_DEEP, "html_changed")


def test_as_scrape_error_categorises_any_exception():
    err = as_scrape_error(RecursionError("maximum recursion depth exceeded"), where=" in x")
    assert (err.category, err.kind) == ("html_changed", "parse_error")
    assert str(err).startswith("html_changed: RecursionError in x")
    stored = as_scrape_error(ValueError("NUL"), "store_error")
    assert (stored.category, stored.kind) == ("unknown", "store_error")
    same = HtmlChangedError("x")
    assert as_scrape_error(same) is same and same.kind == "html_changed"
