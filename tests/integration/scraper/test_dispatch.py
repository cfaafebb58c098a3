"""The scrape dispatcher's decision (dgb.scraper.dispatch) against real PostgreSQL: publication
history from ``news``, last polls from ``scrape_runs`` and its own dispatches, ``scrape_cadence``."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from dgb import db
from dgb.fetch import Fetcher
from dgb.scraper.cadence import CadencePolicy, hour_of_week
from dgb.scraper.dags import ScrapeSpec
from dgb.scraper.dispatch import Probe, decide, probe, probe_url, run_tick
from dgb.scraper.run import scrape_agency
from tests.support.articles import ARTICLES, mirrored_agency
from tests.support.fetch import FAST

pytestmark = pytest.mark.stack

POLICY = CadencePolicy()
NOW = datetime(2026, 12, 7, 14, 0, tzinfo=UTC)  # Monday 11:00 in Brasília
SPECS = [
    ScrapeSpec(f"scrape_{k}", (k,), None) for k in ("ministerio-ocupado", "autarquia-quieta", "orgao-alerta")
]


def add_news(conn, agency: str, published: datetime, lag_s: float = 90.0) -> None:
    uid = f"{agency}-{published.timestamp():.0f}"
    with db.transaction(conn) as cur:
        cur.execute(
            "INSERT INTO news (unique_id, agency_key, title, url, published_at, created_at, scraped_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (
                uid,
                agency,
                f"Notícia {uid}",
                f"https://www.gov.br/{agency}/{uid}",
                published,
                published + timedelta(seconds=lag_s),
                published + timedelta(seconds=lag_s),
            ),
        )


def add_run(conn, agency: str, started: datetime) -> None:
    with db.transaction(conn) as cur:
        cur.execute(
            "INSERT INTO scrape_runs (agency_key, status, started_at, scraped_at)"
            " VALUES (%s, 'success', %s, %s)",
            (agency, started, started + timedelta(seconds=3)),
        )


@pytest.fixture
def history(pg):
    # a ministry publishing ~3 an hour in weekday office hours for four weeks
    t = NOW - timedelta(days=28)
    while t < NOW - timedelta(minutes=20):
        slot = hour_of_week(t.timestamp())
        if slot // 24 < 5 and 9 <= slot % 24 < 18:
            add_news(pg, "ministerio-ocupado", t)
        t += timedelta(minutes=20)
    add_news(pg, "autarquia-quieta", NOW - timedelta(days=100))  # nothing in four weeks
    add_news(pg, "orgao-alerta", NOW - timedelta(days=90))
    add_news(pg, "orgao-alerta", NOW - timedelta(minutes=4), lag_s=30)  # an emergency, just published
    add_run(pg, "ministerio-ocupado", NOW - timedelta(seconds=62))
    add_run(pg, "autarquia-quieta", NOW - timedelta(minutes=20))
    add_run(pg, "orgao-alerta", NOW - timedelta(minutes=2))
    return pg


def rows(conn) -> dict[str, tuple]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT agency_key, interval_s, reason, dispatched_at, lag_p50_s, lag_articles"
            " FROM scrape_cadence"
        )
        return {r[0]: r[1:] for r in cur.fetchall()}


def test_the_dispatcher_starts_the_busy_and_the_alerted_agencies_not_the_quiet_one(history):
    decision = decide(history, SPECS, now=NOW.timestamp(), policy=POLICY, rps=2.0)
    assert set(decision.dag_ids) == {"scrape_orgao-alerta", "scrape_ministerio-ocupado"}
    by_key = {a.key: a for a in decision.agencies}
    assert (by_key["ministerio-ocupado"].cadence.interval_s, by_key["ministerio-ocupado"].reason) == (
        60,
        "busy",
    )
    assert by_key["ministerio-ocupado"].cadence.rate_per_hour > 2
    assert (by_key["autarquia-quieta"].cadence.interval_s, by_key["autarquia-quieta"].reason) == (
        3600,
        "dormant",
    )
    assert by_key["orgao-alerta"].reason == "recent" and by_key["orgao-alerta"].cadence.interval_s == 60
    stored = rows(history)
    assert stored["ministerio-ocupado"][:2] == (60, "busy")
    assert stored["ministerio-ocupado"][2] == NOW  # dispatched now
    assert stored["autarquia-quieta"][1:3] == ("dormant", None)
    # measured lag: the median publication -> stored delay of the last 24 hours
    assert stored["ministerio-ocupado"][3] == pytest.approx(90.0) and stored["ministerio-ocupado"][4] > 0
    assert stored["orgao-alerta"][3:] == (pytest.approx(30.0), 1)
    assert stored["autarquia-quieta"][3:] == (None, 0)


def test_a_dispatched_agency_is_not_dispatched_again_before_its_run_starts(history):
    decide(history, SPECS, now=NOW.timestamp(), policy=POLICY, rps=2.0)
    again = decide(history, SPECS, now=NOW.timestamp() + 20, policy=POLICY, rps=2.0)
    assert again.dag_ids == []
    # a minute later the busy ministry is due again (its floor), the quiet agency still is not
    later = decide(history, SPECS, now=NOW.timestamp() + 60, policy=POLICY, rps=2.0)
    assert "scrape_ministerio-ocupado" in later.dag_ids and "scrape_autarquia-quieta" not in later.dag_ids


def test_the_dormant_agency_is_started_at_its_ceiling(history):
    # 20 minutes after its last poll it waits; 60 minutes after it, it is due
    assert (
        "scrape_autarquia-quieta"
        not in decide(history, SPECS, now=NOW.timestamp(), policy=POLICY, rps=2.0).dag_ids
    )
    at_ceiling = NOW.timestamp() + 40 * 60
    assert "scrape_autarquia-quieta" in decide(history, SPECS, now=at_ceiling, policy=POLICY, rps=2.0).dag_ids


def test_over_the_listing_share_the_rest_waits_for_the_next_tick(history):
    # www.gov.br at 2 requests a minute: 0.18 of it over the week is ~72 polls in this hour, one in
    # this tick; the ministry (rationed to 2 min) and the alerted agency are both due a minute on
    tiny = 1.0 / 30
    decision = decide(history, SPECS, now=NOW.timestamp() + 60, policy=POLICY, rps=tiny)
    assert decision.plan.capacity == 1
    assert len(decision.dag_ids) == 1
    waiting = [a.key for a in decision.agencies if a.reason == "budget"]
    assert len(waiting) == 1
    assert rows(history)[waiting[0]][1] == "budget"


@pytest.fixture
def three_agencies(pg, mirror):
    """(agencies, specs) on the local site: mec with its articles all stored, mulheres with two
    not stored yet, saude with a listing that does not exist."""
    site, server, base = mirror(ARTICLES)
    mec, mulheres = mirrored_agency(base, "mec"), mirrored_agency(base, "mulheres")
    broken = replace(mirrored_agency(base, "saude"), url=f"{base}/www.gov.br/saude/nao-existe")
    with Fetcher(FAST) as f:
        assert len(scrape_agency(pg, mec, f).new) == 5  # mec's articles are all stored
    agencies = {"mec": mec, "mulheres": mulheres, "saude": broken}
    return agencies, [ScrapeSpec(f"scrape_{k}", (k,), None) for k in agencies]


def test_a_tick_polls_the_due_agencies_and_starts_only_those_with_news(pg, three_agencies):
    agencies, specs = three_agencies
    now = time.time() + 2 * 3600  # mec's last poll (its scrape run) two hours before: every one due
    with Fetcher(FAST) as f:
        decision = run_tick(pg, specs, f, agencies.__getitem__, now=now, policy=POLICY, rps=2.0)
        listings = f.stats.requests
    assert set(decision.dag_ids) == {"scrape_mec", "scrape_mulheres", "scrape_saude"}
    probes = {p.key: (p.new, p.error) for p in decision.probes}
    assert probes == {"mec": (0, None), "mulheres": (2, None), "saude": (0, "url_broken")}
    # nothing new at mec: no scrape run; news at mulheres and a failing listing at saude: their runs
    assert sorted(decision.triggered) == ["scrape_mulheres", "scrape_saude"]
    assert listings <= 3 + 1  # one listing request per agency (and robots.txt once)
    polled = {k: v[2] for k, v in rows(pg).items()}
    assert all(at is not None and abs(at.timestamp() - now) < 1 for at in polled.values())


def test_a_tick_stops_polling_at_its_deadline_and_leaves_the_rest_first_in_line(pg, mirror):
    site, server, base = mirror(ARTICLES)
    agencies = {k: mirrored_agency(base, k) for k in ("mec", "mulheres")}
    specs = [ScrapeSpec(f"scrape_{k}", (k,), None) for k in agencies]
    ticks = iter([0, 10, 60, 110])  # the start, 10 s: one poll, 60 s: past the 45 s deadline
    with Fetcher(FAST) as f:
        decision = run_tick(
            pg,
            specs,
            f,
            agencies.__getitem__,
            policy=POLICY,
            rps=2.0,
            deadline_s=45,
            clock=lambda: next(ticks),
        )
    assert len(decision.dag_ids) == 2 and len(decision.probes) == 1
    waiting = [a for a in decision.agencies if a.reason == "budget"]
    assert len(waiting) == 1 and not waiting[0].dispatched
    assert rows(pg)[waiting[0].key][2] is None  # not polled: never polled stays first next tick


def test_a_plone6_poll_reads_a_small_page_of_summaries_and_finds_the_same_news(pg, mirror):
    site, server, base = mirror(ARTICLES)
    mec = mirrored_agency(base, "mec", kind="plone6_api")
    url = probe_url(mec)
    assert "sort_on=effective" in url and "b_size=10" in url and "fullobjects" not in url
    with Fetcher(FAST) as f:
        assert probe(pg, mec, f) == Probe("mec", new=5)  # nothing stored yet: the five are news
        scrape_agency(pg, mec, f)  # the scrape reads whole articles; the URLs are the same
        assert probe(pg, mec, f) == Probe("mec", new=0)


def poll_rows(conn) -> dict[tuple[str, datetime], tuple[int, int, int]]:
    with conn.cursor() as cur:
        cur.execute("SELECT agency_key, hour, polls, found, failed FROM listing_polls")
        return {(k, h): (p, f, e) for k, h, p, f, e in cur.fetchall()}


def test_a_tick_counts_its_polls_per_agency_and_hour_with_its_cadences(pg, three_agencies):
    agencies, specs = three_agencies
    now = time.time() + 2 * 3600  # every one due
    with Fetcher(FAST) as f:
        run_tick(pg, specs, f, agencies.__getitem__, now=now, policy=POLICY, rps=2.0)
        # an hour later, each due again (their interval at most the ceiling): one more poll each
        run_tick(pg, specs, f, agencies.__getitem__, now=now + 3600, policy=POLICY, rps=2.0)
    hour = datetime.fromtimestamp(now, UTC).replace(minute=0, second=0, microsecond=0)
    later = hour + timedelta(hours=1)
    assert poll_rows(pg) == {
        ("mec", hour): (1, 0, 0),
        ("mulheres", hour): (1, 1, 0),  # its two articles are news: its scrape DAG was started
        ("saude", hour): (1, 0, 1),
        ("mec", later): (1, 0, 0),
        ("mulheres", later): (1, 1, 0),  # still news: nothing scraped them in between
        ("saude", later): (1, 0, 1),
    }
    # the polls and the cadence were written together: the agency's dispatched_at is its last poll
    assert {k: v[2].timestamp() for k, v in rows(pg).items()} == pytest.approx(
        dict.fromkeys(agencies, now + 3600), abs=1e-3
    )


def test_poll_counts_older_than_a_week_are_dropped_when_the_dispatcher_records(history):
    old = NOW - timedelta(days=7, hours=1)
    with db.transaction(history) as cur:
        cur.execute(
            "INSERT INTO listing_polls (agency_key, hour, polls) VALUES ('ministerio-ocupado', %s, 5),"
            " ('ministerio-ocupado', %s, 7)",
            (old.replace(minute=0), (NOW - timedelta(days=6)).replace(minute=0)),
        )
    decide(history, SPECS, now=NOW.timestamp(), policy=POLICY, rps=2.0)  # decides, polls nothing
    assert list(poll_rows(history).values()) == [(7, 0, 0)]
