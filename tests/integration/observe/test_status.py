"""`dgb status` against real PostgreSQL."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from dgb import db
from dgb.cli import main
from dgb.observe.status import pipeline_status

pytestmark = pytest.mark.stack


def _news(cur, uid, scraped_ago, enriched=False, embedded=False, indexed_after=None):
    now = datetime.now(UTC)
    scraped = now - timedelta(seconds=scraped_ago)
    cur.execute(
        "INSERT INTO news (unique_id, agency_key, title, url, published_at, scraped_at, enriched_at,"
        " embedded_at,"
        " indexed_at, indexed_version) VALUES (%s, 'mec', 't', %s, now(), %s, %s, %s, %s, %s)",
        (
            uid,
            f"https://x/{uid}",
            scraped,
            scraped if enriched else None,
            scraped if embedded else None,
            scraped + timedelta(seconds=indexed_after) if indexed_after is not None else None,
            1 if indexed_after is not None else None,
        ),
    )


def test_counts_backlog_and_latency(pg, capsys):
    with db.transaction(pg) as cur:
        for i, lat in enumerate((2, 4, 6, 8, 100)):
            _news(cur, f"done_{i}", 600, True, True, indexed_after=lat)
        _news(cur, "waiting_enrich", 120)
        _news(cur, "waiting_embed", 30, enriched=True)
        cur.execute(
            "INSERT INTO outbox (topic, aggregate_id, payload, created_at) VALUES"
            " ('dgb.news.scraped', 'waiting_enrich', '{}', now() - interval '50 seconds')"
        )
        cur.execute(
            "INSERT INTO dead_letters (subscription, message_key, reason) VALUES ('s', 'k', 'malformed_json')"
        )
    s = pipeline_status(pg)
    assert (s["articles"], s["enriched"], s["embedded"], s["indexed"]) == (7, 6, 5, 5)
    assert s["dead_letters"] == 1 and s["outbox_pending"] == 1
    assert s["backlog"]["enrich"]["pending"] == 1 and 115 <= s["backlog"]["enrich"]["oldest_age_s"] <= 180
    assert s["backlog"]["embed"]["pending"] == 1 and 25 <= s["backlog"]["embed"]["oldest_age_s"] <= 90
    assert s["backlog"]["index"]["pending"] == 1  # enriched but never indexed
    assert s["latency_p50_s"] == pytest.approx(6.0) and s["latency_sample"] == 5
    assert 8 < s["latency_p95_s"] <= 100
    # a window that starts after them all has no latency sample
    later = pipeline_status(pg, since=datetime.now(UTC) + timedelta(seconds=1))
    assert later["latency_p50_s"] is None and later["latency_sample"] == 0
    assert main(["status", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in (
        "articles",
        "enriched",
        "embedded",
        "indexed",
        "dead_letters",
        "outbox_pending",
        "backlog",
        "latency_p50_s",
        "latency_p95_s",
    ):
        assert key in out
    assert main(["status", "--json", "--since", "not-a-date"]) == 2


def test_status_shows_each_agencys_scrape_cadence_reason_and_lag(pg, capsys):
    from dgb.scraper.cadence import CadencePolicy
    from dgb.scraper.dags import ScrapeSpec
    from dgb.scraper.dispatch import decide

    assert main(["status"]) == 0
    assert "scrape cadence: none yet (the scrape_dispatcher DAG has not run)" in capsys.readouterr().out
    now = datetime.now(UTC)
    with db.transaction(pg) as cur:
        for i in range(6):  # mec: six articles in the last hour, each stored 40 s after publication
            published = now - timedelta(minutes=10 * i + 5)
            cur.execute(
                "INSERT INTO news (unique_id, agency_key, title, url, published_at, created_at)"
                " VALUES (%s, 'mec', 't', %s, %s, %s)",
                (f"c{i}", f"https://x/c{i}", published, published + timedelta(seconds=40)),
            )
    specs = [ScrapeSpec("scrape_mec", ("mec",), None), ScrapeSpec("scrape_aeb", ("aeb",), None)]
    decide(pg, specs, policy=CadencePolicy(), rps=2.0)
    c = pipeline_status(pg)["scrape_cadence"]
    assert [a["agency"] for a in c["agencies"]] == ["mec", "aeb"]  # fastest first
    mec, aeb = c["agencies"]
    assert (mec["interval_s"], mec["reason"], mec["lag_p50_s"], mec["lag_articles"]) == (60, "recent", 40, 6)
    # aeb never published: the prior gives it a little of the group's forecast, which the ample
    # budget of two agencies buys at a few minutes or, in the hours mec never published in, leaves
    assert aeb["lag_articles"] == 0 and aeb["interval_s"] >= 120
    assert aeb["reason"] in ("target", "rationed", "dormant")
    polls = round(60 + 3600 / aeb["interval_s"])
    assert c["by_reason"] == dict(sorted({aeb["reason"]: 1, "recent": 1}.items()))
    assert c["polls_per_hour"] == pytest.approx(polls, abs=0.5)
    # integrity plans with what the two agencies' listings leave of www.gov.br's 2 req/s
    share = pipeline_status(pg)["integrity_share"]
    assert share["source"] == "host" and share["host_rps"] == 2.0
    assert share["listings_planned_rps"] == pytest.approx(1 / 60 + 1 / aeb["interval_s"], abs=1e-3)
    taken = max(share["listings_planned_rps"] + share["articles_planned_rps"], share["scrape_measured_rps"])
    assert share["rps"] == pytest.approx(2.0 - taken, abs=2e-3)
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    reasons = ", ".join(f"{k} {v}" for k, v in c["by_reason"].items())
    assert "scrape cadence (decided" in out and f"2 agencies, ~{polls} polls/h; {reasons}" in out
    planned = f"listings planned {share['listings_planned_rps']:.2f}/s, articles forecast "
    assert "integrity share: " in out and f" req/s of www.gov.br's 2 ({planned}" in out
    assert "scrape mec " in out and "every    60 s  recent" in out and "lag p50 40 s (n=6)" in out
    every = f"{aeb['interval_s']:.0f} s" if aeb["interval_s"] < 120 else f"{aeb['interval_s'] / 60:.0f} min"
    assert "scrape aeb " in out and f"every {every:>7s}  {aeb['reason']}" in out
    assert main(["status", "--json"]) == 0
    cadence = json.loads(capsys.readouterr().out)["scrape_cadence"]
    assert [(a["agency"], a["reason"]) for a in cadence["agencies"]] == [
        ("mec", "recent"),
        ("aeb", aeb["reason"]),
    ]


def test_status_prints_each_agencys_polls_yield_cadence_and_integritys_share(pg, capsys):
    from dgb.observe.yields import split_text
    from dgb.scraper import polls
    from dgb.scraper.cadence import CadencePolicy
    from dgb.scraper.dags import ScrapeSpec
    from dgb.scraper.dispatch import Probe, decide

    now = datetime.now(UTC)

    def article(cur, uid, published, stored):
        cur.execute(
            "INSERT INTO news (unique_id, agency_key, title, url, published_at, created_at)"
            " VALUES (%s, 'mec', 't', %s, %s, %s)",
            (uid, f"https://x/{uid}", published, stored),
        )

    with db.transaction(pg) as cur:
        for i in range(3):  # mec: three new articles two hours ago, each stored 40 s after publication
            published = now - timedelta(hours=2, minutes=10 * i)
            article(cur, f"y{i}", published, published + timedelta(seconds=40))
        article(cur, "backfill", now - timedelta(days=5), now - timedelta(hours=1))  # not found by a poll
        article(cur, "before", now - timedelta(hours=26, minutes=1), now - timedelta(hours=26))
    specs = [ScrapeSpec("scrape_mec", ("mec",), None), ScrapeSpec("scrape_aeb", ("aeb",), None)]
    decide(pg, specs, policy=CadencePolicy(), rps=2.0)
    with db.transaction(pg) as cur:  # the dispatcher's polls, as its ticks record them
        polls.add(cur, [Probe("mec", new=2)] + [Probe("mec")] * 59, now - timedelta(hours=2))
        polls.add(cur, [Probe("mec")] * 40 + [Probe("aeb", error="network_error")], now - timedelta(hours=1))
        polls.add(cur, [Probe("aeb")] * 9, now - timedelta(minutes=1))
        polls.add(cur, [Probe("mec")] * 500, now - timedelta(hours=30))  # before the window
        for i in range(11):  # quiet agencies polled once, so the list is longer than the default 10
            polls.add(cur, [Probe(f"q{i:02d}")], now - timedelta(hours=3))

    status = pipeline_status(pg)
    table, share = status["listing_polls"], status["integrity_share"]
    rows = {a["agency"]: a for a in table["agencies"]}
    assert [a["agency"] for a in table["agencies"]][:2] == ["mec", "aeb"]  # most polled first
    mec, aeb = rows["mec"], rows["aeb"]
    assert (mec["polls"], mec["found"], mec["failed"], mec["articles"], mec["yield"]) == (100, 1, 0, 3, 0.03)
    assert (aeb["polls"], aeb["found"], aeb["failed"], aeb["articles"], aeb["yield"]) == (10, 0, 1, 0, 0.0)
    cadence = {a["agency"]: a for a in status["scrape_cadence"]["agencies"]}
    assert (mec["interval_s"], mec["reason"]) == (cadence["mec"]["interval_s"], cadence["mec"]["reason"])
    assert rows["q00"]["reason"] is None and rows["q00"]["yield"] == 0.0  # polled, never decided here
    t = table["totals"]
    assert (t["polls"], t["found"], t["failed"], t["articles"], t["agencies"]) == (121, 1, 1, 3, 13)
    assert table["share"]["integrity_rps"] == share["rps"] and table["share"]["host_rps"] == 2.0
    assert table["share"]["integrity_fraction"] == pytest.approx(share["rps"] / 2.0, abs=1e-4)

    assert main(["status"]) == 0
    out = capsys.readouterr().out.splitlines()
    first = next(i for i, line in enumerate(out) if line.startswith("  listing polls since "))
    assert out[first - 1].startswith("  integrity share: ")  # a new section after the existing lines
    assert out[first].endswith(
        ": 121 polls (1 found news, 1 failed), 3 new articles, yield 0.025 articles/poll, 0.00 polls/s"
    )
    assert out[first + 1] == f"  {split_text(table['share'])}"
    assert out[first + 1].startswith("  integrity vs listings (www.gov.br's 2 req/s): integrity ")

    def every(a):
        return f"{a['interval_s']:.0f} s" if a["interval_s"] < 120 else f"{a['interval_s'] / 60:.0f} min"

    assert out[first + 2].startswith(
        "    polls mec                             100  found    1  failed   0  articles    3"
        f"  yield  0.030  every {every(mec):>7s}  {mec['reason']:<8s} next in "
    )
    assert out[first + 3].startswith(
        "    polls aeb                              10  found    0  failed   1  articles    0"
        f"  yield  0.000  every {every(aeb):>7s}  {aeb['reason']:<8s} next in "
    )
    assert out[first + 4] == (
        "    polls q00                               1  found    0  failed   0  articles    0"
        "  yield  0.000  every       -  -        next in -"
    )
    assert out[first + 12 :] == ["    ... 3 more agencies (dgb status --agencies)"]
    assert main(["status", "--agencies"]) == 0
    every_agency = capsys.readouterr().out.splitlines()
    first = next(i for i, line in enumerate(every_agency) if line.startswith("  listing polls since "))
    assert [line.split()[1] for line in every_agency[first + 2 :]] == ["mec", "aeb"] + [
        f"q{i:02d}" for i in range(11)
    ]
    assert main(["status", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["listing_polls"]
    assert [a["agency"] for a in listed["agencies"]] == [a["agency"] for a in table["agencies"]]
