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
