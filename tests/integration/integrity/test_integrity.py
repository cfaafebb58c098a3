"""Integrity service against the local gov.br site (127.0.0.1) and a real PostgreSQL.

Every request goes to loopback: the mirror, and two tiny helper servers on 127.0.0.1 used to
test live redirects into a non-allowlisted loopback target (another port, 127.0.0.2).
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from dgb import db, topology
from dgb.fetch import Fetcher
from dgb.integrity import tiers
from dgb.integrity.article_check import check_article
from dgb.integrity.report import integrity_report
from dgb.integrity.runs import run_tier
from dgb.integrity.tiers import DEFAULT_TIERS, Schedule, assign_tiers, due_articles
from dgb.urlpolicy import UrlPolicy, guarded_transport
from tests.support.fetch import FAST
from tests.support.integrity import checker, insert_news, scrape_site, uid_of
from tests.support.sql import all_rows, one_row

pytestmark = pytest.mark.stack

PLUGINS = Path(__file__).resolve().parents[3] / "plugins"

ARTICLES = [
    (
        "mec",
        "mec-anuncia-novas-vagas",
        "MEC anuncia novas vagas no ensino técnico",
        "2026-11-20T10:15:00-03:00",
    ),
    ("mec", "enem-tem-recorde", "Enem tem recorde de inscritos confirmados", "2026-11-18T09:00:00-03:00"),
    ("mec", "pe-de-meia-paga", "Pé-de-Meia paga nova parcela a estudantes", "2026-11-12T16:40:00-03:00"),
    (
        "mulheres",
        "casa-da-mulher",
        "Nova Casa da Mulher Brasileira é inaugurada",
        "2026-11-19T14:00:00-03:00",
    ),
    ("mulheres", "ligue-180", "Ligue 180 amplia atendimento por mensagem", "2026-11-10T10:00:00-03:00"),
]


@pytest.fixture(autouse=True)
def _clean_integrity_tables(pg):
    with db.transaction(pg) as cur:
        cur.execute("TRUNCATE integrity_checks, integrity_daily RESTART IDENTITY")
        cur.execute("DELETE FROM agencies WHERE key IN ('mec', 'mulheres', 'agx', 'agy')")
    yield


@pytest.fixture
def site_url(mirror):
    return mirror(ARTICLES)


# -- content: unchanged via 304, modified, removed --------------------------------------------------


def test_unchanged_page_answers_304_with_a_tiny_fetch(pg, site_url):
    site, server, base = site_url
    scrape_site(pg, base)
    uid = uid_of(pg, "enem-tem-recorde")
    assert (
        one_row(
            pg,
            "SELECT count(*) FROM integrity_state s JOIN news n ON n.id = s.news_id"
            " WHERE n.unique_id = %s AND s.tier IS NULL",
            uid,
        )[0]
        == 1
    )  # enrolled on insert
    with checker(base) as f:
        first = check_article(pg, f, uid)
        second = check_article(pg, f, uid)
    assert (
        first.outcome == "unchanged" and first.content.http_status == 200 and not first.content.not_modified
    )
    assert first.content.changed_fields == [] and first.image.status == "ok"
    assert second.outcome == "unchanged" and second.content.http_status == 304 and second.content.not_modified
    assert second.content.bytes_fetched < 600 < first.content.bytes_fetched
    assert second.content.bytes_fetched * 20 <= first.content.bytes_fetched
    checks, etag, lm, cstatus, istatus, fails, due, last = one_row(
        pg,
        "SELECT checks, etag, last_modified, content_status, image_status, consecutive_failures, next_due_at,"
        " last_checked_at FROM integrity_state s JOIN news n ON n.id = s.news_id WHERE n.unique_id = %s",
        uid,
    )
    assert checks == 2 and etag and etag.startswith('"') and lm and cstatus == "unchanged" and istatus == "ok"
    assert fails == 0 and due > last
    assert one_row(pg, "SELECT count(*) FROM news_update_history")[0] == 0
    assert (
        one_row(pg, "SELECT count(*) FROM outbox WHERE aggregate_id = %s", uid)[0] == 1
    )  # the scrape's only
    assert all_rows(pg, "SELECT outcome, content_status, http_status FROM integrity_checks ORDER BY id") == [
        ("unchanged", "unchanged", 200),
        ("unchanged", "unchanged", 304),
    ]


def test_edited_article_is_updated_with_exact_history_and_reenters_the_pipeline(pg, site_url):
    site, server, base = site_url
    scrape_site(pg, base)
    uid = uid_of(pg, "pe-de-meia-paga")
    with checker(base) as f:
        check_article(pg, f, uid)  # stores the validators
    old_title, old_content, old_etag = one_row(
        pg,
        "SELECT n.title, n.content, s.etag FROM news n JOIN integrity_state s ON s.news_id = n.id"
        " WHERE n.unique_id = %s",
        uid,
    )
    with db.transaction(pg) as cur:  # pretend the article went all the way through
        cur.execute(
            "UPDATE news SET enriched_at = now(), summary = 's', embedded_at = now(),"
            " indexed_version = version, indexed_at = now() WHERE unique_id = %s",
            (uid,),
        )
    new_content = (
        "Pé-de-Meia paga nova parcela a estudantes. Primeiro parágrafo com detalhes do anúncio.\n\n"
        "Segundo parágrafo corrigido pela assessoria, com os números finais."
    )
    site.edit(
        "mec", "pe-de-meia-paga", title="Pé-de-Meia paga parcela extra a estudantes", content=new_content
    )
    with checker(base) as f:
        result = check_article(pg, f, uid)
    assert result.outcome == "modified" and result.content.http_status == 200
    assert result.content.changed_fields == ["title", "content"]
    assert result.history_rows == 2 and result.event_enqueued and result.content.date_moved
    title, content, version, enriched, summary, embedded = one_row(
        pg,
        "SELECT title, content, version, enriched_at, summary, embedded_at FROM news WHERE unique_id = %s",
        uid,
    )
    assert title == "Pé-de-Meia paga parcela extra a estudantes" and "números finais" in content
    assert version == 2 and enriched is None and summary is None and embedded is None  # downstream reset
    history = all_rows(
        pg, "SELECT field_changed, old_value, new_value, source FROM news_update_history ORDER BY id"
    )
    assert history == [
        ("title", old_title, title, "integrity"),
        ("content", old_content, content, "integrity"),
    ]
    events = all_rows(
        pg, "SELECT topic, payload->>'unique_id' FROM outbox WHERE aggregate_id = %s ORDER BY created_at", uid
    )
    assert events == [(topology.TOPIC_SCRAPED, uid), (topology.TOPIC_SCRAPED, uid)]
    assert one_row(pg, "SELECT count(*) FROM news")[0] == 3  # no duplicate row
    new_etag, cstatus = one_row(
        pg,
        "SELECT etag, content_status FROM integrity_state s JOIN news n ON"
        " n.id = s.news_id WHERE n.unique_id = %s",
        uid,
    )
    assert new_etag != old_etag and cstatus == "modified"
    with checker(base) as f:  # the new validators now give 304
        again = check_article(pg, f, uid)
    assert again.outcome == "unchanged" and again.content.http_status == 304
    assert one_row(pg, "SELECT count(*) FROM news_update_history")[0] == 2


def test_plone6_api_article_is_compared_through_the_api(pg, site_url):
    site, server, base = site_url
    scrape_site(pg, base, "mulheres", "plone6_api")
    uid = uid_of(pg, "casa-da-mulher")
    with checker(base) as f:
        first = check_article(pg, f, uid)
        assert first.outcome == "unchanged" and "/++api++/" in first.content.fetched_url, first.as_dict()
        site.edit("mulheres", "casa-da-mulher", subtitle="Nova linha fina")
        second = check_article(pg, f, uid)
    assert second.outcome == "modified" and second.content.changed_fields == ["subtitle"]


@pytest.mark.parametrize("status,delay", [(404, timedelta(hours=6)), (410, timedelta(minutes=15))])
def test_removed_article_is_suspect_first_then_hidden_once_confirmed(pg, site_url, status, delay):
    """Issue 16: one gone answer only flags; the same answer after the delay hides the article."""
    site, server, base = site_url
    scrape_site(pg, base)
    uid = uid_of(pg, "enem-tem-recorde")
    t0 = datetime.now(UTC)
    with checker(base) as f:
        check_article(pg, f, uid, now=t0)
    with db.transaction(pg) as cur:
        cur.execute("UPDATE news SET indexed_version = version WHERE unique_id = %s", (uid,))
    site.remove("mec", "enem-tem-recorde", status)
    with checker(base) as f:
        first = check_article(pg, f, uid, now=t0 + timedelta(minutes=1))
        early = check_article(pg, f, uid, now=t0 + timedelta(minutes=1) + delay - timedelta(seconds=5))
    assert first.outcome == early.outcome == "suspect_removed" and first.content.http_status == status
    assert first.image is None and first.flags == ["suspect_removed"] and early.flags == []
    assert first.evidence.checks == 1 and early.evidence.checks == 2 and not early.evidence.confirmed
    assert first.next_due_at == t0 + timedelta(minutes=1) + delay  # re-checked when the delay is up
    removed_at, problem, indexed_version = one_row(
        pg, "SELECT removed_at, problem, indexed_version = version FROM news WHERE unique_id = %s", uid
    )
    assert removed_at is None and problem == "suspect_removed" and indexed_version  # still searchable
    with checker(base) as f:
        result = check_article(pg, f, uid, now=t0 + timedelta(minutes=1) + delay)
    assert result.outcome == "removed" and result.flags == ["removed"] and result.evidence.confirmed
    removed_at, problem, indexed_version, image_broken = one_row(
        pg, "SELECT removed_at, problem, indexed_version, image_broken FROM news WHERE unique_id = %s", uid
    )
    assert removed_at is not None and problem == "removed" and indexed_version is None and not image_broken
    etag, cstatus, fails, gone_checks = one_row(
        pg,
        "SELECT etag, content_status, consecutive_failures, gone_checks FROM integrity_state s"
        " JOIN news n ON n.id = s.news_id WHERE n.unique_id = %s",
        uid,
    )
    assert etag and cstatus == "removed" and fails == 0 and gone_checks == 3
    assert (
        one_row(
            pg, "SELECT count(*) FROM integrity_problems WHERE unique_id = %s AND problem = 'removed'", uid
        )[0]
        == 1
    )
    assert one_row(pg, "SELECT count(*) FROM outbox WHERE aggregate_id = %s", uid)[0] == 1  # nothing enqueued
    assert [r[0] for r in all_rows(pg, "SELECT outcome FROM integrity_checks ORDER BY id")] == [
        "unchanged",
        "suspect_removed",
        "suspect_removed",
        "removed",
    ]
    with checker(base) as f:  # still gone: no second flag change
        assert check_article(pg, f, uid, now=t0 + 2 * delay).flags == []


# -- images ---------------------------------------------------------------------------------------


def test_broken_image_is_flagged_then_cleared(pg, site_url):
    site, server, base = site_url
    scrape_site(pg, base)
    uid = uid_of(pg, "mec-anuncia-novas-vagas")
    image_url = one_row(pg, "SELECT image_url FROM news WHERE unique_id = %s", uid)[0]
    server.faults.add({"path_prefix": urlsplit(image_url).path, "fault": "broken_image", "count": None})
    with db.transaction(pg) as cur:
        cur.execute("UPDATE news SET indexed_version = version WHERE unique_id = %s", (uid,))
    with checker(base) as f:
        result = check_article(pg, f, uid)
    assert result.outcome == "image_broken" and result.image.status == "broken"
    assert result.image.http_status == 404 and result.content.status == "unchanged"
    assert one_row(
        pg, "SELECT image_broken, problem, indexed_version FROM news WHERE unique_id = %s", uid
    ) == (
        True,
        "image_broken",
        None,
    )
    server.faults.clear()
    with db.transaction(pg) as cur:
        cur.execute("UPDATE news SET indexed_version = version WHERE unique_id = %s", (uid,))
    with checker(base) as f:
        healed = check_article(pg, f, uid)
    assert healed.outcome == "unchanged" and healed.image.status == "ok" and healed.flags == ["image_ok"]
    assert one_row(
        pg, "SELECT image_broken, problem, indexed_version FROM news WHERE unique_id = %s", uid
    ) == (
        False,
        None,
        None,
    )


def test_head_405_image_is_ok_through_ranged_get(pg, site_url):
    site, server, base = site_url
    scrape_site(pg, base)
    uid = uid_of(pg, "enem-tem-recorde")
    image_url = one_row(pg, "SELECT image_url FROM news WHERE unique_id = %s", uid)[0]
    server.faults.add({"path_prefix": urlsplit(image_url).path, "fault": "head_405", "count": None})
    with checker(base) as f:
        result = check_article(pg, f, uid)
    assert (
        result.image.status == "ok"
        and result.image.method == "GET"
        and result.image.http_status in (200, 206)
    )
    assert result.image.content_type.startswith("image/")
    assert result.outcome == "unchanged"
    assert not one_row(pg, "SELECT image_broken FROM news WHERE unique_id = %s", uid)[0]


def test_article_without_image_reports_no_image(pg, site_url):
    site, server, base = site_url
    scrape_site(pg, base)
    uid = uid_of(pg, "enem-tem-recorde")
    with db.transaction(pg) as cur:
        cur.execute("UPDATE news SET image_url = NULL WHERE unique_id = %s", (uid,))
    from dgb.integrity.checks import check_image

    with checker(base) as f:
        assert check_image(f, None).status == "no_image"
        assert (
            check_image(f, f"{base}/www.gov.br/mec/pt-br/assuntos/noticias/enem-tem-recorde").status
            == "broken"
        )


def test_image_redirect_loop_is_broken_and_slow_image_is_a_transient_timeout(pg, site_url):
    site, server, base = site_url
    scrape_site(pg, base)
    uid = uid_of(pg, "enem-tem-recorde")
    image_url = one_row(pg, "SELECT image_url FROM news WHERE unique_id = %s", uid)[0]
    prefix = urlsplit(image_url).path
    server.faults.add({"path_prefix": prefix, "fault": "redirect_loop", "count": None})
    with checker(base) as f:
        looped = check_article(pg, f, uid)
    assert looped.image.status == "broken" and "redirects" in looped.image.error
    assert looped.outcome == "image_broken"
    server.faults.clear()
    with db.transaction(pg) as cur:
        cur.execute("UPDATE news SET image_broken = false, problem = NULL WHERE unique_id = %s", (uid,))
    server.faults.add({"path_prefix": prefix, "fault": "slow", "delay": 4, "chunks": 2, "count": None})
    impatient = replace(FAST, retries=0, read_timeout=1.0, total_timeout=1.0)
    with checker(base, policy=impatient) as f:
        slow = check_article(pg, f, uid)
    assert slow.image.status == "timeout" and slow.outcome == "error" and slow.consecutive_failures == 1
    assert one_row(pg, "SELECT image_broken, problem FROM news WHERE unique_id = %s", uid) == (False, None)


def test_article_back_at_the_source_is_unflagged(pg, site_url):
    site, server, base = site_url
    scrape_site(pg, base)
    uid = uid_of(pg, "enem-tem-recorde")
    with db.transaction(pg) as cur:  # flagged by an earlier check; the page is served again now
        cur.execute(
            "UPDATE news SET removed_at = now(), problem = 'removed', indexed_version = version"
            " WHERE unique_id = %s",
            (uid,),
        )
    with checker(base) as f:
        result = check_article(pg, f, uid)
    assert result.outcome == "unchanged" and result.flags == ["restored"]
    assert one_row(pg, "SELECT removed_at, problem, indexed_version FROM news WHERE unique_id = %s", uid) == (
        None,
        None,
        None,
    )


# -- misbehaving host: backoff honoured, error outcome, state kept ---------------------------------


@pytest.mark.parametrize("fault,retry_after", [("429", 1), ("503", None)])
def test_misbehaving_host_backs_off_and_keeps_state(pg, site_url, fault, retry_after):
    site, server, base = site_url
    scrape_site(pg, base)
    uid = uid_of(pg, "enem-tem-recorde")
    with checker(base) as f:
        check_article(pg, f, uid)
    before = one_row(
        pg,
        "SELECT s.etag, s.last_modified, s.checks, n.title, n.version, n.problem"
        " FROM integrity_state s JOIN news n ON n.id = s.news_id WHERE n.unique_id = %s",
        uid,
    )
    spec = {
        "path_prefix": "/www.gov.br/mec/pt-br/assuntos/noticias/enem-tem-recorde",
        "fault": fault,
        "count": None,
    }
    if retry_after:
        spec["retry_after"] = retry_after
    server.faults.add(spec)
    slept: list[float] = []
    with checker(base, sleep=slept.append) as f:
        result = check_article(pg, f, uid)
        retries = f.stats.retries
    assert result.outcome == "error" and result.content.status == "error"
    assert result.content.http_status == int(fault) and retries == FAST.retries
    if retry_after:
        assert sum(1 for s in slept if abs(s - retry_after) < 0.2) == FAST.retries, (
            slept
        )  # Retry-After honoured
    else:
        assert len([s for s in slept if s > 0]) >= FAST.retries, slept  # exponential backoff
    etag, lm, checks, title, version, problem = one_row(
        pg,
        "SELECT s.etag, s.last_modified, s.checks, n.title, n.version, n.problem"
        " FROM integrity_state s JOIN news n ON n.id = s.news_id WHERE n.unique_id = %s",
        uid,
    )
    assert (etag, lm, title, version, problem) == (before[0], before[1], before[3], before[4], before[5])
    assert checks == before[2] + 1
    fails, last_error, due, last = one_row(
        pg,
        "SELECT s.consecutive_failures, s.last_error, s.next_due_at, s.last_checked_at"
        " FROM integrity_state s JOIN news n ON n.id = s.news_id"
        " WHERE n.unique_id = %s",
        uid,
    )
    assert fails == 1 and f"HTTP {fault}" in last_error and due > last
    server.faults.clear()
    with checker(base) as f:  # the host recovers: 304 on the kept validators
        ok = check_article(pg, f, uid)
    assert ok.outcome == "unchanged" and ok.content.http_status == 304 and ok.consecutive_failures == 0


# -- SSRF: live redirects into non-allowlisted loopback targets ------------------------------------


class _Helper(BaseHTTPRequestHandler):
    hits: list[str]

    def log_message(self, *args):
        pass

    def do_GET(self):
        self._serve()

    def do_HEAD(self):
        self._serve()

    def _serve(self):
        self.server.hits.append(self.path)
        parts = urlsplit(self.path)
        if parts.path == "/redirect":
            target = parse_qs(parts.query)["to"][0]
            self.send_response(302)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if parts.path == "/robots.txt":
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"<html><body><h1>secret admin page</h1></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def _helper_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Helper)
    server.hits = []
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def helpers():
    redirector, redirector_url = _helper_server()
    internal, internal_url = _helper_server()
    yield redirector, redirector_url, internal, internal_url
    for s in (redirector, internal):
        s.shutdown()
        s.server_close()


@pytest.mark.parametrize("target", ["other_port", "127.0.0.2"])
def test_live_redirect_into_non_allowlisted_loopback_is_refused_on_the_hop(pg, helpers, target, caplog):
    redirector, redirector_url, internal, internal_url = helpers
    dest = (
        f"{internal_url}/admin"
        if target == "other_port"
        else f"http://127.0.0.2:{internal.server_address[1]}/admin"
    )
    article_url = f"{redirector_url}/redirect?to={dest}"
    insert_news(pg, "redir-1", article_url, image_url=f"{redirector_url}/redirect?to={dest}.jpg")
    policy = UrlPolicy(allowed_hosts=[urlsplit(redirector_url).netloc], allow_loopback=True)
    assert policy.decide(article_url).allowed and not policy.decide(dest).allowed
    caplog.clear()
    with (
        caplog.at_level("WARNING", logger="dgb.urlpolicy"),
        Fetcher(FAST, url_guard=policy.guard, transport=guarded_transport(policy)) as f,
    ):
        result = check_article(pg, f, "redir-1")
    assert result.outcome == "image_broken"  # the image redirect is refused: a broken image
    assert result.content.status == "error" and result.content.error_category == "url_refused"
    assert "refused by URL policy" in result.content.error and "loopback address" in result.content.error
    assert result.image.status == "broken" and "refused by URL policy" in result.image.error
    hops = [h.split("?")[0] for h in redirector.hits if h != "/robots.txt"]
    assert hops == ["/redirect", "/redirect"]  # one hop each, then refused
    assert internal.hits == []  # target never contacted
    refusals = [r.getMessage() for r in caplog.records if "decision=refused" in r.getMessage()]
    assert refusals and all("unique_id=redir-1" in m for m in refusals)
    state = one_row(
        pg,
        "SELECT content_status, consecutive_failures, last_error FROM integrity_state"
        " WHERE news_id = (SELECT id FROM news WHERE unique_id = 'redir-1')",
    )
    assert state[0] == "error" and state[1] == 1 and "url_broken: refused" in state[2]


# -- due set, tiers -------------------------------------------------------------------------------


def test_due_set_never_checked_first_then_longest_overdue(pg):
    now = datetime.now(UTC)
    ids = {}
    for name, age_days in [
        ("fresh-a", 0.5),
        ("fresh-b", 1),
        ("fresh-c", 2),
        ("fresh-d", 1.5),
        ("fresh-e", 0.2),
        ("week", 5),
        ("old", 200),
    ]:
        ids[name] = insert_news(
            pg, name, f"http://127.0.0.1:9/{name}", published=now - timedelta(days=age_days)
        )
    assert assign_tiers(pg, Schedule(), now) == 7
    assert dict(
        all_rows(pg, "SELECT n.unique_id, s.tier FROM integrity_state s JOIN news n ON n.id = s.news_id")
    ) == {
        "fresh-a": "0_2d",
        "fresh-b": "0_2d",
        "fresh-c": "0_2d",
        "fresh-d": "0_2d",
        "fresh-e": "0_2d",
        "week": "3_7d",
        "old": "gt90d",
    }
    with db.transaction(pg) as cur:
        for name, checked_ago, due_in in [("fresh-a", 30, -20), ("fresh-b", 60, -50), ("fresh-d", 5, 5)]:
            cur.execute(
                "UPDATE integrity_state SET last_checked_at = %s, next_due_at = %s, checks = 1"
                " WHERE news_id = %s",
                (now - timedelta(minutes=checked_ago), now + timedelta(minutes=due_in), ids[name]),
            )
    due = due_articles(pg, "0_2d", 10, now)
    assert [d.unique_id for d in due] == ["fresh-c", "fresh-e", "fresh-b", "fresh-a"]  # fresh-d is not due
    assert due[0].last_checked_at is None and due[1].last_checked_at is None
    assert [d.unique_id for d in due_articles(pg, "0_2d", 3, now)] == ["fresh-c", "fresh-e", "fresh-b"]
    assert [d.unique_id for d in due_articles(pg, "gt90d", 10, now)] == ["old"]
    with pg.cursor() as cur:  # the due query can be served by the tier/due index
        cur.execute("ANALYZE news, integrity_state")  # plan on this data, not on statistics other tests left
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("EXPLAIN " + tiers.DUE_SQL, {"tier": "0_2d", "now": now, "limit": 10})
        plan = "\n".join(r[0] for r in cur.fetchall())
    pg.rollback()
    assert "integrity_state_tier_due_idx" in plan, plan


def test_tier_schedule_math_default_tiers():
    s = Schedule()
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    cases = [
        (0, "0_2d", 10),
        (2.99, "0_2d", 10),
        (3, "3_7d", 60),
        (7.5, "3_7d", 60),
        (8, "8_30d", 360),
        (30.9, "8_30d", 360),
        (31, "31_90d", 1440),
        (90.5, "31_90d", 1440),
        (91, "gt90d", 10080),
        (400, "gt90d", 10080),
        (-1, "0_2d", 10),
    ]
    for days, tier, minutes in cases:
        published = now - timedelta(days=days)
        assert s.tier_for(published, now).name == tier, days
        assert s.next_due(published, now) == now + timedelta(minutes=minutes), days
    assert [t.dag_id for t in DEFAULT_TIERS] == [
        "integrity_tier_0_2d",
        "integrity_tier_3_7d",
        "integrity_tier_8_30d",
        "integrity_tier_31_90d",
        "integrity_tier_gt90d",
    ]
    assert [s.dag_interval(t) for t in s.tiers] == [
        timedelta(minutes=10),
        timedelta(hours=1),
        timedelta(hours=6),
        timedelta(days=1),
        timedelta(days=7),
    ]
    # consecutive failures push the next check back (doubling, capped at a day, never below normal)
    fresh = now - timedelta(hours=1)
    assert s.next_due(fresh, now, failures=1) == now + timedelta(minutes=20)
    assert s.next_due(fresh, now, failures=3) == now + timedelta(minutes=80)
    assert s.next_due(fresh, now, failures=20) == now + timedelta(days=1)
    assert s.next_due(now - timedelta(days=200), now, failures=3) == now + timedelta(days=7)


def test_tier_schedule_math_exponential(monkeypatch):
    import math

    monkeypatch.setenv("DGB_INTEGRITY_SCHEDULE", "exponential")
    monkeypatch.setenv("DGB_INTEGRITY_BASE_MINUTES", "10")
    monkeypatch.setenv("DGB_INTEGRITY_LAMBDA", "0.3")
    s = Schedule.from_env()
    assert s.mode == "exponential"
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    for days in (0, 1, 2.5, 7, 20):
        expected = timedelta(minutes=10 * math.exp(0.3 * days))
        got = s.next_due(now - timedelta(days=days), now) - now
        assert abs((got - expected).total_seconds()) < 1e-3, days
    assert s.next_due(now - timedelta(days=365), now) - now == timedelta(days=7)  # capped
    # one DAG per tier still; each runs at the interval its youngest articles need
    assert [round(s.dag_interval(t).total_seconds() / 60) for t in s.tiers] == [
        10,
        round(10 * math.exp(0.9)),
        round(10 * math.exp(2.4)),
        10080,
        10080,
    ]  # 10*e^9.3 > the cap
    from dgb.integrity.dags import dag_ids, tier_dag_specs

    assert dag_ids() == [t.dag_id for t in DEFAULT_TIERS]
    assert tier_dag_specs(s)[1].every == timedelta(minutes=round(10 * math.exp(0.9)))
    monkeypatch.setenv("DGB_INTEGRITY_SCHEDULE", "fibonacci")
    with pytest.raises(ValueError):
        Schedule.from_env()


# -- tier runs: counts, yielding under backlog ------------------------------------------------------


def test_run_tier_checks_due_articles_and_yields_on_backlog(pg, site_url):
    site, server, base = site_url
    scrape_site(pg, base)
    with db.transaction(pg) as cur:  # the pipeline is up to date
        cur.execute("UPDATE news SET enriched_at = now()")
        cur.execute("UPDATE outbox SET published_at = now()")
    now = datetime.now(UTC)
    published = dict(all_rows(pg, "SELECT unique_id, published_at FROM news"))
    tier = Schedule().tier_for(published[uid_of(pg, "enem-tem-recorde")], now).name
    in_tier = [u for u, p in published.items() if Schedule().tier_for(p, now).name == tier]
    with checker(base) as f:
        summary = run_tier(pg, f, tier, limit=10)
    assert summary.skipped_backlog is False and summary.placed == 3
    assert summary.checked == len(in_tier) == summary.outcomes["unchanged"]
    with checker(base) as f:
        assert run_tier(pg, f, tier, limit=10).checked == 0  # nothing due any more
    # a stale outbox row: the run yields before checking anything
    with db.transaction(pg) as cur:
        cur.execute("UPDATE integrity_state SET next_due_at = '-infinity'")
        cur.execute(
            "INSERT INTO outbox (topic, aggregate_id, payload, created_at) VALUES"
            " ('dgb.news.scraped', 'x', '{}', now() - interval '5 minutes')"
        )
    with checker(base) as f:
        skipped = run_tier(pg, f, tier, limit=10)
    assert skipped.skipped_backlog and skipped.checked == 0 and "outbox" in skipped.note
    assert skipped.note.startswith("skipped_backlog")
    with db.transaction(pg) as cur:
        cur.execute("UPDATE outbox SET published_at = now()")
        cur.execute("UPDATE news SET enriched_at = NULL")
    with checker(base) as f:
        behind = run_tier(pg, f, tier, limit=10, backlog_threshold=2)
        assert behind.skipped_backlog and "enrichment" in behind.note
        assert run_tier(pg, f, tier, limit=10, backlog_threshold=0).checked == len(in_tier)


def test_integrity_check_cli_prints_the_result(pg, site_url, monkeypatch, capsys):
    from dgb.cli import main

    site, server, base = site_url
    scrape_site(pg, base)
    uid = uid_of(pg, "enem-tem-recorde")
    monkeypatch.setenv("DGB_SOURCE_MODE", "mirror")
    monkeypatch.setenv("DGB_MIRROR_URL", base)
    monkeypatch.setenv("DGB_FETCH_MIN_INTERVAL", "0")
    assert main(["integrity-check", "--unique-id", uid]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["unique_id"] == uid and out["outcome"] == "unchanged" and out["image"]["status"] == "ok"
    assert main(["integrity-check", "--unique-id", "nope"]) == 1
    assert main(["integrity-report", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["totals"]["checked_articles"] == 1
    assert main(["integrity-report"]) == 0
    assert "mec" in capsys.readouterr().out


# -- metrics --------------------------------------------------------------------------------------


def _known_dataset(conn):
    """agx: 4 checked articles (2 modified: title twice + content once; 1 removed, 1 broken image),
    1 never checked; agy: 2 checked, nothing wrong. Known check roll-up per tier."""
    now = datetime.now(UTC)
    pub = now - timedelta(days=10)
    rows = {}
    for uid, agency in [
        ("x1", "agx"),
        ("x2", "agx"),
        ("x3", "agx"),
        ("x4", "agx"),
        ("x5", "agx"),
        ("y1", "agy"),
        ("y2", "agy"),
    ]:
        rows[uid] = insert_news(
            conn, uid, f"http://127.0.0.1:9/{uid}", agency=agency, published=pub, title=f"Título {uid}"
        )
    with db.transaction(conn) as cur:
        for uid in ("x1", "x2", "x3", "x4", "y1", "y2"):
            cur.execute(
                "UPDATE integrity_state SET last_checked_at = %s, checks = 1, tier = '8_30d'"
                " WHERE news_id = %s",
                (now, rows[uid]),
            )
        for uid, field, hours, source in [
            ("x1", "title", 2, "integrity"),
            ("x1", "title", 5, "integrity"),
            ("x2", "content", 6, "scrape"),
        ]:
            cur.execute(
                "INSERT INTO news_update_history (news_id, field_changed, old_value, new_value, source,"
                " detected_at) VALUES (%s, %s, 'antes', 'depois', %s, %s)",
                (rows[uid], field, source, pub + timedelta(hours=hours)),
            )
        cur.execute("UPDATE news SET removed_at = now(), problem = 'removed' WHERE id = %s", (rows["x3"],))
        cur.execute(
            "UPDATE news SET image_broken = true, problem = 'image_broken' WHERE id = %s", (rows["x4"],)
        )
        for tier, agency, outcome, n in [
            ("0_2d", "agx", "unchanged", 7),
            ("0_2d", "agx", "modified", 2),
            ("8_30d", "agx", "removed", 1),
            ("8_30d", "agy", "unchanged", 4),
            ("8_30d", "agx", "error", 3),
        ]:
            cur.execute(
                "INSERT INTO integrity_daily (day, tier, agency_key, outcome, checks, bytes)"
                " VALUES (current_date, %s, %s, %s, %s, %s)",
                (tier, agency, outcome, n, n * 100),
            )
    return rows


def test_report_numbers_on_a_known_dataset(pg):
    _known_dataset(pg)
    r = integrity_report(pg)
    agx = next(a for a in r["agencies"] if a["agency_key"] == "agx")
    agy = next(a for a in r["agencies"] if a["agency_key"] == "agy")
    assert (agx["articles"], agx["checked_articles"], agx["modified_articles"]) == (5, 4, 2)
    assert agx["modification_rate"] == 0.5
    assert (agx["title_changes"], agx["content_changes"], agx["image_changes"]) == (2, 1, 0)
    assert agx["mean_hours_to_first_modification"] == pytest.approx((2 + 6) / 2)
    assert (agx["removed_articles"], agx["image_broken_articles"], agx["broken_articles"]) == (1, 1, 2)
    assert agx["broken_link_rate"] == 0.5
    assert agx["checks"] == 13 and agx["failed_checks"] == 3
    assert (agy["checked_articles"], agy["modification_rate"], agy["broken_link_rate"]) == (2, 0.0, 0.0)
    assert agy["mean_hours_to_first_modification"] is None
    assert r["totals"]["checked_articles"] == 6 and r["totals"]["modification_rate"] == round(2 / 6, 4)
    assert r["totals"]["broken_link_rate"] == round(2 / 6, 4)
    assert r["modification_types"] == {"title": 2, "content": 1}
    assert r["modification_types_integrity"] == {"title": 2}
    tiers_by_name = {t["tier"]: t for t in r["tiers"]}
    assert [t["tier"] for t in r["tiers"]] == [t.name for t in DEFAULT_TIERS]
    assert tiers_by_name["0_2d"]["checks"] == 9 and tiers_by_name["0_2d"]["outcomes"]["modified"] == 2
    assert tiers_by_name["8_30d"]["outcomes"] == {
        "unchanged": 4,
        "modified": 0,
        "moved": 0,
        "suspect_removed": 0,
        "removed": 1,
        "image_broken": 0,
        "error": 3,
    }
    assert tiers_by_name["gt90d"]["checks"] == 0
    assert r["problems"] == {"image_broken": 1, "removed": 1}
    assert [c["unique_id"] for c in r["recent_changes"]] == ["x2", "x1", "x1"]


# -- the UI page ----------------------------------------------------------------------------------


@pytest.fixture
def ui_app(pg_server):
    if str(PLUGINS) not in sys.path:
        sys.path.insert(0, str(PLUGINS))
    from dgb_airflow.ui.app import create_app

    dsn = pg_server.pg_dsn()
    return create_app(lambda: db.connect(dsn), require_auth=False)


def test_ui_page_renders_svg_charts_with_real_data(pg, ui_app):
    from fastapi.testclient import TestClient

    _known_dataset(pg)
    client = TestClient(ui_app)
    resp = client.get("/")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/html")
    page = resp.text
    for chart in (
        "chart-modification-rate",
        "chart-broken-rate",
        "chart-tier-outcomes",
        "chart-modification-types",
    ):
        assert f'<svg id="{chart}"' in page, chart
    mod_chart = page.split('<svg id="chart-modification-rate"')[1].split("</svg>")[0]
    assert (
        'data-agency="agx" data-value="0.5000"' in mod_chart
        and 'data-agency="agy" data-value="0.0000"' in mod_chart
    )
    broken_chart = page.split('<svg id="chart-broken-rate"')[1].split("</svg>")[0]
    assert 'data-agency="agx" data-value="0.5000"' in broken_chart
    tier_chart = page.split('<svg id="chart-tier-outcomes"')[1].split("</svg>")[0]
    assert 'data-tier="8_30d" data-outcome="error" data-count="3"' in tier_chart
    assert "Título x1" in page and "<script" not in page  # server-rendered, no scripts, no CDN
    data = client.get("/api/report").json()
    assert {a["agency_key"] for a in data["agencies"]} >= {"agx", "agy"}
    assert client.get("/health").json()["status"] == "ok"


def test_ui_page_survives_a_database_outage():
    if str(PLUGINS) not in sys.path:
        sys.path.insert(0, str(PLUGINS))
    from fastapi.testclient import TestClient

    from dgb_airflow.ui.app import create_app

    def broken():
        raise OSError("connection refused")

    client = TestClient(create_app(broken, require_auth=False))
    resp = client.get("/")
    assert resp.status_code == 503 and "Report unavailable" in resp.text


CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium (/usr/bin/chromium) is not installed here; "
    "the page is still rendered and its SVG checked by the test above",
)
def test_ui_page_screenshot_in_headless_chromium(pg, ui_app, tmp_path):
    import subprocess

    from fastapi.testclient import TestClient

    _known_dataset(pg)
    html_file = tmp_path / "integrity.html"
    html_file.write_text(TestClient(ui_app).get("/").text, encoding="utf-8")
    shot = tmp_path / "integrity.png"
    subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1280,1400",
            f"--screenshot={shot}",
            html_file.as_uri(),
        ],
        check=True,
        timeout=120,
        capture_output=True,
    )
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000  # a real, non-blank screenshot
