"""The chaos soak's recovery measure against a real PostgreSQL: the work that existed at a fault's
end (articles scraped by then and not searchable at their version, outbox events not sent)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))

import bench_soak  # noqa: E402
from faultsuite.chaos import Injected  # noqa: E402
from faultsuite.plumbing import Db  # noqa: E402

pytestmark = pytest.mark.stack


def _article(cur, uid, scraped_at, *, version=1, indexed_version=None):
    cur.execute(
        "INSERT INTO news (unique_id, agency_key, title, url, published_at, scraped_at, version,"
        " indexed_version) VALUES (%s, 'mec', 't', %s, %s, %s, %s, %s)",
        (uid, f"https://www.gov.br/mec/{uid}", scraped_at, scraped_at, version, indexed_version),
    )


def test_backlog_counts_only_the_work_of_the_faults_end(pg, pg_server):
    t = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    with pg.cursor() as cur:
        cur.execute(
            "INSERT INTO agencies (key, name, url) VALUES ('mec', 'MEC', 'https://www.gov.br/mec')"
            " ON CONFLICT DO NOTHING"
        )
        _article(cur, "done_1", t - timedelta(minutes=5), version=2, indexed_version=2)
        _article(cur, "behind_1", t - timedelta(minutes=4), version=2, indexed_version=1)
        _article(cur, "new_1", t - timedelta(minutes=3))
        _article(cur, "later_1", t + timedelta(minutes=1))  # scraped after the fault's end
        cur.execute(
            "INSERT INTO outbox (topic, aggregate_id, payload, created_at) VALUES"
            " ('dgb.news.scraped', 'x', '{}', %s), ('dgb.news.scraped', 'y', '{}', %s)",
            (t - timedelta(seconds=1), t + timedelta(seconds=1)),
        )
    pg.commit()
    db = Db(pg_server.pg_dsn())
    try:
        assert bench_soak.backlog(db, t) == 3  # behind_1, new_1, one outbox event
        with pg.cursor() as cur:
            cur.execute("UPDATE news SET indexed_version = version")
            cur.execute("UPDATE outbox SET published_at = now() WHERE aggregate_id = 'x'")
        pg.commit()
        assert bench_soak.backlog(db, t) == 0
        rec = Injected("kill_model", "kill", t.isoformat(), ended=t.isoformat(), ended_mono=0.0)
        open_faults = [rec]
        bench_soak.measure_recoveries(db, open_faults)
        assert open_faults == [] and rec.recovery_s is not None
    finally:
        db.close()
