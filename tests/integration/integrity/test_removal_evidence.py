"""Issue 16: removal needs evidence. On the local gov.br-like site (127.0.0.1), a real PostgreSQL
and a real Typesense: agency-wide outages (all 404, all 503) and a URL migration hide nothing;
one genuinely withdrawn article (404 twice, the delay passing on a controllable clock) and a 410
are hidden after confirmation; the breaker pauses removals, flags the agency and clears again.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest

from dgb import db
from dgb.agencies import load_agencies
from dgb.fetch import Fetcher
from dgb.integrity.article_check import check_article
from dgb.integrity.evidence import RemovalPolicy, tripped_breakers
from dgb.integrity.report import format_table, integrity_report
from dgb.integrity.runs import run_tier
from dgb.integrity.tiers import Schedule
from dgb.pipeline.runner import RunOptions, run_stage
from dgb.pipeline.stages import IndexStage
from dgb.scraper.run import scrape_agency
from dgb.urlpolicy import UrlPolicy, guarded_transport
from tests.support.fetch import FAST

pytestmark = pytest.mark.stack

DIM = 8
MEC_N = 30
NOW = datetime.now(UTC).replace(microsecond=0)


def _articles():
    out = []
    for i in range(MEC_N):  # 1-6 days old: the 0-2 d and 3-7 d tiers, re-checked at least hourly
        published = NOW - timedelta(days=1 + (i % 6), hours=i % 7)
        out.append(
            (
                "mec",
                f"mec-noticia-{i:02d}",
                f"MEC divulga resultado número {i} do programa",
                published.isoformat(),
            )
        )
    for i in range(5):
        published = NOW - timedelta(days=2, hours=i)
        out.append(
            (
                "mulheres",
                f"mulheres-noticia-{i}",
                f"Ministério das Mulheres lança ação {i}",
                published.isoformat(),
            )
        )
    return out


@pytest.fixture(autouse=True)
def _clean(pg):
    with db.transaction(pg) as cur:
        cur.execute("DELETE FROM agencies WHERE key IN ('mec', 'mulheres')")
    yield


@pytest.fixture
def ts_index(scratch_index):
    """An own alias on a dim-8 collection, dropped afterwards."""
    _s, ts, alias = scratch_index("t_rm", DIM)
    return ts, alias


class World:
    """The site, the database, the index and a clock the checks run on."""

    def __init__(self, pg, mirror, ts_index=None, policy: RemovalPolicy | None = None):
        self.pg = pg
        self.site, self.server, self.base = mirror(_articles())
        self.ts, self.alias = ts_index or (None, None)
        self.policy = policy or RemovalPolicy()
        self.now = NOW
        self.schedule = Schedule()
        for key in ("mec", "mulheres"):
            with Fetcher(FAST) as f:
                report = scrape_agency(pg, load_agencies(base_url=self.base)[key], f)
            assert report.status == "success", report
        with db.transaction(pg) as cur:  # pretend enrichment ran; the pipeline is up to date
            cur.execute("UPDATE news SET enriched_at = now(), summary = title")
            cur.execute("UPDATE outbox SET published_at = now()")
        assert self.count("SELECT count(*) FROM news WHERE agency_key = 'mec'") == MEC_N
        self.index()

    def fetcher(self, policy=FAST) -> Fetcher:
        pol = UrlPolicy(allowed_hosts=["gov.br", "*.gov.br", urlsplit(self.base).netloc], allow_loopback=True)
        return Fetcher(policy, url_guard=pol.guard, transport=guarded_transport(pol), sleep=lambda s: None)

    def count(self, sql, *args) -> int:
        with self.pg.cursor() as cur:
            cur.execute(sql, args or None)
            value = cur.fetchone()[0]
        self.pg.commit()
        return value

    def index(self) -> None:
        """The index stage's sweep: the normal pipeline path that reflects flags in Typesense."""
        if self.ts is not None:
            run_stage(
                IndexStage(self.ts, self.alias, self.pg, DIM), self.pg, [], RunOptions(sweep_limit=1000)
            )

    def searchable(self, agency: str) -> int:
        res = self.ts.collections[self.alias].documents.search(
            {"q": "*", "query_by": "title", "filter_by": f"agency:={agency}", "per_page": 0}
        )
        return res["found"]

    def round(self, fetch_policy=FAST) -> dict:
        """One pass of every tier DAG at the clock's time, then the index sweep."""
        outcomes: dict[str, int] = {}
        changes = []
        with self.fetcher(fetch_policy) as f:
            for tier in self.schedule.tiers:
                summary = run_tier(
                    self.pg,
                    f,
                    tier.name,
                    limit=500,
                    backlog_threshold=0,
                    outbox_max_age_s=0,
                    schedule=self.schedule,
                    policy=self.policy,
                    clock=lambda: self.now,
                )
                for k, v in summary.outcomes.items():
                    outcomes[k] = outcomes.get(k, 0) + v
                changes += [c.as_dict() for c in summary.breaker_changes]
        self.index()
        return {"outcomes": outcomes, "breaker_changes": changes}

    def hidden(self, agency: str | None = None) -> int:
        if agency:
            return self.count(
                "SELECT count(*) FROM news WHERE removed_at IS NOT NULL AND agency_key = %s", agency
            )
        return self.count("SELECT count(*) FROM news WHERE removed_at IS NOT NULL")

    def flagged(self, problem: str, agency: str = "mec") -> int:
        return self.count("SELECT count(*) FROM news WHERE problem = %s AND agency_key = %s", problem, agency)


# -- the scenario of the issue -----------------------------------------------------------------------


def test_agency_outage_then_recovery_hides_nothing_but_the_withdrawn_article(pg, mirror, ts_index, capsys):
    w = World(pg, mirror, ts_index)
    assert w.searchable("mec") == MEC_N and w.searchable("mulheres") == 5
    withdrawn = w.count("SELECT unique_id FROM news WHERE url LIKE '%/mulheres-noticia-3'")
    w.server.faults.add({"path_prefix": "/www.gov.br/mec/", "fault": "404", "count": None})  # agency down
    w.site.remove("mulheres", "mulheres-noticia-3", 404)  # one withdrawn
    figures = {"outage_rounds": []}
    for hour in range(8):  # 7 simulated hours of outage, the checks running every hour
        w.now = NOW + timedelta(hours=hour, minutes=1)
        r = w.round()
        figures["outage_rounds"].append(
            {
                "hour": hour,
                "outcomes": r["outcomes"],
                "breaker_changes": len(r["breaker_changes"]),
                "mec_suspect": w.flagged("suspect_removed"),
                "hidden": w.hidden(),
                "mec_searchable": w.searchable("mec"),
            }
        )
        assert w.hidden("mec") == 0 and w.searchable("mec") == MEC_N, figures
    paused = {(b["scope"], b["key"]) for b in tripped_breakers(pg)}
    assert ("agency", "mec") in paused and ("agency", "mulheres") not in paused
    assert w.flagged("suspect_removed") == MEC_N
    # seen gone twice, 6 h apart (evidence enough, were removals not paused), and not every hour
    # in between: a check before the delay is up confirms nothing
    assert 2 <= w.count("SELECT max(gone_checks) FROM integrity_state") < 7
    assert (
        w.count("SELECT max(extract(epoch FROM last_checked_at - gone_since)) FROM integrity_state")
        >= 6 * 3600
    )
    report = integrity_report(pg)
    assert {(b["scope"], b["key"]) for b in report["removals_paused"]} == paused
    assert "removals paused" in format_table(report) and "agency mec" in format_table(report)
    from dgb.observe.status import pipeline_status

    assert ("agency", "mec") in {(b["scope"], b["key"]) for b in pipeline_status(pg)["removals_paused"]}
    # the agency answers again
    w.server.faults.clear()
    for hour in (8, 9):
        w.now = NOW + timedelta(hours=hour, minutes=1)
        r = w.round()
        figures.setdefault("recovery_rounds", []).append(
            {"hour": hour, "outcomes": r["outcomes"], "breaker_changes": r["breaker_changes"]}
        )
    figures.update(
        {
            "mec_articles": MEC_N,
            "mec_hidden": w.hidden("mec"),
            "mec_searchable": w.searchable("mec"),
            "mec_suspect_left": w.flagged("suspect_removed"),
            "withdrawn_hidden": w.hidden("mulheres"),
            "mulheres_searchable": w.searchable("mulheres"),
            "breakers_tripped_now": tripped_breakers(pg),
            "checks": w.count("SELECT count(*) FROM integrity_checks"),
        }
    )
    with capsys.disabled():
        print(
            "\nissue 16 scenario: agency mec (30 articles) answers 404 for 7 h, checks hourly; one mulheres"
            " article withdrawn"
        )
        for r in figures["outage_rounds"] + figures["recovery_rounds"]:
            print(f"  hour {r['hour']}: {json.dumps(r, default=str)}")
        print(
            "  end:", json.dumps({k: v for k, v in figures.items() if not k.endswith("_rounds")}, default=str)
        )
    assert (
        figures["mec_hidden"] == 0 and figures["mec_searchable"] == MEC_N and figures["mec_suspect_left"] == 0
    )
    assert tripped_breakers(pg) == []
    assert (
        w.count("SELECT count(*) FROM news WHERE removed_at IS NOT NULL AND unique_id = %s", withdrawn) == 1
    )
    assert figures["withdrawn_hidden"] == 1 and figures["mulheres_searchable"] == 4
    assert w.hidden() == 1


def test_without_the_breaker_a_long_outage_would_hide_the_agency(pg, mirror):
    """The control for the breaker: the same 7 h outage with the breaker out of reach hides the
    agency once the delay has passed (so the breaker is what keeps it)."""
    w = World(pg, mirror, policy=RemovalPolicy(breaker_min_checks=10_000))
    w.server.faults.add({"path_prefix": "/www.gov.br/mec/", "fault": "404", "count": None})
    for hour in range(8):
        w.now = NOW + timedelta(hours=hour, minutes=1)
        w.round()
        if hour < 6:
            assert w.hidden("mec") == 0, hour  # the delay alone protects the first 6 h
    assert w.hidden("mec") == MEC_N and tripped_breakers(pg) == []


def test_all_503_trips_the_breaker_and_hides_nothing(pg, mirror, ts_index, capsys):
    w = World(pg, mirror, ts_index)
    w.server.faults.add({"path_prefix": "/www.gov.br/mec/", "fault": "503", "count": None})
    impatient = replace(FAST, retries=0)
    r = w.round(impatient)
    assert r["outcomes"].get("error", 0) >= MEC_N and w.hidden() == 0 and w.searchable("mec") == MEC_N
    assert ("agency", "mec", "tripped") in {(c["scope"], c["key"], c["event"]) for c in r["breaker_changes"]}
    assert {"agency:mec"} <= {f"{b['scope']}:{b['key']}" for b in tripped_breakers(pg)}
    page = _ui_page(pg_server_dsn(pg))  # the operator sees it on the UI page
    assert 'id="removals-paused"' in page and 'data-breaker-scope="agency" data-breaker-key="mec"' in page
    from dgb.cli import main

    capsys.readouterr()
    assert main(["status"]) == 0  # ... and in `dgb status`
    assert "REMOVALS PAUSED agency mec since" in capsys.readouterr().out
    w.server.faults.clear()
    w.now += timedelta(hours=1, minutes=1)
    r = w.round()
    assert ("agency", "mec", "cleared") in {(c["scope"], c["key"], c["event"]) for c in r["breaker_changes"]}
    assert tripped_breakers(pg) == [] and w.hidden() == 0


def pg_server_dsn(conn) -> str:
    info = conn.info
    return f"postgresql://{info.user}:{info.password}@{info.host}:{info.port}/{info.dbname}"


def _ui_page(dsn: str) -> str:
    import sys
    from pathlib import Path

    from fastapi.testclient import TestClient

    plugins = str(Path(__file__).resolve().parents[3] / "plugins")
    if plugins not in sys.path:
        sys.path.insert(0, plugins)
    from dgb_airflow.ui.app import create_app

    resp = TestClient(create_app(lambda: db.connect(dsn), require_auth=False)).get("/")
    assert resp.status_code == 200
    return resp.text


def test_url_migration_with_redirects_moves_every_article(pg, mirror, ts_index):
    w = World(pg, mirror, ts_index)
    old = dict(w.pg.execute("SELECT unique_id, url FROM news WHERE agency_key = 'mec'").fetchall())
    w.pg.commit()
    for i in range(MEC_N):  # the site moved every URL, with 301s from the old ones
        w.site.move("mec", f"mec-noticia-{i:02d}", f"migrado-mec-noticia-{i:02d}")
    w.now += timedelta(minutes=1)
    r = w.round()
    assert r["outcomes"].get("moved") == MEC_N and w.hidden() == 0 and not r["breaker_changes"]
    new = dict(w.pg.execute("SELECT unique_id, url FROM news WHERE agency_key = 'mec'").fetchall())
    w.pg.commit()
    assert set(new) == set(old)  # the same articles (no new rows), at their new URLs
    assert all(new[u] == old[u].replace("/mec-noticia-", "/migrado-mec-noticia-") for u in old)
    history = w.pg.execute(
        "SELECT n.unique_id, h.old_value, h.new_value, h.source FROM news_update_history h"
        " JOIN news n ON n.id = h.news_id WHERE h.field_changed = 'url'"
    ).fetchall()
    w.pg.commit()
    assert sorted(history) == sorted((u, old[u], new[u], "integrity") for u in old)
    doc = w.ts.collections[w.alias].documents[next(iter(old))].retrieve()
    assert doc["url"] == new[next(iter(old))]  # the index shows the new URL
    assert w.searchable("mec") == MEC_N and w.flagged("suspect_removed") == 0
    report = integrity_report(pg)
    mec = next(a for a in report["agencies"] if a["agency_key"] == "mec")
    assert mec["moved_articles"] == MEC_N and mec["modified_articles"] == 0  # a move is not an edit
    w.now += timedelta(hours=1, minutes=1)
    again = w.round()  # the new URL answers directly now
    assert again["outcomes"].get("moved", 0) == 0 and again["outcomes"].get("unchanged", 0) >= MEC_N


def test_an_article_rewritten_then_moved_is_followed_by_its_publication_time(pg, mirror):
    # an editor rewrote title and text (Plone renames the URL and redirects the old one) before
    # integrity saw the edit: the page differs in both, but carries the stored publication time
    w = World(pg, mirror)
    uid = w.count("SELECT unique_id FROM news WHERE url LIKE '%/mec-noticia-03'")
    w.site.edit("mec", "mec-noticia-03", title="Título inteiramente novo", content="Um texto todo reescrito.")
    w.site.move("mec", "mec-noticia-03", "titulo-inteiramente-novo")
    with w.fetcher() as f:
        result = check_article(pg, f, uid, now=w.now + timedelta(minutes=1), policy=w.policy)
    assert result.outcome == "moved" and result.content.found_via == "redirect"
    assert result.content.moved_to.endswith("/titulo-inteiramente-novo")
    url, title, removed_at = w.pg.execute(
        "SELECT url, title, removed_at FROM news WHERE unique_id = %s", (uid,)
    ).fetchone()
    w.pg.commit()
    assert url == result.content.moved_to and title == "Título inteiramente novo" and removed_at is None


def test_plone6_page_found_for_an_article_moved_without_redirect(pg, mirror):
    w = World(pg, mirror)
    uid = w.count("SELECT unique_id FROM news WHERE url LIKE '%/mec-noticia-04'")
    w.site.move("mec", "mec-noticia-04", "noticia-04-nova-casa", redirect=False)  # old URL: plain 404
    with w.fetcher() as f:
        result = check_article(pg, f, uid, now=w.now + timedelta(minutes=1), policy=w.policy)
    assert result.outcome == "moved" and result.content.found_via == "plone6_search"
    assert result.content.moved_to.endswith("/noticia-04-nova-casa") and result.flags == ["moved"]
    url, removed_at, problem = w.pg.execute(
        "SELECT url, removed_at, problem FROM news WHERE unique_id = %s", (uid,)
    ).fetchone()
    w.pg.commit()
    assert url == result.content.moved_to and removed_at is None and problem is None


def test_withdrawn_article_is_hidden_after_two_404s_six_hours_apart_and_comes_back(pg, mirror, ts_index):
    w = World(pg, mirror, ts_index)
    uid = w.count("SELECT unique_id FROM news WHERE url LIKE '%/mulheres-noticia-1'")
    w.site.remove("mulheres", "mulheres-noticia-1", 404)
    with w.fetcher() as f:
        first = check_article(pg, f, uid, now=w.now, policy=w.policy)
    assert first.outcome == "suspect_removed" and not first.evidence.confirmed
    w.index()
    assert w.searchable("mulheres") == 5  # flagged, still searchable
    with db.transaction(pg) as cur:  # the first 404 was seen 6 h ago
        cur.execute(
            "UPDATE integrity_state SET gone_since = gone_since - interval '6 hours'"
            " WHERE news_id = (SELECT id FROM news WHERE unique_id = %s)",
            (uid,),
        )
    with w.fetcher() as f:
        second = check_article(pg, f, uid, now=w.now, policy=w.policy)
    assert second.outcome == "removed" and second.evidence.confirmed and second.flags == ["removed"]
    w.index()
    assert w.searchable("mulheres") == 4 and w.hidden() == 1
    w.site.reset()  # it comes back (200 again)
    with w.fetcher() as f:
        back = check_article(pg, f, uid, now=w.now + timedelta(minutes=5), policy=w.policy)
    assert back.outcome == "unchanged" and back.flags == ["restored"]
    w.index()  # re-added through the index stage
    assert w.searchable("mulheres") == 5 and w.hidden() == 0


def test_410_is_confirmed_sooner(pg, mirror):
    w = World(pg, mirror)
    uid = w.count("SELECT unique_id FROM news WHERE url LIKE '%/mulheres-noticia-2'")
    w.site.remove("mulheres", "mulheres-noticia-2", 410)
    with w.fetcher() as f:
        first = check_article(pg, f, uid, now=w.now, policy=w.policy)
        early = check_article(pg, f, uid, now=w.now + timedelta(minutes=10), policy=w.policy)
        late = check_article(pg, f, uid, now=w.now + timedelta(minutes=16), policy=w.policy)
    assert (first.outcome, early.outcome, late.outcome) == ("suspect_removed", "suspect_removed", "removed")
    assert first.next_due_at == w.now + timedelta(minutes=15)  # when the evidence can be complete
    assert w.hidden() == 1


def test_operator_sends_a_statsd_event_when_the_breaker_trips(pg, mirror, monkeypatch, pg_server):
    import sys
    from pathlib import Path

    plugins = str(Path(__file__).resolve().parents[3] / "plugins")
    if plugins not in sys.path:
        sys.path.insert(0, plugins)
    from airflow.providers.postgres.hooks.postgres import PostgresHook

    import dgb.integrity.cli as integrity_cli
    from dgb_airflow.operators import integrity as op_module

    w = World(pg, mirror)
    w.server.faults.add({"path_prefix": "/www.gov.br/mec/", "fault": "503", "count": None})
    sent: list[tuple[str, int, dict]] = []
    monkeypatch.setattr(op_module, "_incr", lambda stat, count=1, tags=None: sent.append((stat, count, tags)))
    monkeypatch.setattr(PostgresHook, "get_conn", lambda self: db.connect(pg_server.pg_dsn()))
    monkeypatch.setattr(
        integrity_cli, "make_fetcher", lambda settings=None: w.fetcher(replace(FAST, retries=0))
    )
    monkeypatch.setenv("DGB_INTEGRITY_OUTBOX_MAX_AGE_S", "0")
    monkeypatch.setenv("DGB_INTEGRITY_BACKLOG_MAX", "0")
    op_module.IntegrityTierOperator(task_id="check_0_2d", tier="0_2d", limit=100).execute({})
    with pytest.raises(RuntimeError, match="every integrity check of tier 3_7d failed"):  # only mec there:
        op_module.IntegrityTierOperator(task_id="check_3_7d", tier="3_7d", limit=100).execute({})  # retried
    trips = [(s, c, t) for s, c, t in sent if s == "dgb.integrity.breaker.tripped"]
    assert ("dgb.integrity.breaker.tripped", 1, {"scope": "agency", "key": "mec"}) in trips
    assert len([t for t in trips if t[2] == {"scope": "agency", "key": "mec"}]) == 1  # one event per trip
    assert sum(c for s, c, _ in sent if s == "dgb.integrity.checks") == MEC_N + 5
