"""The listing look-up's pure decisions (dgb.integrity.lookups): which page to read next, which
listed item is the gone article, and the page addresses."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx

from dgb.fetch import Response
from dgb.integrity.lookups import Listed, listed_items, listing_page_url, neighbour, pick, shown_same

T = datetime(2026, 12, 5, 15, 7, 44, tzinfo=UTC)


def _page(first_minutes_ago: int, n: int = 30, step_min: int = 20) -> list[Listed]:
    """``n`` listed items, newest first, the first ``first_minutes_ago`` minutes before ``T``."""
    return [
        Listed(f"https://h/a/n{i}", f"t{i}", T - timedelta(minutes=first_minutes_ago + step_min * i))
        for i in range(n)
    ]


def test_the_next_page_follows_the_dates_on_the_read_one():
    inside = _page(-300)  # T falls between the page's first and last items
    assert neighbour(inside, T, 30, 30) is None
    assert neighbour(_page(60), T, 30, 30) == 0  # every item older: the place is above
    assert neighbour(_page(-2000), T, 30, 30) == 60  # every item newer: below
    assert neighbour(_page(60), T, 0, 30) is None  # no page above the first
    assert neighbour(_page(-2000, n=12), T, 30, 30) is None  # a short page is the last
    at_bottom = _page(-(20 * 29))  # the page's oldest item is T itself: maybe just below
    assert neighbour(at_bottom, T, 30, 30) == 60
    assert neighbour([Listed("https://h/a/x", "x", None)], T, 30, 30) is None  # no dates: stop


def test_the_stored_title_wins_then_only_a_lone_item_of_the_same_minute():
    gone = "https://h/a/old"
    same_minute = T.replace(second=0)
    items = [
        Listed("https://h/a/known", "Other", same_minute),
        Listed("https://h/a/new", "Rewritten title", same_minute),
        Listed(gone, "Old title", same_minute),
    ]
    assert pick(items, "Old title", T, gone, {"https://h/a/known"}) == "https://h/a/new"
    titled = items + [Listed("https://h/a/renamed", " old  TITLE ", T - timedelta(hours=3))]
    assert pick(titled, "Old title", T, gone, {"https://h/a/known"}) == "https://h/a/renamed"
    far = [Listed("https://h/a/renamed", "Old title", T - timedelta(days=3))]
    assert pick(far, "Old title", T, gone, set()) is None  # the title, but another day
    twins = items + [Listed("https://h/a/stranger", "Stranger", same_minute)]
    assert pick(twins, "Old title", T, gone, {"https://h/a/known"}) is None  # two unknown: no guess
    # the other unknown item is a stored article that moved too (its title is taken): not a rival
    assert pick(twins, "Old title", T, gone, {"https://h/a/known"}, {"stranger"}) == "https://h/a/new"
    assert pick(items, "Old title", T, gone, {"https://h/a/known"}, {"rewritten title"}) is None
    assert pick(items, "Old title", T, gone, {"https://h/a/known", "https://h/a/new"}) is None
    later = [Listed("https://h/a/new", "Rewritten", T + timedelta(minutes=1))]
    assert pick(later, "Old title", T, gone, set()) is None  # another minute


def test_page_addresses_for_each_kind():
    classic = "https://www.gov.br/mec/pt-br/assuntos/noticias"
    assert listing_page_url("html", classic, "mec", 0) == classic
    assert listing_page_url("html", classic, "mec", 60) == classic + "?b_start:int=60"
    assert listing_page_url("html", classic + "?b_start:int=30", "mec", 90) == classic + "?b_start:int=90"
    api = listing_page_url("plone6_api", "https://www.gov.br/mulheres/pt-br/noticias", "mulheres", 50)
    assert api.startswith("https://www.gov.br/mulheres/++api++/pt-br/noticias/@search?")
    assert "b_start=50" in api and "sort_on=effective" in api and "sort_order=descending" in api
    assert "metadata_fields=effective" in api and "fullobjects" not in api


def test_a_listing_shows_a_time_to_the_second_or_to_the_minute():
    assert shown_same(T, T) and shown_same(T, T.replace(second=0))  # 15:07:44 listed as 15h07
    assert not shown_same(T, T + timedelta(seconds=43))  # a Plone 6 effective 43 s later
    assert not shown_same(T, T.replace(second=0) + timedelta(minutes=1))  # the next minute
    assert not shown_same(T.replace(second=10), T.replace(second=50))  # seconds shown: not equal
    assert not shown_same(T, None) and not shown_same(None, T)
    assert not shown_same(T, T.replace(tzinfo=None))  # not comparable


def test_a_plone6_listing_keeps_only_items_on_its_own_site():
    page = "https://www.gov.br/mulheres/++api++/pt-br/noticias/@search?b_start=25"
    items = [
        {
            "@id": "https://www.gov.br/mulheres/pt-br/noticias/nova",
            "title": "A",
            "effective": "2026-12-05T15:07:44+00:00",
        },
        {"@id": "https://evil.example/mulheres/pt-br/noticias/nova", "title": "B", "effective": None},
        {"@id": "http://10.0.0.1/x", "title": "C"},
        {"title": "no address"},
    ]
    resp = Response(
        page,
        200,
        httpx.Headers({"content-type": "application/json"}),
        json.dumps({"items": items}).encode(),
        0.0,
    )
    got = listed_items("plone6_api", resp, "mulheres")
    assert [(i.url, i.title, i.published_at) for i in got] == [
        ("https://www.gov.br/mulheres/pt-br/noticias/nova", "A", T)
    ]
