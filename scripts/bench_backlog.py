"""Backlog benchmark: N articles queued at once, through the real local stack.

Stores N new articles in one burst with the production store (rows + dgb.news.scraped events in
the outbox, as a big scrape would), relays them to Pub/Sub, and times the running Airflow stack
until every one is indexed with theme and embedding. In the same run, once no stage DAG run is
queued or running, it times the model work alone for the same articles, before the pipeline and
again after it: the local classifier (its sentence encoding dominates) and the embedding of
title + summary, in-process, no Airflow, database or Typesense. Prints the pipeline's time, both
model-alone times and the ratio to their mean (target <= 1.5; the machine's speed drifts over
minutes, so one measurement before the pipeline was biased by whichever way it drifted), each
stage's first and last commit (seconds from the burst), and the CPU seconds each stack component
used during the pipeline part. The articles are marked removed at the end (hidden from search).

    .venv/bin/python scripts/bench_backlog.py [--n 2000] [--chart DIR]

``--chart DIR`` also writes the chart ``backlog-stages`` (each stage's cumulative committed
articles over the seconds since the burst, from their stage timestamps in PostgreSQL, and the
model work alone for reference) into DIR as SVG + JSON (:mod:`dgb_dev.benchcharts`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / sub) for sub in ("include", "dev")]

from dgb import db, outbox  # noqa: E402
from dgb.config import settings  # noqa: E402
from dgb.scraper.models import Article  # noqa: E402
from dgb.scraper.store import save_articles  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "include" / "dgb" / "data" / "corpus" / "articles.jsonl"


def wait_idle_machine(deadline: float, busy_pct: float = 30.0) -> bool:
    """Wait (until ``deadline``, monotonic) until the machine's CPU is at most ``busy_pct`` busy
    over 2 s (the idle stack keeps it ~20% busy): after the pipeline, PostgreSQL's autovacuum of
    the 2,000 new rows and the stage runs' last sweeps would otherwise slow the model alone."""
    import psutil

    while True:
        pct = psutil.cpu_percent(interval=2.0)
        if pct <= busy_pct:
            return True
        if time.monotonic() > deadline:
            print(f"machine still {pct:.0f}% busy", file=sys.stderr)
            return False


def wait_quiet(s, timeout: float = 180.0) -> bool:
    """Wait (bounded) until no stage DAG run is queued or running in Airflow and the machine is
    nearly idle; whether it is."""
    try:
        af = db.connect(s.pg_dsn(s.pg_airflow_db))
    except Exception as exc:
        print(f"airflow metadata database: {exc}; not waiting for a quiet stack", file=sys.stderr)
        return False
    deadline = time.monotonic() + timeout
    try:
        while True:
            with af.cursor() as cur:
                cur.execute(
                    "SELECT count(*) FROM dag_run WHERE state IN ('queued', 'running') AND dag_id = ANY(%s)",
                    (["enrich_news", "embed_news", "index_news"],),
                )
                busy = cur.fetchone()[0]
            af.commit()
            if not busy:
                return wait_idle_machine(deadline)
            if time.monotonic() > deadline:
                print(f"{busy} stage run(s) still queued or running", file=sys.stderr)
                return False
            time.sleep(2.0)
    finally:
        af.close()


def stage_chart_data(n: int, rows: list[tuple], model_s: float, pipeline_s: float) -> dict:
    """The chart's data from each article's (scraped_at, enriched_at, embedded_at, indexed_at):
    seconds after the burst (its first article stored) of every commit of each stage."""
    stored = [r[0] for r in rows if r[0] is not None]
    burst = min(stored) if stored else None
    stages = {}
    for k, stage in enumerate(("stored", "enriched", "embedded", "indexed")):
        times = [(r[k] - burst).total_seconds() for r in rows if r[k] is not None] if burst else []
        stages[stage] = sorted(round(t, 2) for t in times)
    return {
        "n": n,
        "burst_at": burst.isoformat() if burst else None,
        "stages": stages,
        "model_alone_s": round(model_s, 1),
        "pipeline_wall_s": round(pipeline_s, 1),
    }


def write_chart(directory: Path, n: int, rows: list[tuple], model_s: float, pipeline_s: float) -> None:
    """``--chart DIR``: each stage's cumulative commits over the seconds since the burst."""
    from dgb_dev import benchcharts, charts

    data = stage_chart_data(n, rows, model_s, pipeline_s)
    command = charts.command_line(__file__, sys.argv[1:])
    for path in benchcharts.save(directory, "backlog-stages", "backlog", data, command):
        print(f"chart: {path}")


def model_service_requests(s, since: datetime, until: datetime):
    """The model service's requests between ``since`` and ``until`` (naive local times) from the
    log the local stack writes for it (:mod:`dgb_dev.modellog`), or None without that log."""
    from dgb_dev.modellog import requests
    from dgb_dev.stack.components import component

    path = component(s, "model").proc.log_file
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            return requests(fh, since, until)
    except OSError as exc:
        print(f"model service log {path}: {exc}", file=sys.stderr)
        return None


def model_alone(s, articles: list[Article]) -> tuple[float, float]:
    """Seconds of the model work alone for ``articles``, in this process: (the local classifier's,
    the classifier's and the embedding of title + summary together)."""
    from dgb.embed.model import load_model, prepare_text
    from dgb.enrich.base import ArticleText, get_classifier

    model = load_model(s.embedding_model, s.embedding_dim)
    classifier = get_classifier(s, embedder=model, backend="local")
    classifier.classify_batch([ArticleText(None, "aquecimento", content="aquecimento do modelo")])
    items = [ArticleText(None, a.title, a.subtitle, a.editorial_lead, a.content) for a in articles]
    t1 = time.monotonic()
    results = []
    for start in range(0, len(items), 64):
        results += classifier.classify_batch(items[start : start + 64])
    classify_s = time.monotonic() - t1
    texts = [prepare_text(a.title, getattr(r, "summary", None), a.content) for a, r in zip(articles, results)]
    model.encode(texts, batch_size=32)
    return classify_s, time.monotonic() - t1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument(
        "--chart", type=Path, default=None, metavar="DIR", help="also write the chart backlog-stages into DIR"
    )
    args = ap.parse_args()
    s = settings()
    os.environ.setdefault("PUBSUB_EMULATOR_HOST", s.pubsub_emulator_host)
    from dgb import pubsub_clients

    templates = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    run = uuid.uuid4().hex[:6]
    now = datetime.now(UTC)
    articles = []
    for i in range(args.n):
        t = templates[i % len(templates)]
        articles.append(
            Article(
                url=f"https://www.gov.br/{t['agency']}/bench/{run}/{i}",
                agency=t["agency"],
                title=f"{t['title']} (lote {run}-{i})",
                subtitle=t.get("subtitle"),
                category=t.get("category"),
                tags=list(t.get("tags") or []),
                published_at=now - timedelta(minutes=i),
                content=t["content"],
            )
        )
    # the model work alone, same articles, same run, on a quiet stack (queued stage runs left by
    # earlier work would otherwise share the cores with it): before the pipeline and again after
    quiet = wait_quiet(s)
    before = model_alone(s, articles)

    from dgb_dev.procstats import Sampler

    conn = db.connect(s.pg_dsn())
    sampler = Sampler(s, extra=("model", "typesense", "pubsub", "postgres"))
    by_agency: dict[str, list[Article]] = {}
    for a in articles:
        by_agency.setdefault(a.agency, []).append(a)
    t0, t0_wall = time.monotonic(), datetime.now()  # naive local time: the model service log's
    ids: list[str] = []
    for agency, batch in by_agency.items():
        ids += save_articles(conn, agency, None, batch).new
    outbox.relay(conn, pubsub_clients.publisher_client(), s.gcp_project, batch_size=1000, max_batches=10)
    remaining = set(ids)
    sampled = 0.0
    while time.monotonic() - t0 < args.timeout:
        with conn.cursor() as cur:  # only the ids not seen done yet: the query shrinks as they finish
            cur.execute(
                "SELECT unique_id FROM news WHERE unique_id = ANY(%s) AND indexed_version = version"
                " AND embedded_at IS NOT NULL AND most_specific_theme_id IS NOT NULL",
                (list(remaining),),
            )
            remaining.difference_update(r[0] for r in cur.fetchall())
        conn.commit()
        if not remaining:
            break
        if time.monotonic() - sampled >= 2.0:  # the process trees take a while to walk
            sampler.sample()
            sampled = time.monotonic()
        # every 2 s while many are left (the check costs PostgreSQL ~25 ms per 2,000 ids), every
        # 0.25 s near the end, so the end is seen within about that
        time.sleep(2.0 if len(remaining) > 200 else 0.25)
    pipeline_s = time.monotonic() - t0
    served = model_service_requests(s, t0_wall, datetime.now())
    cpu = sampler.result()
    with conn.cursor() as cur:  # where the wall time went: each stage's first and last commit
        cur.execute(
            "SELECT min(scraped_at), max(scraped_at), min(enriched_at), max(enriched_at),"
            " min(embedded_at), max(embedded_at), min(indexed_at), max(indexed_at)"
            " FROM news WHERE unique_id = ANY(%s)",
            (ids,),
        )
        marks = cur.fetchone()
        # each article's commit in each stage, for the chart (read before the articles are removed)
        cur.execute(
            "SELECT scraped_at, enriched_at, embedded_at, indexed_at FROM news WHERE unique_id = ANY(%s)",
            (ids,),
        )
        stage_times = cur.fetchall()
    conn.commit()
    # the model alone again, once the stage runs have ended (they linger a minute after their last
    # work): the machine's speed drifts over minutes here, and the mean of the two brackets the
    # pipeline's run
    quiet = wait_quiet(s) and quiet
    after = model_alone(s, articles)
    model_s = (before[1] + after[1]) / 2

    with db.transaction(conn) as cur:  # hide the synthetic articles from search from now on
        cur.execute(
            "UPDATE news SET removed_at = now(), problem = 'benchmark', indexed_version = NULL"
            " WHERE unique_id = ANY(%s)",
            (ids,),
        )
    conn.close()
    done = len(ids) - len(remaining)
    print(f"articles={len(ids)} indexed_with_theme_and_embedding={done}")
    if marks and marks[0] is not None:
        base = marks[0]
        spans = []
        for name, first, last in zip(("stored", "enriched", "embedded", "indexed"), marks[::2], marks[1::2]):
            if first is not None:
                spans.append(
                    f"{name}={(first - base).total_seconds():.1f}..{(last - base).total_seconds():.1f}s"
                )
        print("stage_commits " + " ".join(spans))
    print(
        "cpu_s "
        + " ".join(f"{n}={c['cpu_s_tree']:.0f}" for n, c in cpu.items() if "cpu_s_tree" in c)
        + f" machine_busy_pct={cpu['machine']['cpu_pct']:.0f}"
    )
    if served is not None:  # how well the stages kept the model fed
        print(served.line())
        top = sorted(served.gaps, key=lambda g: -g[1])[:5]
        print("model_service_longest_idle " + " ".join(f"{at:%H:%M:%S}={gap:.2f}s" for at, gap in top))
    print(f"model_alone_on_quiet_stack={'yes' if quiet else 'no'}")
    for when, (classify_s, all_s) in (("before", before), ("after", after)):
        print(
            f"model_alone_{when}_s={all_s:.1f} model_alone_{when}_classify_s={classify_s:.1f}"
            f" model_alone_{when}_embed_s={all_s - classify_s:.1f}"
        )
    if args.chart:  # before the last line, which stays last
        write_chart(args.chart, len(ids), stage_times, model_s, pipeline_s)
    # drift: how much faster or slower the machine ran the same model work after the pipeline than
    # before it (1.00: the same); a run whose drift is far from 1 says little
    print(
        f"pipeline_wall_s={pipeline_s:.1f} model_alone_s={model_s:.1f} ratio={pipeline_s / model_s:.2f}"
        f" drift={after[1] / before[1]:.2f}"
    )
    return 0 if done == len(ids) else 1


if __name__ == "__main__":
    sys.exit(main())
