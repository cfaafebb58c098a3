"""The site's journal (dgb_dev.mirror.journal): every publish, edit, move and removal recorded with
its address and the hash of what a reader should see, in process and over the control API; and
that hash equals the hash of the scraper's own reading of the rendered page (so a faithful pipeline
matches it)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from dgb.scraper.parsers import parse_any_article
from dgb.scraper.plone6 import parse_plone6_search
from dgb_dev.mirror import Site, start_in_thread
from dgb_dev.mirror.content import DEFAULT_CORPUS
from dgb_dev.mirror.journal import reader_text, text_hash, url_key

BASE = "http://127.0.0.1:8999"
ROWS = [
    {
        "agency": "mec",
        "url_slug": f"noticia-{i}",
        "title": f"Notícia {i} do MEC",
        "content": f"Primeiro parágrafo {i} com **destaque** e [link](https://www.gov.br/mec).\n\n- item",
        "published_at": f"2026-11-{10 + i}T10:00:00-03:00",
    }
    for i in range(3)
]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "articles.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in ROWS), encoding="utf-8")
    return path


def test_reader_text_drops_markup_and_keeps_words():
    site_text = (
        "## Título\n\nTexto com **negrito**, [um link](https://www.gov.br/x) e ![foto](a.jpg).\n\n1. um"
    )
    markdown = "## Título\n\nTexto com **negrito** , [um link](http://127.0.0.1:8/www.gov.br/x) e\n\n1\\. um"
    assert reader_text(site_text) == reader_text(markdown) == "título texto com negrito um link e 1 um"
    assert text_hash("Título", site_text) != text_hash("Título", site_text + " Atualização")
    assert text_hash("Outro título", site_text) != text_hash("Título", site_text)


def test_url_key_is_the_same_for_the_mirror_and_the_original_address():
    path = "/www.gov.br/mec/pt-br/assuntos/noticias/x"
    assert url_key("http://127.0.0.1:8090" + path) == url_key(
        "https://www.gov.br/mec/pt-br/assuntos/noticias/x/"
    )
    assert url_key("http://localhost:1" + path) == url_key(path) == path
    assert url_key("https://agenciabrasil.ebc.com.br/geral/noticia/2026-11/y") == (
        "/agenciabrasil.ebc.com.br/geral/noticia/2026-11/y"
    )


def test_changes_are_journaled_and_the_base_only_when_asked(corpus):
    assert Site(corpus, extra_dir=None, registry={}).journal() == []  # the base: not by default
    site = Site(corpus, extra_dir=None, registry={}, journal_base=True, hold_back=0.34)
    journal = site.journal()
    assert [e["seq"] for e in journal] == list(range(len(journal))) and {e["event"] for e in journal} == {
        "base"
    }
    # every visible article: mec's two not held back, and the EBC sites' copies of them
    assert sorted(f"{e['agency']}/{e['slug']}" for e in journal) == sorted(
        f"{a.agency}/{a.slug}" for k in site.agency_keys() for a in site.articles(k)
    )
    base = [e for e in journal if e["agency"] == "mec"]
    assert [e["slug"] for e in base] == ["noticia-0", "noticia-1"]
    a = site.get("mec", "noticia-0")
    assert base[0]["url"] == site.article_url("", a) == "/www.gov.br/mec/pt-br/assuntos/noticias/noticia-0"
    assert base[0]["hash"] == text_hash(a.title, a.content) and base[0]["title"] == a.title

    site.tick()  # releases the held-back article and edits one
    site.publish({"agency": "mec", "title": "Nova notícia", "content": "Texto novo."})
    site.edit("mec", "noticia-1", content="Texto corrigido.")
    site.move("mec", "noticia-0", "noticia-zero")
    site.remove("mec", "noticia-1", 410)
    n = len(journal)
    later = site.journal(since=n)
    assert [e["event"] for e in later] == ["publish", "edit", "publish", "edit", "move", "remove"]
    assert later[0]["slug"] == "noticia-2" and later[2]["slug"] == "nova-noticia"
    edit = later[3]
    assert edit["hash"] == text_hash(edit["title"], "Texto corrigido.") and edit["title"].startswith(
        "Notícia 1"
    )
    move = later[4]
    assert move["url"].endswith("/noticia-zero") and move["from_url"].endswith("/noticia-0")
    assert later[5]["hash"] is None and later[5]["url"].endswith("/noticia-1")
    assert [e["seq"] for e in later] == list(range(n, n + 6))

    site.reset()
    tail = site.journal(since=n + 6)
    assert [e["event"] for e in tail] == ["reset"] + ["base"] * n


def test_extra_files_are_journaled(corpus, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    site = Site(corpus, extra_dir=extra, registry={})
    (extra / "a.json").write_text(
        json.dumps([{**ROWS[0], "title": "Versão extra"}, {**ROWS[0], "url_slug": "so-extra"}]),
        encoding="utf-8",
    )
    site.refresh_extra()
    assert [(e["event"], e["slug"]) for e in site.journal()] == [
        ("edit", "noticia-0"),
        ("publish", "so-extra"),
    ]
    (extra / "a.json").unlink()
    site.refresh_extra()
    assert [(e["event"], e["slug"], e["title"]) for e in site.journal(2)] == [
        ("edit", "noticia-0", "Notícia 0 do MEC"),  # the corpus's article shows again
        ("remove", "so-extra", ROWS[0]["title"]),
    ]


def test_journal_over_the_control_api(corpus):
    site = Site(corpus, extra_dir=None, registry={}, journal_base=True)
    server, base = start_in_thread(site)
    try:
        with httpx.Client(timeout=10) as client:
            client.post(f"{base}/_control/edit", json={"agency": "mec", "slug": "noticia-2", "title": "Novo"})
            n = len(site.journal()) - 1  # the base, then the edit
            got = client.get(f"{base}/_control/journal", params={"since": n - 2}).json()
            bad = client.get(f"{base}/_control/journal", params={"since": "x"})
    finally:
        server.shutdown()
        server.server_close()
    assert got["next"] == n + 1 and [e["event"] for e in got["entries"]] == ["base", "base", "edit"]
    assert got["entries"] == site.journal(n - 2) and got["entries"][-1]["title"] == "Novo"
    assert bad.status_code == 400 and "journal position" in bad.json()["error"]


def test_the_journal_hash_is_the_hash_of_the_scrapers_reading_of_every_corpus_page():
    """Every article of the shipped corpus (gov.br classic pages, EBC pages, Plone 6 JSON): the
    scraper's title and Markdown of the rendered page hash as the journal says."""
    site = Site(DEFAULT_CORPUS, extra_dir=None, journal_base=True)
    entries = site.journal()
    assert len(entries) > 100
    by_url = {e["url"]: e for e in entries}
    for e in entries:
        resp = site.render(site.route(e["url"]), BASE)
        agency = None if site.agency_for(e["agency"]).is_ebc else e["agency"]
        art = parse_any_article(resp.body.decode(), BASE + e["url"], agency)
        assert text_hash(art.title, art.content) == e["hash"], e["url"]
    plone = 0
    for key in {e["agency"] for e in entries if not site.agency_for(e["agency"]).is_ebc}:
        path = f"/www.gov.br/{key}/++api++/{site.agency_for(key).path}/@search"
        query = "b_size=100&fullobjects=1"
        page = parse_plone6_search(site.render(site.route(path), BASE, query).body.decode(), BASE + path, key)
        for item in page.items:
            art = item.to_article(key)
            assert text_hash(art.title, art.content) == by_url[url_key(item.url)]["hash"], item.url
            plone += 1
    assert plone >= 100


def test_the_base_can_be_moved_so_each_agencys_newest_article_is_recent(corpus, tmp_path):
    """``base_newest_age_s`` (``DGB_MIRROR_BASE_NEWEST_AGE``, set by bench_chaos): each agency's
    articles shift together so its newest is that old, gaps kept; the pages the scraper reads and
    the journal carry the new dates; by default the corpus's own dates stand."""
    rows = ROWS + [
        {
            "agency": "saude",
            "url_slug": "boletim",
            "title": "Boletim da saúde",
            "content": "Texto do boletim.",
            "published_at": "2026-09-01T08:30:00-03:00",
        }
    ]
    path = tmp_path / "two.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    now = datetime(2026, 12, 4, 19, 0, tzinfo=UTC)

    def published(site):
        return {(a.agency, a.slug): a.published_at for k in ("mec", "saude") for a in site.articles(k)}

    as_written = published(Site(path, extra_dir=None, registry={}, clock=lambda: now))
    assert as_written[("saude", "boletim")] == datetime(2026, 9, 1, 11, 30, tzinfo=UTC)

    site = Site(
        path, extra_dir=None, registry={}, journal_base=True, clock=lambda: now, base_newest_age_s=3600
    )
    moved = published(site)
    hour_ago = now - timedelta(hours=1)
    assert moved[("mec", "noticia-2")] == hour_ago and moved[("saude", "boletim")] == hour_ago
    assert moved[("mec", "noticia-2")] - moved[("mec", "noticia-0")] == timedelta(days=2)  # gaps kept
    a = site.get("mec", "noticia-0")
    assert a.modified_at - a.published_at == (
        Site(path, extra_dir=None, registry={}).get("mec", "noticia-0").modified_at
        - as_written[("mec", "noticia-0")]
    )
    entry = next(e for e in site.journal() if e["slug"] == "noticia-0")
    page = parse_any_article(
        site.render(site.route(entry["url"]), BASE).body.decode(), BASE + entry["url"], "mec"
    )
    assert page.published_at == moved[("mec", "noticia-0")]
    with pytest.raises(ValueError, match="future"):
        Site(path, extra_dir=None, registry={}, base_newest_age_s=-5)
