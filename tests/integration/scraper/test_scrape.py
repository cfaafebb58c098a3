"""Scraping the local gov.br-like site into real PostgreSQL, events through the outbox."""

from __future__ import annotations

import socket
import uuid
from dataclasses import replace
from datetime import date

import pytest

from dgb import outbox, topology
from dgb.agencies import load_agencies
from dgb.fetch import Fetcher
from dgb.scraper.run import ScrapeParams, scrape_agency
from tests.support.articles import ARTICLES, article_dict, mirrored_agency
from tests.support.fetch import FAST

pytestmark = pytest.mark.stack


@pytest.fixture
def site_url(mirror):
    return mirror(ARTICLES)


def _fault(server, **spec):
    server.faults.add(spec)


def _count(conn, sql, *args):
    with conn.cursor() as cur:
        cur.execute(sql, args or None)
        return cur.fetchone()[0]


def test_scrape_stores_articles_and_events_once(pg, site_url):
    site, server, base = site_url
    mec = mirrored_agency(base, "mec")
    with Fetcher(FAST) as f:
        report = scrape_agency(pg, mec, f)
    assert report.status == "success", report
    assert len(report.new) == 5
    assert _count(pg, "SELECT count(*) FROM news WHERE agency_key = 'mec'") == 5
    with pg.cursor() as cur:
        cur.execute(
            "SELECT title, url, published_at, image_url, content, subtitle, content_hash, unique_id"
            " FROM news WHERE url LIKE %s",
            ("%/enem-tem-recorde",),
        )
        title, url, published, image, content, subtitle, chash, uid = cur.fetchone()
    assert title == "Enem tem recorde de inscritos confirmados"
    assert url.startswith(base) and published.isoformat().startswith("2026-11-18T12:00:00")
    assert image and image.startswith("http") and subtitle.startswith("Linha fina")
    assert "Segundo parágrafo" in content and len(chash) == 16 and uid.startswith("enem-tem-recorde")
    # one event per article, in the outbox, with the dedup attribute
    with pg.cursor() as cur:
        cur.execute("SELECT topic, aggregate_id, payload, attributes FROM outbox ORDER BY created_at")
        rows = cur.fetchall()
    assert len(rows) == 5 and {r[0] for r in rows} == {topology.TOPIC_SCRAPED}
    assert sorted(r[1] for r in rows) == sorted(report.new)
    payload, attrs = rows[0][2], rows[0][3]
    assert set(payload) == {"unique_id", "agency_key", "published_at", "scraped_at"}
    assert attrs["event_version"] == "1.0" and attrs["unique_id"] == payload["unique_id"]
    uuid.UUID(attrs["trace_id"])
    assert _count(pg, "SELECT count(*) FROM scrape_runs WHERE agency_key='mec' AND status='success'") == 1
    # the same site again: nothing new, no event
    with Fetcher(FAST) as f:
        again = scrape_agency(pg, mec, f)
    assert again.new == [] and again.updated == []
    assert _count(pg, "SELECT count(*) FROM news") == 5
    assert _count(pg, "SELECT count(*) FROM outbox") == 5


def test_edit_updates_row_records_history_and_emits_one_event(pg, site_url):
    site, server, base = site_url
    mec = mirrored_agency(base, "mec")
    with Fetcher(FAST) as f:
        scrape_agency(pg, mec, f)
    with pg.cursor() as cur:
        cur.execute("UPDATE news SET enriched_at = now(), summary = 'x' WHERE url LIKE '%/pe-de-meia-paga'")
    pg.commit()
    site.edit("mec", "pe-de-meia-paga", title="Pé-de-Meia paga parcela extra a estudantes")
    with Fetcher(FAST) as f:  # a regular run does not re-read known pages (integrity checks do)
        assert scrape_agency(pg, mec, f).updated == []
    with Fetcher(FAST) as f:  # a backfill over the window re-reads them and stores the edit
        report = scrape_agency(pg, mec, f, ScrapeParams(start_date=date(2026, 10, 1)))
    assert len(report.updated) == 1 and report.new == []
    with pg.cursor() as cur:
        cur.execute("SELECT field_changed, old_value, new_value FROM news_update_history")
        history = cur.fetchall()
        cur.execute(
            "SELECT title, version, enriched_at, summary, unique_id FROM news WHERE url LIKE"
            " '%/pe-de-meia-paga'"
        )
        title, version, enriched_at, summary, uid = cur.fetchone()
    assert history == [
        ("title", "Pé-de-Meia paga nova parcela a estudantes", "Pé-de-Meia paga parcela extra a estudantes")
    ]
    assert title.endswith("parcela extra a estudantes") and version == 2
    assert enriched_at is None and summary is None  # downstream state reset
    assert uid.startswith("pe-de-meia-paga-nova-parcela")  # identity kept across a title edit
    assert _count(pg, "SELECT count(*) FROM outbox WHERE aggregate_id = %s", uid) == 2
    assert _count(pg, "SELECT count(*) FROM news") == 5


def test_plone6_api_agency(pg, site_url):
    site, server, base = site_url
    with Fetcher(FAST) as f:
        report = scrape_agency(pg, mirrored_agency(base, "mulheres", "plone6_api"), f)
    assert report.status == "success" and len(report.new) == 2
    with pg.cursor() as cur:
        cur.execute(
            "SELECT title, tags, content FROM news WHERE agency_key='mulheres' ORDER BY published_at DESC"
        )
        rows = cur.fetchall()
    assert rows[0][0] == "Nova Casa da Mulher Brasileira é inaugurada"
    assert "mulheres" in rows[0][1] and "Segundo parágrafo" in rows[0][2]


def test_ebc_agencies_scrape_the_real_markup(pg, site_url):
    """Both EBC sources, served in the real Agência Brasil / TV Brasil shapes, end up in news."""
    site, server, base = site_url
    ebc = {k: a for k, a in load_agencies(base_url=base).items() if a.site_kind == "ebc" and a.active}
    assert len(ebc) == 2
    for key, agency in ebc.items():
        expected = {a.title: a for a in site.articles(key)}
        assert len(expected) == len(ARTICLES)  # the mirror republishes the corpus under each EBC key
        with Fetcher(FAST) as f:
            report = scrape_agency(pg, agency, f)
        assert report.status == "success" and len(report.new) == len(expected), report
        with pg.cursor() as cur:
            cur.execute(
                "SELECT title, url, published_at, content, category, editorial_lead, tags,"
                " unique_id FROM news WHERE agency_key = %s",
                (key,),
            )
            rows = cur.fetchall()
        assert len(rows) == len(expected)
        tv = "tvbrasil.ebc.com.br" in agency.url
        for title, url, published, content, category, lead, tags, uid in rows:
            a = expected[title]
            assert url.startswith(f"{base}/{'tvbrasil' if tv else 'agenciabrasil'}.ebc.com.br/")
            assert abs((published - a.published_at).total_seconds()) < 60 and uid
            assert "Segundo parágrafo" in content and category == "Notícias" and tags == list(a.tags)
            assert "Restrição de uso" not in content and "Com informações" not in content
            assert lead == ("Notícias" if tv else None)  # TV Brasil: the programme (the mirror's category)
        # a second run finds nothing new: the pager is walked to the empty page and stops
        with Fetcher(FAST) as f:
            again = scrape_agency(pg, agency, f)
        assert again.status == "success" and again.new == [] and again.updated == []


def test_backfill_window_and_no_update(pg, site_url):
    site, server, base = site_url
    params = ScrapeParams(start_date=date(2026, 11, 10), end_date=date(2026, 11, 19))
    with Fetcher(FAST) as f:
        report = scrape_agency(pg, mirrored_agency(base, "mec"), f, params)
    with pg.cursor() as cur:
        cur.execute("SELECT url FROM news ORDER BY published_at")
        urls = [r[0].rsplit("/", 1)[1] for r in cur.fetchall()]
    assert urls == ["pe-de-meia-paga", "enem-tem-recorde"], report
    site.edit("mec", "enem-tem-recorde", title="Enem bate recorde")
    with Fetcher(FAST) as f:
        scrape_agency(pg, mirrored_agency(base, "mec"), f, replace(params, allow_update=False))
    assert _count(pg, "SELECT count(*) FROM news_update_history") == 0


@pytest.mark.parametrize(
    "fault,params,category",
    [
        ("503", {}, "network_error"),
        ("404", {}, "url_broken"),
        ("410", {}, "url_broken"),
        ("anti_bot", {}, "anti_bot"),
        ("redirect_loop", {}, "url_broken"),
        ("slow", {"delay": 3}, "network_error"),
        ("oversized", {"size_mb": 8}, "unknown"),
    ],
)
def test_listing_misbehaviour_gives_category_and_stores_nothing(pg, site_url, fault, params, category):
    site, server, base = site_url
    _fault(server, path_prefix="/www.gov.br/mec/pt-br/assuntos/noticias", fault=fault, count=None, **params)
    # the slow listing (trickled over 3 s) is cut by the total timeout on each of the 3 tries:
    # 0.5 s each instead of FAST's 2 s, still far under the page's 3 s
    policy = replace(FAST, total_timeout=0.5) if fault == "slow" else FAST
    with Fetcher(policy) as f:
        report = scrape_agency(pg, mirrored_agency(base, "mec"), f)
    assert report.status == "failed" and report.error_category == category, report
    assert _count(pg, "SELECT count(*) FROM news") == 0
    assert _count(pg, "SELECT count(*) FROM outbox") == 0
    with pg.cursor() as cur:
        cur.execute("SELECT status, error_category FROM scrape_runs")
        assert cur.fetchall() == [("failed", category)]


def test_broken_article_is_skipped_whole(pg, site_url):
    site, server, base = site_url
    _fault(
        server,
        path_prefix="/www.gov.br/mec/pt-br/assuntos/noticias/enem-tem-recorde",
        fault="broken_encoding",
        count=None,
    )
    with Fetcher(FAST) as f:
        report = scrape_agency(pg, mirrored_agency(base, "mec"), f)
    assert report.status == "partial" and report.article_errors == 1
    assert report.error_category == "html_changed"
    assert len(report.new) == 4
    assert _count(pg, "SELECT count(*) FROM news WHERE url LIKE '%enem-tem-recorde'") == 0


def test_retry_after_is_honoured_per_host(pg, site_url):
    site, server, base = site_url
    _fault(server, path_prefix="/www.gov.br/mec/pt-br/assuntos/noticias", fault="429", retry_after=1, count=1)
    slept = []
    with Fetcher(FAST, sleep=lambda s: slept.append(s)) as f:
        report = scrape_agency(pg, mirrored_agency(base, "mec"), f)
    assert report.status == "success" and len(report.new) == 5
    assert any(abs(s - 1.0) < 0.2 for s in slept), slept  # waited the server's Retry-After
    assert f.stats.retries == 1


def test_regular_run_stops_at_known_urls_without_rereading_them(pg, site_url):
    site, server, base = site_url
    with Fetcher(FAST) as f:
        scrape_agency(pg, mirrored_agency(base, "mec"), f)
    with Fetcher(FAST) as f:
        again = scrape_agency(pg, mirrored_agency(base, "mec"), f)
        assert f.stats.requests == 2  # robots.txt + the first listing page: no known article re-read
    assert again.new == [] and again.known_skipped == 2  # the 3rd known URL is the fence
    # two new articles on top of the listing: exactly those are fetched, then the fence stops
    site.publish(article_dict("mec", "novo-edital", "MEC abre novo edital", "2026-11-30T09:00:00-03:00"))
    site.publish(article_dict("mec", "novo-programa", "MEC lança programa", "2026-11-30T10:00:00-03:00"))
    with Fetcher(FAST) as f:
        report = scrape_agency(pg, mirrored_agency(base, "mec"), f)
        assert f.stats.requests == 2 + 2  # robots + listing + the 2 new articles
    assert len(report.new) == 2 and report.updated == [] and report.known_skipped == 2
    assert _count(pg, "SELECT count(*) FROM news WHERE agency_key = 'mec'") == 7


def test_regular_run_passes_a_known_item_above_a_new_one(pg, site_url):
    """A known URL above a new one (pinned, or the new one dated late) does not end the run: the
    fence needs 3 known URLs in a row."""
    site, server, base = site_url
    with Fetcher(FAST) as f:
        scrape_agency(pg, mirrored_agency(base, "mec"), f)
    # dated between the two newest known articles: listed below the newest
    site.publish(article_dict("mec", "edital-tardio", "MEC publica edital", "2026-11-19T09:00:00-03:00"))
    with Fetcher(FAST) as f:
        report = scrape_agency(pg, mirrored_agency(base, "mec"), f)
        assert f.stats.requests == 3  # robots + listing + the new article
    assert len(report.new) == 1 and report.known_skipped == 3


def _publish_minutes(site, slug: str, title: str, n: int, day: str, first_hour: int = 8) -> None:
    """``n`` mec articles ``<slug>-000``..., a minute apart from ``first_hour`` on ``day``, newest last."""
    for i in range(n):
        when = f"{day}T{first_hour + i // 60:02d}:{i % 60:02d}:00-03:00"
        site.publish(article_dict("mec", f"{slug}-{i:03d}", f"{title} {i}", when))


def test_a_burst_longer_than_three_pages_is_read_until_the_known_articles(pg, site_url):
    """An agency that published more than three listing pages (30 each) since its last run: the
    regular run goes on past its 3 pages until it meets what it knows. Stopping at 3 pages left
    the older new articles unseen for good (no later regular run reads that deep; the chaos run
    found 9 of 47 lost on one agency)."""
    site, server, base = site_url
    with Fetcher(FAST) as f:
        scrape_agency(pg, mirrored_agency(base, "mec"), f)
    _publish_minutes(site, "rajada", "MEC anuncia medida", 100, "2026-12-01")  # 3 pages and 10 more
    with Fetcher(FAST) as f:
        report = scrape_agency(pg, mirrored_agency(base, "mec"), f)
    assert len(report.new) == 100 and report.pages == 4 and not report.gap
    assert _count(pg, "SELECT count(*) FROM news WHERE agency_key = 'mec'") == 105
    # bounded: beyond catchup_max_pages the run stops and says a gap may remain
    _publish_minutes(site, "outra", "MEC divulga dado", 70, "2026-12-02")
    with Fetcher(FAST) as f:
        capped = scrape_agency(
            pg, mirrored_agency(base, "mec"), f, params=ScrapeParams(max_pages=1, catchup_max_pages=2)
        )
    assert capped.pages == 2 and len(capped.new) == 60 and capped.gap


def test_articles_published_while_a_run_pages_do_not_end_it_early(pg, site_url):
    """Listings page by offset: what is published between two page requests pushes the first
    page's items onto the next one. Those are this run's own, just stored: they must not count
    towards the fence of known articles, or the run stops before the older new ones below them,
    which no later run reads again (the chaos run lost articles this way)."""
    site, server, base = site_url
    with Fetcher(FAST) as f:
        scrape_agency(pg, mirrored_agency(base, "mec"), f)
    _publish_minutes(site, "lote", "MEC anuncia", 40, "2026-12-01", first_hour=9)  # page 2 needed
    with Fetcher(FAST) as f:
        get = f.get

        def get_publishing_first(url, *args, **kwargs):
            if "b_start" in url:  # page 2 asked for: five more appear on top meanwhile
                _publish_minutes(site, "tarde", "MEC informa", 5, "2026-12-01", first_hour=10)
            return get(url, *args, **kwargs)

        f.get = get_publishing_first
        report = scrape_agency(pg, mirrored_agency(base, "mec"), f)
    stored = _count(pg, "SELECT count(*) FROM news WHERE agency_key = 'mec' AND url LIKE '%%/lote-%%'")
    assert stored == 40, report  # the 5 late ones are the next run's
    assert not report.gap


def test_a_first_run_reads_only_the_latest_pages(pg, site_url):
    """An agency never scraped: its latest 3 pages, not its whole history (a backfill's job)."""
    site, server, base = site_url
    _publish_minutes(site, "antiga", "MEC informa", 100, "2026-12-01")
    with Fetcher(FAST) as f:
        report = scrape_agency(pg, mirrored_agency(base, "mec"), f)
    assert report.pages == 3 and len(report.new) == 90 and not report.gap


# ------------------------------------------------------------------ outbox relay


def _pull_all(subscriber, path, want, timeout=20.0):
    import time

    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        resp = subscriber.pull(request={"subscription": path, "max_messages": 100}, timeout=5)
        if resp.received_messages:
            got += resp.received_messages
            subscriber.acknowledge(
                request={"subscription": path, "ack_ids": [m.ack_id for m in resp.received_messages]}
            )
        elif len(got) >= want:
            break
    return got


def test_relay_publishes_each_event_once(pg, site_url, pubsub_server):
    from google.cloud import pubsub_v1

    site, server, base = site_url
    project = f"dgb-relay-{uuid.uuid4().hex[:8]}"
    topology.apply(project)
    with Fetcher(FAST) as f:
        report = scrape_agency(pg, mirrored_agency(base, "mec"), f)
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    result = outbox.relay(pg, publisher, project)
    assert result.published == 5 and result.failed == 0
    assert outbox.relay(pg, publisher, project).published == 0  # nothing twice
    assert outbox.pending_count(pg) == 0
    msgs = _pull_all(subscriber, f"projects/{project}/subscriptions/{topology.SUB_ENRICHMENT}", 5)
    assert sorted(m.message.attributes["unique_id"] for m in msgs) == sorted(report.new)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_relay_survives_pubsub_outage(pg, site_url, pubsub_server, tmp_path, monkeypatch):
    """Stop the emulator, scrape, start it: every event arrives exactly once per outbox row."""
    from google.cloud import pubsub_v1

    from dgb_dev.stack.pubsub import PubSubEmulator  # the dev package: absent in the Astro image

    site, server, base = site_url
    own = replace(pubsub_server, state_dir=tmp_path, pubsub_port=_free_port())
    emulator = PubSubEmulator(own)
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", own.pubsub_emulator_host)
    project = "dgb-outage"
    emulator.up()
    topology.apply(project)
    emulator.down()
    with Fetcher(FAST) as f:
        report = scrape_agency(pg, mirrored_agency(base, "mec"), f)
    assert len(report.new) == 5
    publisher = pubsub_v1.PublisherClient()
    down = outbox.relay(pg, publisher, project, timeout=3.0)
    assert down.published == 0 and down.failed == 5
    assert outbox.pending_count(pg) == 5
    with pg.cursor() as cur:
        cur.execute(
            "SELECT min(attempts), bool_and(available_at > now()), bool_and(last_error IS NOT NULL)"
            " FROM outbox"
        )
        assert cur.fetchone() == (1, True, True)  # retried later with backoff, error kept
        cur.execute("UPDATE outbox SET available_at = now()")  # skip the backoff wait
    pg.commit()
    try:
        emulator.up()
        topology.apply(project)  # the emulator keeps no state across restarts
        publisher = pubsub_v1.PublisherClient()
        up = outbox.relay(pg, publisher, project)
        assert up.published == 5 and up.failed == 0
        msgs = _pull_all(
            pubsub_v1.SubscriberClient(), f"projects/{project}/subscriptions/{topology.SUB_ENRICHMENT}", 5
        )
        ids = [m.message.attributes["unique_id"] for m in msgs]
        assert sorted(ids) == sorted(report.new) and len(set(ids)) == 5
    finally:
        emulator.down()


def test_parser_moving_images_is_not_an_edit(pg, site_url):
    """Content compared for edits ignores images and photo credits (image_url tracks images)."""
    site, server, base = site_url
    with Fetcher(FAST) as f:
        scrape_agency(pg, mirrored_agency(base, "mec"), f)
    with pg.cursor() as cur:  # as if stored by an older parser that kept the lead image + credit
        cur.execute(
            "UPDATE news SET content = '![Título](http://x/img.jpg)' || E'\\n\\nFoto: Divulgação/MEC\\n\\n'"
            " || content"
        )
    pg.commit()
    with Fetcher(FAST) as f:  # a backfill re-reads the known pages and compares them
        report = scrape_agency(
            pg, mirrored_agency(base, "mec"), f, ScrapeParams(start_date=date(2026, 10, 1))
        )
    assert report.unchanged == 5
    assert report.updated == [] and _count(pg, "SELECT count(*) FROM news_update_history") == 0
