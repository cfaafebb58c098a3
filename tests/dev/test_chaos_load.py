"""The chaos run's load (dgb_dev.chaos.load): the seeded plan's counts, bursts and timing; the real
texts; the driver against a real local site on loopback, whose journal (the oracle's truth) then
holds exactly what the driver reports; and the site's listings with thousands of new articles."""

from __future__ import annotations

import json
import socket
import statistics
import time
import urllib.request
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from dgb_dev.chaos import load
from dgb_dev.chaos.load import LoadDriver, LoadPlan, real_mix
from dgb_dev.chaos.realtext import FALLBACK_CORPUS, SHARED_DATA, clean_markdown, load_texts
from dgb_dev.mirror import Site
from dgb_dev.mirror.content import DEFAULT_CORPUS
from dgb_dev.mirror.journal import text_hash
from tests.support.articles import ARTICLES

AGENCIES = ["mec", "saude", "cidades", "mds", "mulheres", "anatel", "iphan"]  # classic and Plone 6


@pytest.fixture(scope="module")
def texts():
    return load_texts(FALLBACK_CORPUS)


def plan(texts, seed=0, minutes=60.0, **kw):
    return LoadPlan.build(texts, real_mix(AGENCIES), minutes=minutes, seed=seed, **kw)


def test_counts_and_rate_match_the_request_over_seeds(texts):
    for seed in range(3):
        p = plan(texts, seed)
        c = p.counts()
        assert c["publish"] == 5000  # 5,000 an hour for an hour
        assert 0.09 <= c["edit"] / c["publish"] <= 0.16, c  # 10% edited, a quarter of them twice
        assert 0.012 <= c["remove"] / c["publish"] <= 0.03, c
        assert 0.001 <= c["move"] / c["publish"] <= 0.01, c
        assert all(0 <= a.at < 3600 for a in p.actions)
        per_agency = Counter(a.agency for a in p.actions if a.kind == "publish")
        assert set(per_agency) == set(AGENCIES)  # classic HTML and Plone 6 agencies both
    short = plan(texts, minutes=12, rate_per_hour=1000)
    assert short.counts()["publish"] == 200 and max(a.at for a in short.actions) < 720


def test_articles_arrive_in_bursts_on_one_agency(texts):
    p = plan(texts, 1)
    pubs = [a for a in p.actions if a.kind == "publish"]
    per_minute = Counter(int(a.at // 60) for a in pubs)
    counts = [per_minute.get(m, 0) for m in range(60)]
    # a Poisson process has variance = mean; bursts make it several times larger
    assert statistics.variance(counts) > 2.5 * statistics.mean(counts)
    # on one agency: a rare publisher's most within 2 minutes is several times its mean
    rarest, n = Counter(a.agency for a in pubs).most_common()[-1]
    assert p.max_in_window(120, rarest) > 3 * n / 30
    sizes = [size for _, size, _ in p.bursts()]
    assert max(sizes) >= 12 and 3 <= statistics.mean(sizes) <= 5
    assert all(span <= 120 for _, _, span in p.bursts())
    assert "biggest:" in p.summary() and "publish=5000" in p.summary()


def test_changes_come_after_publication_mostly_within_an_hour(texts):
    p = plan(texts, 2, minutes=240, rate_per_hour=1000)
    published = {a.article: a for a in p.actions if a.kind == "publish"}
    last: dict[int, str] = {}
    delays = []
    for a in p.actions:  # in time order
        assert last.get(a.article) not in ("remove", "move"), "nothing after a removal or a move"
        if a.kind != "publish":
            pub = published[a.article]
            assert a.at >= pub.at + load.MIN_GAP_S and a.slug == pub.slug and a.agency == pub.agency
        if a.kind == "edit":
            delays.append(a.at - pub.at)
        last[a.article] = a.kind
    assert sum(d <= 3600 for d in delays) / len(delays) >= 0.75
    # each edit changes what a reader sees; a move keeps it, a removal ends it
    hashes: dict[int, str] = {}
    for a in p.actions:
        if a.kind == "edit":
            assert a.hash != hashes[a.article] and "content" in a.body
        if a.kind == "move":
            assert a.hash == hashes[a.article] and a.body["new_slug"] != a.slug
        if a.kind == "remove":
            assert a.hash is None and a.body == {"status": 410}  # hidden after 15 min, not 6 h
        hashes[a.article] = a.hash
    assert any("title" in a.body for a in p.actions if a.kind == "edit")


def test_same_seed_same_plan_other_seed_other_plan(texts):
    assert plan(texts, 5, minutes=10) == plan(texts, 5, minutes=10)
    assert plan(texts, 5, minutes=10).actions != plan(texts, 6, minutes=10).actions


def test_titles_and_slugs_are_unique_the_text_real(texts):
    p = plan(texts, 3, minutes=30, tag="r7x")
    pubs = [a for a in p.actions if a.kind == "publish"]
    assert [a.article for a in pubs] == list(range(len(pubs)))  # numbered in order of publication
    assert len({a.body["title"] for a in pubs}) == len({a.slug for a in pubs}) == len(pubs)
    real = {t.content for t in texts}
    for a in pubs:
        assert a.body["title"].endswith(f" (r7x n{a.article:05d})") and a.slug.endswith(
            f"-r7x-n{a.article:05d}"
        )
        assert a.body["content"] in real and a.hash == text_hash(a.body["title"], a.body["content"])
    with pytest.raises(ValueError, match="tag"):
        plan(texts, tag="Not A Tag")


def test_real_texts_from_the_shared_data_are_cleaned(tmp_path):
    row = {
        "title": "ABIN participa de encontro",
        "content": 'Título\n=====\nLinha fina\nCompartilhe: \n[Compartilhe por X](http://x.com/s?u=1 "X")\n\n'
        "Publicado em\n\n08/10/2025 15h22\n\n\nAtualizado em\n08/10/2025 15h31\n\n"
        "![foto.jpg](https://www.gov.br/abin/foto.jpg/@@images/a.jpeg)\n\nFoto: Fulano/ABIN\n\n"
        "A **A**gência participou do [encontro](https://www.gov.br/abin/x) em\nBrasília.\n\n"
        "2\\. segundo item\n3. terceiro item\n\nTags: [ABIN](https://www.gov.br/abin/@@search)\n\nCategoria\n",
        "agency": "abin",
    }
    (tmp_path / "archive.jsonl").write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    (tmp_path / "real.jsonl").write_text(json.dumps({**row, "title": "Outra", "excerpt": True}) + "\n")
    [text] = load_texts(tmp_path, min_chars=10)
    assert text.content == (
        "A Agência participou do encontro em Brasília.\n\n- segundo item\n- terceiro item"
    )
    assert clean_markdown("Veja <https://www.gov.br/x>.") == "Veja https://www.gov.br/x."
    assert load_texts(tmp_path / "missing")[0].source == FALLBACK_CORPUS.name  # the repo's corpus
    if SHARED_DATA.is_dir():
        shared = load_texts()
        assert len(shared) > 1000 and {t.source for t in shared} == {"archive.jsonl", "real.jsonl"}


# -- the driver against a real local site ------------------------------------------------------------


def journal_changes(site, tag):
    return [
        (e["event"], e["agency"], e["slug"], e["hash"])
        for e in site.journal()
        if e["event"] != "base" and tag in (e["slug"] or "")
    ]


def test_driver_plays_a_plan_and_the_journal_holds_what_it_reports(texts, mirror):
    site, _, base = mirror(ARTICLES)
    p = plan(
        texts, 12, minutes=1.5, rate_per_hour=1000, tag="drv", burst_span_s=(5, 20), edit_share=0.6,
        remove_share=0.15, move_share=0.15,
    )  # fmt: skip
    c = p.counts()
    assert c["publish"] == 25 and c["edit"] and c["remove"] and c["move"]
    driver = LoadDriver(p, base, speed=30.0).start()  # 90 s of plan in 3 s
    assert driver.join(30)
    s = driver.summary()
    assert s["planned"] == c and s["done"] == c and not any(s["failed"].values()) and s["not_run"] == 0
    assert s["max_lateness_s"] < 1.0
    records = driver.records()
    reported = [
        (r.action.kind, r.action.agency, r.slug, r.action.hash) for r in records if r.status == "done"
    ]
    assert journal_changes(site, "drv") == reported  # the oracle's truth is the driver's record
    for r in records:
        assert r.url and r.url.startswith(base + "/www.gov.br/") and r.url.endswith("/" + r.slug)
        assert r.attempts == 1 and r.http_status in (200, 201) and r.at > 0
    live = driver.live_articles()
    assert len(live) == c["publish"] - c["remove"]
    assert all(site.get(agency, slug) is not None for agency, slug, _ in live.values())


def test_an_unreachable_site_fails_calls_honestly_without_crashing(texts):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = plan(texts, 4, minutes=1, rate_per_hour=600, edit_share=1.0)
    driver = LoadDriver(p, f"http://127.0.0.1:{port}", speed=600.0, retries=2, backoff=0.001).start()
    assert driver.join(30)
    s = driver.summary()
    assert s["failed"]["publish"] == s["planned"]["publish"] == 10
    assert s["skipped"]["edit"] == s["planned"]["edit"] and s["done"]["publish"] == 0
    failed = [r for r in driver.records() if r.status == "failed"]
    assert all(r.attempts == 3 and "Refused" in r.error for r in failed)
    assert {r.error for r in driver.records() if r.status == "skipped"} == {"never published"}


def test_an_ambiguous_publish_is_settled_from_the_journal_not_repeated(texts, mirror):
    site, _, base = mirror(ARTICLES)
    p = plan(texts, 4, minutes=0.5, rate_per_hour=240, edit_share=0.0, remove_share=0.0, move_share=0.0)
    driver = LoadDriver(p, base, speed=100.0, backoff=0.001)
    real_post = driver._post

    def lost_answer(path, payload):  # the site does it; its answer never arrives
        real_post(path, payload)
        raise load._Ambiguous("TimeoutError: timed out")

    driver._post = lost_answer
    driver.start()
    assert driver.join(30)
    assert driver.summary()["done"]["publish"] == 2
    for r in driver.records():
        assert r.attempts == 2 and "journal" in r.error and r.url.startswith(base)
    assert len(journal_changes(site, "c4")) == 2 and len(site.state()["published"]) == 2


def test_the_journal_is_read_from_the_start_again_after_a_site_restart(texts, mirror):
    site, _, base = mirror(ARTICLES)
    driver = LoadDriver(plan(texts, minutes=1), base)
    driver._journal_next = 10_000  # read that far on the site before it restarted
    a = site.publish({"agency": "mec", "title": "Depois do reinício", "content": "Texto."})
    found = driver._in_journal(("publish", "mec", a.slug, text_hash(a.title, a.content)))
    assert found == {"url": base + site.article_url("", a), "slug": a.slug}
    assert driver._journal_next == len(site.journal())


@pytest.mark.parametrize(
    "url", ["http://example.com:8090", "http://10.0.0.1:8090", "https://127.0.0.1:8090", "ftp://localhost/"]
)
def test_a_site_off_loopback_is_refused_without_a_connection(texts, url, monkeypatch):
    def no_network(*a, **kw):
        raise AssertionError("a connection was attempted")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(urllib.request.OpenerDirector, "open", no_network)
    with pytest.raises(ValueError, match="loopback"):
        LoadDriver(plan(texts, minutes=1), url)
    assert load.loopback_base("http://localhost:8090/") == "http://localhost:8090"


# -- the site with thousands of new articles ---------------------------------------------------------


def test_the_site_lists_thousands_of_new_articles_newest_first_at_linear_cost():
    start = datetime(2026, 12, 1, tzinfo=UTC)
    now = [start]
    site = Site(DEFAULT_CORPUS, extra_dir=None, clock=lambda: now[0])
    base = "http://127.0.0.1:1"
    listing = f"/www.gov.br/mec/{site.agency_for('mec').path}"
    search = f"/www.gov.br/mulheres/++api++/{site.agency_for('mulheres').path}/@search"
    n = 3000
    timed = time.perf_counter()
    for i in range(n):  # a new article every second, each followed by a reader of both listings
        now[0] = start + timedelta(seconds=i)
        site.publish({"agency": ("mulheres", "mec")[i % 2], "title": f"Artigo {i:05d}", "content": "Texto."})
        if i >= n - 300:
            site.render(site.route(listing), base, "b_start:int=30")
            site.render(site.route(search), base, "b_start=25&b_size=25&fullobjects=1")
    per_cycle = (time.perf_counter() - timed) / n
    assert per_cycle < 0.05  # ~3 ms on the 2-core machine: a rebuild of the index per change
    page = site.render(site.route(listing), base).body.decode()
    assert page.index("Artigo 02999") < page.index("Artigo 02997") and "Artigo 02941" in page
    assert "Artigo 02939" not in page  # 30 a page
    deep = site.render(site.route(listing), base, "b_start:int=1470").body.decode()
    assert "Artigo 00059" in deep and "Artigo 00001" in deep and "Artigo 00061" not in deep
    found = json.loads(site.render(site.route(search), base, "b_start=1475&b_size=25").body)
    assert found["items_total"] == n // 2 + sum(
        1 for a in site.articles("mulheres") if "Artigo" not in a.title
    )
    titles = [it["title"] for it in found["items"]]
    assert titles[0] == "Artigo 00048" and titles == sorted(titles, reverse=True) and len(titles) == 25
