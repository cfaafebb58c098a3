"""The operators' pipeline view (dgb.observe.overview, issue 14 item 6) on a known dataset in real
PostgreSQL: backlog history reconstructed from the stage timestamps, commit -> searchable latency
per hour, open dead letters by reason, host budgets and integrity bands; then the page
(dgb_airflow.ui.pipeline): every section, the empty database, JSON, and a headless-Chromium
screenshot."""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dgb import db
from dgb.integrity.report import band_figures
from dgb.observe.overview import backlog_history, dead_letters_by_reason, latency_history, pipeline_overview
from dgb.observe.status import pipeline_status

pytestmark = pytest.mark.stack

PLUGINS = Path(__file__).resolve().parents[3] / "plugins"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)
MODEL = "m1"

# uid: (scraped, enriched, embedded, indexed, embedding model, version, indexed_version, removed)
# in hours before NOW (None = not set)
ROWS = {
    "a1": (5.5, 4.5, 3.5, 2.5, MODEL, 1, 1, False),
    "a2": (2.5, 1.5, 0.75, 0.25, MODEL, 1, 1, False),
    "a3": (1.2, 1.1, 1.05, 0.5, MODEL, 1, 1, False),  # passes between grid points: never counted
    "a4": (3.5, None, None, None, None, 1, None, False),  # waits for enrich
    "a5": (10, 9, None, None, None, 1, None, False),  # waits for embed (and index) all window
    "a6": (100, 99, 98, 97, MODEL, 1, 1, False),  # done long before the window
    "a7": (4, None, None, None, None, 1, None, True),  # removed before enrichment: pending nowhere
    "a8": (1.5, 0.9, 0.6, 50, MODEL, 2, 1, False),  # edited: its index entry is for version 1
    "a9": (3.4, 3.2, 1.5, 1.4, "m0", 1, 1, False),  # embedded by another model: embed pending
}

# hand-computed from ROWS at NOW-6h, -5h, ..., NOW (enrich, embed, index)
EXPECTED_BACKLOG = [(0, 1, 1), (1, 1, 1), (0, 2, 2), (1, 2, 3), (2, 2, 2), (2, 3, 3), (1, 2, 2)]


def _ago(hours):
    return None if hours is None else NOW - hours * H


def _known_dataset(conn) -> None:
    with db.transaction(conn) as cur:
        for uid, (scr, enr, emb, idx, model, version, iv, removed) in ROWS.items():
            cur.execute(
                "INSERT INTO news (unique_id, agency_key, title, url, published_at, scraped_at, enriched_at,"
                " embedded_at, embedding_model, indexed_at, version, indexed_version, removed_at)"
                " VALUES (%s, 'mec', %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    uid,
                    f"Notícia {uid}",
                    f"https://www.gov.br/mec/{uid}",
                    _ago(scr),
                    _ago(scr),
                    _ago(enr),
                    _ago(emb),
                    model,
                    _ago(idx),
                    version,
                    iv,
                    NOW - H if removed else None,
                ),
            )
        for sub, key, reason, first, status in [
            ("dgb-enrichment", "k1", "bad_payload", 10, "open"),
            ("dgb-typesense", "k2", "bad_payload", 1, "open"),
            ("dgb-embeddings", "k3", "model_error", 2, "open"),
            ("dgb-enrichment", "k4", "bad_payload", 1, "redriven"),
        ]:
            cur.execute(
                "INSERT INTO dead_letters (subscription, message_key, reason, first_seen, last_seen, status)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                (sub, key, reason, NOW - first * H, NOW - first * H + timedelta(minutes=5), status),
            )
        cur.execute(
            "INSERT INTO host_budgets (host, rate_per_s, max_in_flight) VALUES ('www.gov.br', 2, 2),"
            " ('127.0.0.1:9', 1, 1)"
        )
        # 30 scrape + 42 integrity grants within the last minute (the measured rate's window)
        cur.execute(
            "INSERT INTO host_grants (host, at, priority) SELECT 'www.gov.br',"
            " clock_timestamp() - g * interval '0.5 second', CASE WHEN g <= 30 THEN 0 ELSE 1 END"
            " FROM generate_series(1, 72) g"
        )


def test_backlog_history_is_reconstructed_from_stage_timestamps(pg):
    _known_dataset(pg)
    points = backlog_history(pg, NOW, hours=6, step_minutes=60, model=MODEL)
    assert [p["at"] for p in points] == [(NOW - k * H).isoformat() for k in range(6, -1, -1)]
    assert [(p["enrich"], p["embed"], p["index"]) for p in points] == EXPECTED_BACKLOG
    # the last point is what `dgb status` counts now, by the same stage rules
    now_status = pipeline_status(pg, NOW - 6 * H, NOW, model=MODEL)["backlog"]
    assert {s: points[-1][s] for s in ("enrich", "embed", "index")} == {
        s: now_status[s]["pending"] for s in ("enrich", "embed", "index")
    }
    # without a current model, any vector counts: a9 is done at -1.5h
    any_model = backlog_history(pg, NOW, hours=6, step_minutes=60, model=None)
    assert [p["embed"] for p in any_model] == [1, 1, 2, 2, 2, 2, 1]
    # a finer grid catches a3's short passes too (-1.15h is inside its enrich step)
    fine = backlog_history(pg, NOW - 1.15 * H, hours=0.5, step_minutes=30)
    assert (fine[-1]["enrich"], fine[-1]["embed"]) == (3, 2)  # a4, a8 (scraped -1.5h), a3; a5, a2
    with pytest.raises(ValueError):
        backlog_history(pg, NOW, hours=0)


def test_latency_per_hour_of_becoming_searchable(pg):
    _known_dataset(pg)
    buckets = latency_history(pg, NOW, hours=6)
    assert [b["end"] for b in buckets] == [(NOW - k * H).isoformat() for k in range(5, -1, -1)]
    by_end = {b["end"]: b for b in buckets}
    last = by_end[NOW.isoformat()]  # a2 (2.25 h) and a3 (0.7 h)
    assert last["articles"] == 2
    assert last["p50_s"] == pytest.approx((8100 + 2520) / 2)
    assert last["p95_s"] == pytest.approx(2520 + 0.95 * (8100 - 2520))
    assert (by_end[(NOW - H).isoformat()]["p50_s"], by_end[(NOW - H).isoformat()]["articles"]) == (7200, 1)
    assert by_end[(NOW - 2 * H).isoformat()]["p95_s"] == 10800  # a1
    # a8's index entry is stale, a6 was indexed before the window
    assert sum(b["articles"] for b in buckets) == 4
    assert [b["articles"] for b in buckets[:3]] == [0, 0, 0] and buckets[0]["p50_s"] is None


def test_open_dead_letters_by_reason(pg):
    _known_dataset(pg)
    reasons = dead_letters_by_reason(pg, NOW, hours=6)
    assert [(r["reason"], r["open"], r["new"], r["subscriptions"]) for r in reasons] == [
        ("bad_payload", 2, 1, ["dgb-enrichment", "dgb-typesense"]),
        ("model_error", 1, 1, ["dgb-embeddings"]),
    ]
    assert reasons[0]["oldest"] == (NOW - 10 * H).isoformat()
    assert reasons[0]["latest"] == (NOW - H + timedelta(minutes=5)).isoformat()


def test_overview_bundles_status_hosts_and_bands(pg):
    _known_dataset(pg)
    o = pipeline_overview(pg, NOW, hours=6, step_minutes=60, model=MODEL)
    assert o["current"]["articles"] == 9 and o["current"]["dead_letters"] == 3
    assert "hosts" not in o["current"]
    assert [(p["enrich"], p["embed"], p["index"]) for p in o["backlog_history"]] == EXPECTED_BACKLOG
    gov = next(h for h in o["hosts"] if h["host"] == "www.gov.br")
    assert (gov["rate_per_s"], gov["max_in_flight"]) == (2.0, 2)
    assert gov["measured_rps"] == round(72 / 60, 3)
    assert gov["measured_rps_by_priority"] == {"scrape": 0.5, "integrity": 0.7}
    assert o["bands"] == band_figures(pg, NOW)
    assert sum(b["articles"] for b in o["bands"]) == 8  # every article but the removed one


def test_overview_of_an_empty_database(pg):
    o = pipeline_overview(pg, NOW, hours=3, step_minutes=30)
    assert len(o["backlog_history"]) == 7
    assert all(p["enrich"] == p["embed"] == p["index"] == 0 for p in o["backlog_history"])
    assert [b["articles"] for b in o["latency"]] == [0, 0, 0]
    assert o["dead_letters"] == [] and o["hosts"] == []
    assert all(b["articles"] == 0 and b["coverage"] is None for b in o["bands"])


# -- the page ----------------------------------------------------------------------------------------


def _plugins():
    if str(PLUGINS) not in sys.path:
        sys.path.insert(0, str(PLUGINS))


@pytest.fixture
def client(pg_server):
    """The pipeline routes on the test database, the clock at NOW and the model MODEL."""
    _plugins()
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from dgb_airflow.ui.pipeline import router

    dsn = pg_server.pg_dsn()
    app = FastAPI()
    app.include_router(router(lambda: db.connect(dsn), now=lambda: NOW, model=lambda: MODEL))
    return TestClient(app)


@pytest.fixture
def ui_client(pg_server):
    """The whole UI app (integrity page + pipeline view) as the plugin mounts it."""
    _plugins()
    from fastapi.testclient import TestClient

    from dgb_airflow.ui.app import create_app

    dsn = pg_server.pg_dsn()
    return TestClient(create_app(lambda: db.connect(dsn), require_auth=False))


def _svg(page: str, chart_id: str) -> str:
    assert f'<svg id="{chart_id}"' in page, chart_id
    return page.split(f'<svg id="{chart_id}"')[1].split("</svg>")[0]


def test_pipeline_page_renders_every_section(pg, client):
    _known_dataset(pg)
    resp = client.get("/pipeline?hours=6&step=60")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/html")
    page = resp.text
    assert "<h1>Pipeline</h1>" in page and "<script" not in page
    backlog = _svg(page, "chart-backlog")
    for stage, series in zip(("enrich", "embed", "index"), zip(*EXPECTED_BACKLOG, strict=True), strict=True):
        assert f'data-stage="{stage}" data-values="{",".join(map(str, series))}"' in backlog, stage
    latency = _svg(page, "chart-latency")
    assert 'data-bucket="5" data-p50="5310.0" data-p95="7821.0" data-articles="2"' in latency
    dead = _svg(page, "chart-dead-letters")
    assert 'data-reason="bad_payload" data-count="2"' in dead
    assert 'data-reason="model_error" data-count="1"' in dead
    hosts = _svg(page, "chart-hosts")
    assert 'data-host="www.gov.br" data-rate="1.200" data-budget="2.000"' in hosts
    assert 'data-host="127.0.0.1:9" data-rate="0.000" data-budget="1.000"' in hosts
    assert "No cadence yet: the scrape_dispatcher DAG has not run." in page
    bands = _svg(page, "chart-bands")
    for b in band_figures(pg, NOW):
        band = f'data-band="{b["band"]}" data-articles="{b["articles"]}" data-overdue="{b["overdue"]}"'
        assert band in bands, band


def test_the_ui_app_serves_the_pipeline_view_and_links_both_pages(pg, ui_client):
    _known_dataset(pg)
    assert '<a href="pipeline">Pipeline</a>' in ui_client.get("/").text
    page = ui_client.get("/pipeline")
    assert page.status_code == 200 and '<a href="./">Integrity</a>' in page.text
    data = ui_client.get("/api/pipeline").json()
    assert data["current"]["articles"] == 9 and data["hours"] == 6


def test_pipeline_routes_need_an_airflow_user_when_auth_is_on():
    _plugins()
    from fastapi.testclient import TestClient

    from dgb_airflow.ui.app import create_app

    client = TestClient(create_app(lambda: None, require_auth=True))
    assert client.get("/pipeline").status_code in (401, 403)
    assert client.get("/api/pipeline").status_code in (401, 403)


def test_pipeline_page_on_an_empty_database(pg, client):
    page = client.get("/pipeline").text
    for chart in ("chart-backlog", "chart-latency", "chart-dead-letters", "chart-hosts", "chart-bands"):
        _svg(page, chart)
    assert "no open dead letters" in page and "no host budgets yet" in page


def test_pipeline_json_and_bad_parameters(pg, client):
    _known_dataset(pg)
    data = client.get("/api/pipeline?hours=6&step=60").json()
    assert data["model"] == MODEL and data["generated_at"] == NOW.isoformat()
    assert [(p["enrich"], p["embed"], p["index"]) for p in data["backlog_history"]] == EXPECTED_BACKLOG
    assert data["dead_letters"][0]["reason"] == "bad_payload"
    assert client.get("/api/pipeline?hours=0").status_code == 422
    assert client.get("/pipeline?hours=100").status_code == 422


def test_pipeline_page_survives_a_database_outage():
    _plugins()
    from fastapi.testclient import TestClient

    from dgb_airflow.ui.app import create_app

    def broken():
        raise OSError("connection refused")

    client = TestClient(create_app(broken, require_auth=False))
    resp = client.get("/pipeline")
    assert resp.status_code == 503 and "Pipeline view unavailable" in resp.text
    assert client.get("/api/pipeline").status_code == 503


CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
SHOT_DIR = Path(__file__).resolve().parents[3] / ".state" / "screenshots"


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium (/usr/bin/chromium) is not installed here")
def test_pipeline_page_screenshot_in_headless_chromium(pg, client, tmp_path):
    """The page as a browser draws it; the PNG is kept at .state/screenshots/pipeline.png."""
    _known_dataset(pg)
    html_file = tmp_path / "pipeline.html"
    html_file.write_text(client.get("/pipeline?hours=6&step=60").text, encoding="utf-8")
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    shot = SHOT_DIR / "pipeline.png"
    shot.unlink(missing_ok=True)
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


def test_pipeline_page_shows_each_agencys_scrape_cadence(pg, client):
    from dgb.scraper.cadence import CadencePolicy
    from dgb.scraper.dags import ScrapeSpec
    from dgb.scraper.dispatch import decide

    with db.transaction(pg) as cur:
        cur.execute(
            "INSERT INTO news (unique_id, agency_key, title, url, published_at, created_at)"
            " VALUES ('c1', 'mec', 't', 'https://x/c1', %s, %s)",
            (NOW - timedelta(minutes=3), NOW - timedelta(minutes=3) + timedelta(seconds=50)),
        )
    specs = [ScrapeSpec("scrape_mec", ("mec",), None), ScrapeSpec("scrape_aeb", ("aeb",), None)]
    decide(pg, specs, now=NOW.timestamp(), policy=CadencePolicy(), rps=2.0)
    o = client.get("/api/pipeline?hours=1&step=5").json()
    assert [(a["agency"], a["reason"]) for a in o["cadence"]["agencies"]] == [
        ("mec", "recent"),
        ("aeb", "dormant"),
    ]
    page = client.get("/pipeline?hours=1&step=5").text
    table = page.split('<table id="table-cadence">')[1].split("</table>")[0]
    assert "<tr><td>mec</td><td>60 s</td><td>recent</td>" in table
    assert "<td>50 s</td><td>1</td>" in table  # the measured lag and its sample
    assert "<tr><td>aeb</td><td>60.0 min</td><td>dormant</td>" in table
    assert 'id="table-cadence-conditional"' not in page  # no conditional poll yet
    with db.transaction(pg) as cur:
        cur.execute("TRUNCATE listing_validators")
        cur.execute(
            "INSERT INTO listing_validators (agency_key, url, etag, hits, misses, full_polls)"
            " VALUES ('mec', 'https://x/noticias', '\"v1\"', 6, 1, 1), ('aeb', 'https://y/n', NULL, 0, 0, 2)"
        )
    page = client.get("/pipeline?hours=1&step=5").text
    line = page.split('id="table-cadence-conditional">')[1].split("</p>")[0]
    assert line.startswith("conditional listing polls: 60% answered 304 (hits 6, misses 1, unconditional 3;")


def test_pipeline_page_shows_each_agencys_polls_yield_and_integritys_share(pg, client):
    from dgb.observe.yields import split_text
    from dgb.scraper import polls
    from dgb.scraper.cadence import CadencePolicy
    from dgb.scraper.dags import ScrapeSpec
    from dgb.scraper.dispatch import Probe, decide

    assert "No listing polls and no new articles in this window." in client.get("/pipeline?hours=6").text
    with db.transaction(pg) as cur:
        for uid, ago in (("p1", timedelta(minutes=3)), ("p2", timedelta(hours=2))):
            cur.execute(
                "INSERT INTO news (unique_id, agency_key, title, url, published_at, created_at)"
                " VALUES (%s, 'mec', 't', %s, %s, %s)",
                (uid, f"https://x/{uid}", NOW - ago, NOW - ago + timedelta(seconds=50)),
            )
    specs = [ScrapeSpec("scrape_mec", ("mec",), None), ScrapeSpec("scrape_aeb", ("aeb",), None)]
    decide(pg, specs, now=NOW.timestamp(), policy=CadencePolicy(), rps=2.0)
    with db.transaction(pg) as cur:
        polls.add(cur, [Probe("mec", new=1)] + [Probe("mec")] * 39, NOW - timedelta(minutes=30))
        polls.add(cur, [Probe("aeb")] * 3 + [Probe("aeb", error="network_error")], NOW - 5 * H)
        polls.add(cur, [Probe("aeb")] * 50, NOW - 8 * H)  # before the 6 h window
    o = client.get("/api/pipeline?hours=6&step=60").json()
    assert o["polls"]["since"] == (NOW - 6 * H).isoformat()
    rows = [(a["agency"], a["polls"], a["articles"], a["yield"], a["reason"]) for a in o["polls"]["agencies"]]
    assert rows == [
        ("mec", 40, 2, 0.05, "recent"),
        ("aeb", 4, 0, 0.0, "dormant"),
    ]
    page = client.get("/pipeline?hours=6&step=60").text
    table = page.split('<table id="table-polls">')[1].split("</table>")[0]
    assert (
        '<tr><td>mec</td><td class="num">40</td><td class="num">1</td><td class="num">0</td>'
        '<td class="num">2</td><td class="num">0.050</td><td>60 s</td><td>recent</td>'
    ) in table
    assert (
        '<tr><td>aeb</td><td class="num">4</td><td class="num">0</td><td class="num">1</td>'
        '<td class="num">0</td><td class="num">0.000</td><td>60.0 min</td><td>dormant</td>'
    ) in table
    totals = page.split('id="table-polls-totals">')[1].split("</p>")[0]
    assert totals == (
        "since 2026-11-30 06:00 UTC: 44 polls (1 found news, 1 failed), 2 new articles,"
        " yield 0.045 articles/poll, 0.00 polls/s"
    )
    share = page.split('id="table-polls-share">')[1].split("</p>")[0]
    assert share == split_text(o["polls"]["share"]).replace("'", "&#x27;")
    assert share.startswith("integrity vs listings (www.gov.br&#x27;s 2 req/s): integrity ")
