"""Proof: kill -9 the triggerer between pull and persist; the message still arrives, once.

On the running local stack (`make up`): publishes one valid `dgb.news.scraped` event for an
article that is already enriched (so the stage run it causes is a harmless skip), tagged with a
unique `dgb_proof` attribute; SIGKILLs the triggerer's process group `--delay` seconds later
(after the ack-mode producer pulled it, before Airflow stored its asset event); checks that no
asset event exists yet; restarts the triggerer; waits until the message, redelivered by Pub/Sub
once its ack deadline lapses, is stored as an asset event; then watches a while longer for
duplicates. Prints one line per attempt and a verdict. Loopback only.

    .venv/bin/python scripts/prove_trigger_ack.py [--delay 0.3] [--attempts 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / d) for d in ("include", "dev")]

from dgb import db, events, topology  # noqa: E402
from dgb.config import settings  # noqa: E402
from dgb_dev.stack.airflow import AirflowPart  # noqa: E402


def stored(airflow_conn, marker: str) -> int:
    with airflow_conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM asset_event WHERE extra::text LIKE %s", (f"%{marker}%",))
        n = cur.fetchone()[0]
    airflow_conn.commit()
    return n


def one_attempt(s, publisher, news_conn, airflow_conn, delay: float, wait: float) -> tuple[str, int, float]:
    with news_conn.cursor() as cur:
        cur.execute(
            "SELECT unique_id, agency_key, published_at FROM news WHERE enriched_at IS NOT NULL LIMIT 1"
        )
        row = cur.fetchone()
    news_conn.commit()
    if row is None:
        raise SystemExit("no enriched article in the database: run `make up` and let it scrape first")
    uid, agency, published = row
    marker = uuid.uuid4().hex
    event = events.make_event(
        topology.TOPIC_SCRAPED,
        {"unique_id": uid, "agency_key": agency, "published_at": published, "scraped_at": datetime.now(UTC)},
    )
    triggerer = AirflowPart(s, "triggerer")
    pid = triggerer.proc.pid()
    if pid is None:
        raise SystemExit("the triggerer is not running (make up)")
    topic = f"projects/{s.gcp_project}/topics/{topology.TOPIC_SCRAPED}"
    publisher.publish(topic, event.data(), **event.attributes, dgb_proof=marker).result(timeout=10)
    time.sleep(delay)
    os.killpg(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    time.sleep(1.0)
    before = stored(airflow_conn, marker)
    if before:
        triggerer.up()
        return "persisted-before-kill", before, 0.0
    triggerer.up()
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and stored(airflow_conn, marker) == 0:
        time.sleep(1.0)
    arrived = time.monotonic() - killed_at
    time.sleep(20)  # would a duplicate follow?
    return "killed-before-persist", stored(airflow_conn, marker), arrived


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay", type=float, default=0.3, help="seconds between publish and kill -9")
    ap.add_argument("--attempts", type=int, default=3)
    ap.add_argument("--wait", type=float, default=240.0, help="max seconds for the redelivery")
    args = ap.parse_args()
    s = settings()
    os.environ.setdefault("PUBSUB_EMULATOR_HOST", s.pubsub_emulator_host)
    from dgb import pubsub_clients

    publisher = pubsub_clients.publisher_client()
    news_conn = db.connect(s.pg_dsn())
    airflow_conn = db.connect(s.pg_dsn(s.pg_airflow_db))
    verdicts = []
    for i in range(args.attempts):
        case, count, seconds = one_attempt(s, publisher, news_conn, airflow_conn, args.delay, args.wait)
        print(
            json.dumps(
                {
                    "attempt": i + 1,
                    "case": case,
                    "asset_events": count,
                    "redelivered_after_s": round(seconds, 1),
                }
            )
        )
        if case == "killed-before-persist":
            verdicts.append(count == 1)
    if not verdicts:
        print("verdict: inconclusive (every kill came after the event was stored; try a smaller --delay)")
        return 2
    ok = all(verdicts)
    print(
        f"verdict: {'PASS' if ok else 'FAIL'}: {sum(verdicts)}/{len(verdicts)} messages killed between pull "
        "and persist arrived exactly once"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
