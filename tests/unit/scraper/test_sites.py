"""The same-site rule at parse time (dgb.scraper.sites): a hostile listing's links that leave the
agency's site are dropped and counted by every listing parser and by `dgb parse-listing`.

Parse only: nothing here connects anywhere (the hostile URLs are only written into the pages).
"""

from __future__ import annotations

import json

import pytest

from dgb.cli import main
from dgb.scraper.ebc import parse_ebc_listing
from dgb.scraper.listing import parse_listing_page
from dgb.scraper.models import ListingItem, ListingPage
from dgb.scraper.parsers import parse_any_listing
from dgb.scraper.plone6 import parse_plone6_search
from dgb.scraper.sites import keep_on_site, link_site, own_sites

LISTING = "https://www.gov.br/mec/pt-br/assuntos/noticias"
MIRROR = "http://127.0.0.1:8123"
# Links no agency's listing may hand to the fetcher.
HOSTILE = (
    "https://outro-site.example.com/noticia",
    "http://www.gov.br.evil.example/mec/pt-br/noticia",
    "http://10.0.0.7/www.gov.br/mec/pt-br/assuntos/noticias/interno",
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
    "http://[::ffff:169.254.169.254]/latest/",
    "http://127.0.0.1:5432/",
    "https://user:secret@www.gov.br/mec/pt-br/com-credenciais",
    "file:///etc/passwd",
    "javascript:alert(document.cookie)",
    "data:text/html,<script>alert(1)</script>",
    "ftp://www.gov.br/mec/arquivo",
)
ON_SITE = (
    "https://www.gov.br/mec/pt-br/assuntos/noticias/absoluta",
    "/mec/pt-br/assuntos/noticias/relativa-a-raiz",
    "noticias/relativa",
    "https://gov.br/mec/pt-br/assuntos/noticias/sem-www",
    "https://www.gov.br:443/mec/pt-br/assuntos/noticias/porta-padrao",
    "https://www.gov.br/outro-orgao/pt-br/assuntos/noticias/mesmo-host",
)


def classic_listing(hrefs, next_href: str | None = None) -> str:
    items = "".join(
        f'<article class="tileItem"><h2 class="tileHeadline"><a href="{h}">Notícia {i}</a></h2>'
        f'<span class="documentByLine">27/11/2026 14h30</span></article>'
        for i, h in enumerate(hrefs)
    )
    pager = (
        f'<ul class="paginacao listingBar"><li><a class="proximo" href="{next_href}">Próximo</a></li></ul>'
    )
    return f'<html><body><div id="content-core">{items}{pager if next_href else ""}</div></body></html>'


def test_a_hostile_classic_listing_keeps_only_its_own_site():
    page = parse_listing_page(
        classic_listing(HOSTILE + ON_SITE, next_href="http://169.254.169.254/latest/user-data"),
        LISTING,
        "mec",
    )
    assert [i.url for i in page.items] == [
        "https://www.gov.br/mec/pt-br/assuntos/noticias/absoluta",
        "https://www.gov.br/mec/pt-br/assuntos/noticias/relativa-a-raiz",
        "https://www.gov.br/mec/pt-br/assuntos/noticias/relativa",
        "https://gov.br/mec/pt-br/assuntos/noticias/sem-www",
        "https://www.gov.br:443/mec/pt-br/assuntos/noticias/porta-padrao",
        "https://www.gov.br/outro-orgao/pt-br/assuntos/noticias/mesmo-host",
    ]
    assert page.next_url is None
    assert page.off_site_dropped == len(HOSTILE) + 1  # every hostile item and the next-page link


def test_an_on_site_next_page_is_kept_and_a_clean_listing_drops_nothing():
    page = parse_listing_page(classic_listing(ON_SITE[:2], next_href="?b_start:int=30"), LISTING, "mec")
    assert len(page.items) == 2 and page.off_site_dropped == 0
    assert page.next_url == f"{LISTING}?b_start:int=30"


def test_under_the_mirror_the_site_is_the_mirrored_host_of_the_configured_url():
    base = f"{MIRROR}/www.gov.br/mec/pt-br/assuntos/noticias"
    hrefs = (
        f"{MIRROR}/www.gov.br/mec/pt-br/assuntos/noticias/a",  # on the mirrored site
        "/www.gov.br/mec/pt-br/assuntos/noticias/b",  # relative, resolved against the mirror
        f"{MIRROR}/outro.example.com/c",  # another mirrored host: another site
        "https://www.gov.br/mec/pt-br/assuntos/noticias/d",  # the real site, not the configured one
        "http://127.0.0.1:5432/",
    )
    page = parse_listing_page(classic_listing(hrefs), base, "mec")
    assert [i.url for i in page.items] == [
        f"{MIRROR}/www.gov.br/mec/pt-br/assuntos/noticias/a",
        f"{MIRROR}/www.gov.br/mec/pt-br/assuntos/noticias/b",
    ]
    assert page.off_site_dropped == 3


def test_the_sites_given_by_the_run_win_over_the_page_url():
    # the run passes the agency's configured sites: a page fetched elsewhere keeps nothing
    page = parse_listing_page(classic_listing(ON_SITE[:1]), LISTING, "mec", frozenset({"example.org"}))
    assert page.items == [] and page.off_site_dropped == 1


def test_plone6_items_and_next_link_off_the_site_are_dropped():
    api = "https://www.gov.br/cultura/++api++/pt-br/assuntos/noticias/@search"
    items = [{"@id": u, "title": f"Item {i}"} for i, u in enumerate(HOSTILE)]
    items.append({"@id": "https://www.gov.br/cultura/++api++/pt-br/noticia-boa", "title": "Boa"})
    text = json.dumps({"items": items, "batching": {"next": "http://10.0.0.7/@search?b_start=25"}})
    page = parse_plone6_search(text, api, "cultura")
    assert [i.url for i in page.items] == ["https://www.gov.br/cultura/pt-br/noticia-boa"]
    assert page.next_url is None and page.off_site_dropped == len(HOSTILE) + 1


def test_ebc_keeps_its_own_portal_only():
    hrefs = (
        "/economia/noticia/2026-11/boa",
        "https://agenciabrasil.ebc.com.br/geral/noticia/2026-11/absoluta",
        "https://tvbrasil.ebc.com.br/noticia/2026-11/outro-portal",
        "https://outro.example.com/noticia/x",
        "http://169.254.169.254/noticia/",
        "file:///etc/noticia/passwd",
        "javascript:void('/noticia/')",
        "data:text/html,/noticia/",
    )
    cards = "".join(
        f'<a class="capa-noticia" href="{h}"><h2>Título {i}</h2></a>' for i, h in enumerate(hrefs)
    )
    page = parse_ebc_listing(
        f"<html><body><div>{cards}</div></body></html>", "https://agenciabrasil.ebc.com.br/ultimas"
    )
    assert [i.url for i in page.items] == [
        "https://agenciabrasil.ebc.com.br/economia/noticia/2026-11/boa",
        "https://agenciabrasil.ebc.com.br/geral/noticia/2026-11/absoluta",
    ]
    assert page.off_site_dropped == 6
    assert page.next_url == "https://agenciabrasil.ebc.com.br/ultimas?page=1"


@pytest.mark.parametrize(
    ("url", "site"),
    [
        ("https://WWW.gov.br/mec/x", "www.gov.br"),
        ("https://www.gov.br:443/mec/x", "www.gov.br"),
        ("http://www.gov.br:80/mec/x", "www.gov.br"),
        ("https://www.gov.br:8443/mec/x", "www.gov.br:8443"),
        (f"{MIRROR}/www.gov.br/mec/x", "127.0.0.1:8123/www.gov.br"),
        ("https://u:p@www.gov.br/mec/x", ""),
        ("file:///etc/passwd", ""),
        ("javascript:alert(1)", ""),
        ("data:,x", ""),
        ("mailto:a@b.c", ""),
        ("http://[bad", ""),
        ("", ""),
    ],
)
def test_link_site(url, site):
    assert link_site(url) == site


def test_own_sites_carry_the_www_twin():
    assert own_sites(LISTING) == {"www.gov.br", "gov.br"}
    assert own_sites(f"{MIRROR}/www.gov.br/mec/") == {"127.0.0.1:8123/www.gov.br", "127.0.0.1:8123/gov.br"}
    assert own_sites("https://agenciabrasil.ebc.com.br/ultimas", None, "javascript:x") == {
        "agenciabrasil.ebc.com.br",
        "www.agenciabrasil.ebc.com.br",
    }


def test_keep_on_site_counts_into_what_the_page_already_dropped():
    page = ListingPage([ListingItem(title="t", url="file:///x")], "https://www.gov.br/p2", off_site_dropped=2)
    assert keep_on_site(page, own_sites(LISTING)).off_site_dropped == 3 and page.items == []
    assert page.next_url == "https://www.gov.br/p2"


def test_parse_listing_cli_prints_the_list_and_the_dropped_count_on_stderr(capsys, tmp_path):
    saved = tmp_path / "hostil.html"
    saved.write_text(classic_listing(HOSTILE + ON_SITE[:1]), encoding="utf-8")
    code = main(["parse-listing", "--url", LISTING, str(saved)])
    out, err = capsys.readouterr()
    assert code == 0 and [d["url"] for d in json.loads(out)] == [ON_SITE[0]]
    assert err == f"off_site_dropped={len(HOSTILE)}\n"
    saved.write_text(classic_listing(ON_SITE[:1]), encoding="utf-8")
    assert main(["parse-listing", "--url", LISTING, str(saved)]) == 0
    assert capsys.readouterr().err == ""  # nothing dropped: stderr stays empty, as before


def test_parse_any_listing_passes_the_sites_through():
    source, page = parse_any_listing(classic_listing(HOSTILE + ON_SITE[:1]), LISTING, "mec")
    assert source == "classic" and len(page.items) == 1 and page.off_site_dropped == len(HOSTILE)
