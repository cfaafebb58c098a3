"""Real-time run of the whole stack at production scale (issue 14): every scrape DAG and the
integrity checks, for an hour of wall-clock time, against the local site serving 300k articles.

What it does:

1. Stops this checkout's Airflow, watchdog and site (dev settings) and brings the stack up on
   scratch names (database ``dgb_realtime``, project ``dgb-realtime``, collection
   ``realtime_news``; ``DGB_SCRAPE_AGENCIES=all``) with the local site serving ``--articles``
   synthetic articles (:mod:`dgb_dev.mirror.synthetic`) whose five years end at the start of the
   run, publishing on at the final rate (~500 a day) and editing at the documented times. With
   ``--profile office`` the site publishes from the start as a busy office day instead: at least
   ``--new-per-hour`` (200) new articles in any 60 minutes, by the publication model's agency
   shares and bursts (:meth:`dgb_dev.mirror.publication.PublicationModel.office_hours`, about 1.5
   times that on average), edits following them as the corpus's edit model makes them.
2. Preloads every article published before the start as the scraper would have stored it (each
   page rendered by the site and parsed by our parser, so a check finds it unchanged until its
   next edit), enriched, embedded, marked indexed (the last 3 days really in Typesense) and last
   checked a plausible while ago for its age.
3. Starts Airflow (LocalExecutor), waits until the index holds what PostgreSQL does (the index
   stage restores the preload's older documents first), then runs ``--minutes``, sampling the
   site's request log and the CPU time and memory of every Airflow process.
4. Prints the request rate the site received (max over any 10 s, mean, by kind), the scrape DAG
   runs, each agency's scrape lag (new articles: scraped_at - published_at), publication ->
   searchable, edit detection delays by age band, CPU and memory; then one line each for
   publication -> scraped and -> searchable (p50, p95, max and the count they are over: no p95
   under 20 articles), listing requests and integrity checks per hour, the most requests in any
   10 s and the scheduler's CPU (:func:`realtime_results.run_lines`); the last line is a summary
   (full figures: ``.state/bench/realtime-<time>.json``; with ``--chart DIR`` also the chart
   ``realtime-timeline``, from :func:`realtime_results.timeline`). Then Airflow and the site are
   stopped (``make up`` brings the dev stack back), the scratch database dropped (``--keep``
   leaves it).

    .venv/bin/python scripts/bench_realtime.py [--articles 300000] [--minutes 60] [--chart DIR]
        [--profile uniform|office] [--new-per-hour 200] [--cadence learnt|fixed]

The articles counted are those published from the run's start until ``GRACE_MIN`` (10) minutes
before its end; with ``--profile office`` the run goes on those 10 minutes after ``--minutes``, so
the counted ones are all those of its ``--minutes``. ``--cadence`` sets ``DGB_SCRAPE_CADENCE`` for
the run (default: as set, else learnt): ``fixed`` is every agency every 10 minutes, for the
side-by-side comparison of the same profile.

Never beside a test suite or another benchmark (2 cores). Loopback only, like everything here.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[1]
for sub in ("include", "plugins", "dev"):
    sys.path.insert(0, str(ROOT / sub))

from realtime_results import (  # noqa: E402  (scripts/: what the run measured, read after it)
    dag_cadence,
    delays,
    edit_delays,
    kinds_between,
    mirror_requests,
    pct,
    per_hour,
    request_figures,
    run_checks,
    run_lines,
    scrape_lags,
    timeline,
    write_chart,
)

from dgb_dev.procstats import Sampler  # noqa: E402

SCRATCH = {
    "DGB_PG_DB": "dgb_realtime",
    "DGB_GCP_PROJECT": "dgb-realtime",
    "DGB_TYPESENSE_COLLECTION": "realtime_news",
    "DGB_SCRAPE_AGENCIES": "all",
    "DGB_SOURCE_MODE": "mirror",
}
GRACE_MIN = 10  # learnt cadence: new articles published until this long before the end are counted
WARMUP_MAX_S = 1800  # longest wait for the index to catch up before the measured run
INDEXED_DAYS = 3.0  # the reconcile sweep compares the last 48 h with Typesense: index a margin more


def log(msg: str) -> None:
    print(f"[realtime {datetime.now(UTC):%H:%M:%S}] {msg}", flush=True)


# --------------------------------------------------------------------------- preload


def _corpus(n: int, end: datetime, extra_days: float, office: int = 0):
    from dgb_dev.mirror.synthetic import SyntheticCorpus

    return SyntheticCorpus(n, end=end, extra_days=extra_days, office=office)


_WORKER: dict = {}


def _init_worker(n: int, end_iso: str, extra_days: float, office: int, base: str) -> None:
    from dgb import agencies as catalogue
    from dgb.config import Settings
    from dgb_dev.mirror.site import Site

    corpus = _corpus(n, datetime.fromisoformat(end_iso), extra_days, office)
    kinds = {k: a.site_kind for k, a in catalogue.agencies_for_settings(Settings.from_env()).items()}
    _WORKER.update(corpus=corpus, site=Site(synthetic=corpus), base=base, kinds=kinds)


def _stored_rows(indices: list[int]) -> list[tuple]:
    """The rows the scraper would store for these synthetic articles, as the site shows them at
    the start: the page (or, for a Plone 6 agency, its REST answer) rendered by the site and
    parsed by the scraper's own parser, exactly what an integrity check will compare with."""
    import httpx

    from dgb.fetch import Response
    from dgb.integrity.checks import parse_page, plone6_api_url

    corpus, site, base, kinds = _WORKER["corpus"], _WORKER["site"], _WORKER["base"], _WORKER["kinds"]
    at = corpus.end
    out = []
    for i in indices:
        a = corpus.article(i, at)
        url = site.article_url(base, a)
        kind = kinds.get(a.agency, "html")
        fetch = (plone6_api_url(url, a.agency) if kind == "plone6_api" else None) or url
        if kind == "plone6_api" and fetch == url:
            kind = "html"
        path, _, query = fetch[len(base) :].partition("?")
        # as the site's server routes it: the path decoded (MRE's listing path holds a %20)
        page = site.render(site.route(unquote(path)), base, query)
        resp = Response(
            fetch, page.status, httpx.Headers({"content-type": page.content_type}), page.body, 0.0
        )
        art = parse_page(kind, resp, url, a.agency, a.published_at)
        out.append((i, a.agency, art))
    return out


def preload(s, corpus, n: int, end: datetime, base: str, workers: int) -> dict[str, int]:
    """Every article published before ``end`` into ``news`` (COPY), done in every stage."""
    from dgb import db
    from dgb.search import schema
    from dgb.search.sync import sync

    cut = int((corpus.published < end.timestamp()).sum())
    indices = list(range(cut))
    chunks = [indices[k : k + 2000] for k in range(0, cut, 2000)]
    t0 = time.monotonic()
    conn = db.connect(s.pg_dsn())
    with db.transaction(conn) as cur:
        cur.execute("SELECT key, id, name FROM agencies")
        agency = {k: (i, name) for k, i, name in cur.fetchall()}
        cur.execute("SELECT id FROM themes ORDER BY id LIMIT 1")
        theme = cur.fetchone()[0]
    uid_of: dict[int, str] = {}
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(
        workers,
        initializer=_init_worker,
        initargs=(n, end.isoformat(), corpus.extra_days, corpus.office, base),
    ) as pool:
        done = 0
        for rows in pool.imap_unordered(_stored_rows, chunks):
            with (
                conn.cursor() as cur,
                cur.copy(
                    "COPY news (unique_id, agency_id, agency_key, agency_name, title, subtitle, content,"
                    " image_url, editorial_lead, category, tags, updated_datetime, content_hash, url,"
                    " published_at, extracted_at, scraped_at, trace_id, enriched_at, classifier,"
                    " theme_l1_id, most_specific_theme_id, summary, embedded_at, embedding_model,"
                    " version, updated_at) FROM STDIN"
                ) as copy,
            ):
                for i, key, art in rows:
                    if corpus.agencies[int(corpus.agency[i])] != key:  # the site's corpus, not another
                        raise RuntimeError(f"preload: article {i} belongs to another agency than {key}")
                    published = art.published_at
                    scraped = published + timedelta(minutes=2)
                    ag_id, ag_name = agency.get(key, (None, key))
                    copy.write_row(
                        (
                            art.unique_id,
                            ag_id,
                            key,
                            ag_name,
                            art.title,
                            art.subtitle,
                            art.content,
                            art.image_url,
                            art.editorial_lead,
                            art.category,
                            list(art.tags or []),
                            art.updated_at,
                            art.content_hash,
                            art.url,
                            published,
                            scraped,
                            scraped,
                            str(uuid.uuid4()),
                            scraped + timedelta(minutes=1),
                            "local",
                            theme,
                            theme,
                            "Resumo pré-carregado.",
                            scraped + timedelta(minutes=2),
                            s.embedding_model,
                            1,
                            scraped + timedelta(minutes=2),
                        )
                    )
                    uid_of[i] = art.unique_id
            conn.commit()
            done += len(rows)
            if done % 50000 < len(rows):
                log(f"preload: {done}/{cut} articles stored ({time.monotonic() - t0:.0f}s)")
    log(f"preload: {cut} articles stored in {time.monotonic() - t0:.0f}s")
    # the last days really in Typesense (without vectors), the rest marked as indexed
    recent = [uid_of[i] for i in range(cut) if corpus.published[i] >= end.timestamp() - INDEXED_DAYS * 86400]
    ts = schema.client(s)
    result = sync(ts, s.typesense_collection, conn, recent, None)
    with db.transaction(conn) as cur:
        cur.execute(
            "UPDATE news SET indexed_version = version, indexed_at = updated_at + interval '1 minute'"
            " WHERE indexed_version IS NULL"
        )
        # last checked a plausible while ago for its age (a steady state, not a fresh adoption):
        # uniformly within the last tenth of its age, at most 20 days ago
        cur.execute(
            "UPDATE integrity_state s SET tier = NULL, checks = 1, content_status = 'unchanged',"
            " image_status = CASE WHEN n.image_url IS NULL THEN 'no_image' ELSE 'ok' END,"
            " last_checked_at = %(end)s"
            " - random() * least(%(end)s - n.published_at, interval '200 days') / 10,"
            " next_due_at = '-infinity'"
            " FROM news n WHERE n.id = s.news_id",
            {"end": end},
        )
        cur.execute("UPDATE integrity_state SET image_checked_at = last_checked_at WHERE image_status = 'ok'")
    conn.close()
    log(
        f"preload: {len(recent)} recent articles indexed in Typesense ({len(result.failed)} failed);"
        f" {time.monotonic() - t0:.0f}s in all"
    )
    return {"articles": cut, "indexed_in_typesense": len(recent)}


@dataclass
class Realtime:
    """The whole stack up on the scratch names, the site serving the synthetic corpus, the
    database preloaded, every DAG unpaused (what :func:`bring_up` returns)."""

    s: Any  # dgb.config.Settings
    corpus: Any  # dgb_dev.mirror.synthetic.SyntheticCorpus
    base: str  # the local site's base URL
    info: dict  # the preload's figures
    pg: Any  # dgb_dev.stack.Postgres
    dags: list[str]
    scrape_dags: list[str]
    start: datetime  # the corpus's five years end here: what is published after is new


def scratch_stack(settings):
    """This checkout's Airflow, watchdog and site (dev settings) stopped; PostgreSQL, the emulator
    and Typesense up; the run's scratch database and index (``settings``' names) made empty and
    bootstrapped. Returns (settings with secrets, the PostgreSQL component). Shared with
    scripts/bench_chaos.py."""
    from dgb_dev import stack
    from dgb_dev.stack.typesense import drop_index
    from dgb_dev.stack.watchdog import stop_watchdog

    s = stack.ensure_secrets(settings)
    log("stopping this checkout's Airflow, watchdog and local site (dev settings)")
    stop_watchdog(s)
    for name in [f"airflow-{p}" for p in reversed(stack.AIRFLOW_PARTS)] + ["mirror"]:
        stack.component(s, name).down()
    s = stack.ensure(["postgres", "pubsub", "typesense"], s)
    pg = stack.Postgres(s)
    pg._psql_admin(f'DROP DATABASE IF EXISTS "{s.pg_db}" WITH (FORCE)')
    stack.ensure_database(pg, s.pg_db)
    drop_index(s)  # the run's index holds exactly what its preload and pipeline put there
    stack.bootstrap(s)
    return s, pg


def bring_up(articles: int, workers: int, office: int = 0) -> Realtime:
    """Steps 1-3 of the module doc up to the start of the measured run (shared with
    scripts/bench_soak.py): this checkout's Airflow, watchdog and site stopped, the stack up on the
    scratch names, the corpus preloaded, Airflow started with its watchdog and every DAG unpaused.
    ``office``: the site's office profile (at least that many new articles in any 60 minutes)."""
    os.environ.update(SCRATCH)
    start = datetime.now(UTC).replace(microsecond=0)
    os.environ["DGB_MIRROR_SYNTHETIC"] = str(articles)
    os.environ["DGB_MIRROR_SYNTHETIC_END"] = start.isoformat()
    os.environ["DGB_MIRROR_SYNTHETIC_EXTRA_DAYS"] = "2"
    os.environ["DGB_MIRROR_SYNTHETIC_OFFICE"] = str(office)  # the site's corpus is the one measured

    from dgb.config import Settings
    from dgb_dev import stack
    from dgb_dev.stack.airflow_start import unpause_pipeline, up_airflow
    from dgb_dev.stack.typesense import wait_index_caught_up
    from dgb_dev.stack.watchdog import start_watchdog

    s, pg = scratch_stack(Settings.from_env())
    corpus = _corpus(articles, start, 2.0, office)
    log(f"synthetic corpus: {corpus.summary()}")
    base = s.mirror_url.rstrip("/")
    info = preload(s, corpus, articles, start, base, workers)
    s = stack.ensure(["mirror", "model"], s)
    t_air = time.monotonic()
    up_airflow(s)
    dags = unpause_pipeline(s)
    log(f"watchdog: {start_watchdog(s)}")
    scrape_dags = [d for d in dags if d.startswith("scrape_")]
    log(f"Airflow up in {time.monotonic() - t_air:.0f}s: {len(dags)} DAGs, {len(scrape_dags)} scrape DAGs")
    # the measured run starts once the index holds what PostgreSQL does (the preload marks its old
    # articles indexed; the index stage restores them into the empty scratch index first: ~15 min)
    log(f"warm-up: index caught up in {wait_index_caught_up(s, WARMUP_MAX_S, log):.0f}s")
    return Realtime(s, corpus, base, info, pg, dags, scrape_dags, start)


def parse_args(argv=None) -> argparse.Namespace:
    """The command line; ``office`` (the site's office profile: the fewest new articles in any 60
    minutes, 0 for uniform) added; ``--cadence`` set in the environment, where every process of
    the run (and :func:`dgb.config.scrape.scrape_cadence_mode`) reads it."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--articles", type=int, default=300_000)
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--keep", action="store_true", help="keep the scratch database at the end")
    ap.add_argument("--workers", type=int, default=2, help="processes parsing the preload (default 2)")
    ap.add_argument(
        "--chart",
        type=Path,
        default=None,
        metavar="DIR",
        help="also write the chart realtime-timeline into DIR",
    )
    ap.add_argument(
        "--profile",
        choices=("uniform", "office"),
        default="uniform",
        help="how the site publishes during the run: uniform (the corpus's final rate, ~500 a day; the"
        " default) or office (at least --new-per-hour new articles in any 60 minutes)",
    )
    ap.add_argument(
        "--new-per-hour",
        type=int,
        default=200,
        metavar="N",
        help="--profile office: the fewest new articles in any 60 minutes (default 200)",
    )
    ap.add_argument(
        "--cadence",
        choices=("learnt", "fixed"),
        default=None,
        help="DGB_SCRAPE_CADENCE for the run (default: as set, else learnt); fixed: every 10 minutes",
    )
    args = ap.parse_args(argv)
    if args.profile == "office" and args.new_per_hour < 1:
        ap.error("--new-per-hour must be at least 1")
    if args.cadence:
        os.environ["DGB_SCRAPE_CADENCE"] = args.cadence
    args.office = args.new_per_hour if args.profile == "office" else 0
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    office = args.office

    from dgb.config import scrape as config_scrape
    from dgb.scraper.dags import CYCLE_MINUTES, selected_agencies
    from dgb_dev import stack
    from dgb_dev.stack.watchdog import stop_watchdog

    # fixed: an article published a 10-min cycle before the end was polled for; learnt: GRACE_MIN
    mode = config_scrape.scrape_cadence_mode()
    grace = CYCLE_MINUTES if mode == "fixed" else GRACE_MIN
    drain = grace if office else 0  # office: every article of the --minutes counted, each given `grace`
    run = bring_up(args.articles, args.workers, office)
    s, corpus, base, info, pg = run.s, run.corpus, run.base, run.info, run.pg
    dags, scrape_dags = run.dags, run.scrape_dags
    # the run is measured from here: every component up, the catalogue's DAGs unpaused
    run_start = datetime.now(UTC)
    epoch0 = time.time()
    sampler = Sampler(s)
    kinds_before = mirror_requests(base, epoch0)["total"]
    deadline = time.monotonic() + (args.minutes + drain) * 60
    next_log = 0.0
    try:
        while time.monotonic() < deadline:
            sampler.sample()
            if time.monotonic() >= next_log:
                r = request_figures(mirror_requests(base, epoch0), epoch0, time.time())
                left = (deadline - time.monotonic()) / 60
                log(f"{left:.0f} min left: {r['requests']} requests, max {r['max_rps_10s']}/s over 10 s")
                next_log = time.monotonic() + 300
            time.sleep(10)
        run_stop = datetime.now(UTC)
        site_log = mirror_requests(base, epoch0)
        reqs = request_figures(site_log, epoch0, time.time())
        kinds = kinds_between(kinds_before, site_log["total"])
        cpu = sampler.result()
        keys = {a.key for a in selected_agencies(s)}
        per, lags, missed, inactive, searchable = scrape_lags(s, corpus, run_start, run_stop, grace, keys)
        cadence = dag_cadence(s, run_start)
        edits = edit_delays(s, corpus, run_start, run_stop)
        checks = run_checks(s, corpus, run_start)
    finally:
        log("stopping Airflow, watchdog and the site of the run (`make up` brings the dev stack back)")
        stop_watchdog(s)
        for name in [f"airflow-{p}" for p in reversed(stack.AIRFLOW_PARTS)] + ["mirror"]:
            stack.component(s, name).down()

    seconds = (run_stop - run_start).total_seconds()
    profile = f"office, at least {office} new articles in any 60 min" if office else "uniform"
    print()
    print(
        f"run: {args.minutes:.0f} min"
        + (f" + {drain} min drain" if drain else "")
        + f" from {run_start:%H:%M:%S}Z ({profile}), {info['articles']} articles preloaded,"
        f" {len(scrape_dags)} scrape DAGs, {len(dags)} DAGs"
    )
    print(
        f"requests to the site: {reqs['requests']} (mean {reqs['mean_rps']:.2f}/s,"
        f" max {reqs['max_rps_10s']:.2f}/s"
        f" over any 10 s, max {reqs['max_rps_1s']} in one second); by kind during the run: "
        + ", ".join(f"{k}={v}" for k, v in kinds.items())
    )
    print(
        f"new articles during the run ({mode} cadence; published until {grace} min before its end):"
        f" {len(lags)}, missed {missed} (and {inactive} of inactive agencies, never scraped)"
    )
    checked = sum(checks["outcomes"].values())
    issue = run_lines([v * 60 for v in lags], searchable, kinds, checked, seconds, reqs["max_rps_10s"], cpu)
    for line in issue:
        print(line)
    runs = {k: v["runs"] for k, v in cadence.items()}
    print(
        f"scrape DAG runs: {sum(runs.values()) - runs.get('scrape_dispatcher', 0)}, dispatcher runs:"
        f" {runs.get('scrape_dispatcher', 0)} in {seconds / 60:.0f} min; scrape lag per agency"
        " (new articles: max lag min; scrape runs, longest gap between runs min):"
    )
    keys = sorted({*per, *(d.removeprefix("scrape_") for d in [*cadence, *scrape_dags])})
    cells = []
    for key in keys:
        a = per.get(key)
        c = cadence.get(f"scrape_{key}", {})
        lag = f"{a['new']}:{max(a['lags_min']):.1f}" if a else "0:-"
        cells.append(f"{key}={lag} r{c.get('runs', 0)} g{c.get('max_gap_min') or '-'}")
    for k in range(0, len(cells), 4):
        print("  " + "  ".join(f"{c:<38}" for c in cells[k : k + 4]).rstrip())
    print("edits made during the run, detected by integrity (by the article's age at the edit):")
    for name, band in edits.items():
        print(
            f"  {name:>6}: {band['detected']}/{band['edits']} detected,"
            f" delay p50 {band['p50_min']} min, p95 {band['p95_min']} min"
        )
    print(
        "integrity checks during the run: "
        + ", ".join(f"{k}={v}" for k, v in sorted(checks["outcomes"].items()))
        + f"; fields changed: {checks['fields_changed'] or 'none'};"
        f" synthetic articles published before the run stored again by a scrape:"
        f" {checks['old_articles_stored_again']} (dev corpus: {checks['dev_corpus_articles_stored']})"
    )
    print("CPU (% of one core over the run) and memory (MB) of each component:")
    for name, c in ((n, c) for n, c in cpu.items() if n != "machine"):
        print(
            f"  {name:<22} process {c['cpu_pct_process']:5.1f}% {c['rss_mb_process_max']:5.0f} MB;"
            f" with children {c['cpu_pct_tree']:5.1f}% max {c['rss_mb_tree_max']:5.0f} MB"
        )
    print(f"  machine: {cpu['machine']['cpu_pct']:.1f}% of {cpu['machine']['cores']} cores busy")
    out = ROOT / ".state" / "bench" / f"realtime-{run_start:%Y%m%dT%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "args": vars(args),
                "run_start": run_start.isoformat(),
                "run_stop": run_stop.isoformat(),
                "preload": info,
                "requests": reqs,
                "requests_by_kind_during_run": kinds,
                "profile": args.profile,
                "office_new_per_hour": office,
                "drain_min": drain,
                "cadence_mode": mode,
                "grace_min": grace,
                "scrape_lag_per_agency": per,
                "searchable_s": searchable,
                "scrape_dags": cadence,
                "edits": edits,
                "integrity_checks": checks,
                "cpu_memory": cpu,
            },
            indent=1,
            default=str,
        )
    )
    print(f"full figures: {out}")
    if args.chart:  # read from PostgreSQL (still up) before the scratch database is dropped
        from dgb.hostbudget import BudgetConfig, host_key

        data = {"start": f"{run_start:%Y-%m-%d %H:%M} UTC", "minutes": args.minutes, "cadence": mode}
        data |= {
            "articles": info["articles"],
            "budget_rps": BudgetConfig.from_env().limits(host_key(base)).rate_per_s,
        }
        data |= timeline(s, site_log, run_start, run_stop)
        data["requests"]["max_rps_10s"] = reqs["max_rps_10s"]
        write_chart(args.chart, sys.argv[1:] if argv is None else argv, data)
    if not args.keep:
        pg._psql_admin(f'DROP DATABASE IF EXISTS "{s.pg_db}" WITH (FORCE)')
    sched = cpu.get("airflow-scheduler", {})
    scraped = delays([v * 60 for v in lags])  # no p95 under MIN_FOR_P95 articles: "na"
    polls = kinds.get("listing", 0) + kinds.get("api_search", 0)
    within = sum(1 for v in lags if v <= grace) / len(lags) * 100 if lags else float("nan")
    worst = max(lags) if lags else float("nan")
    print(
        f"realtime: minutes={args.minutes:.0f} articles={info['articles']}"
        f" max_rps_10s={reqs['max_rps_10s']:.2f} mean_rps={reqs['mean_rps']:.2f}"
        f" new_articles={len(lags)} scraped_within_cycle_pct={within:.0f}"
        f" p95_scrape_lag_min={pct(lags, 95):.1f} max_scrape_lag_min={worst:.1f}"
        f" scheduler_cpu_pct={sched.get('cpu_pct_process', float('nan')):.1f}"
        f" scheduler_rss_mb={sched.get('rss_mb_process_max', float('nan')):.0f}"
        f" cadence={mode} searchable_p50_s={pct(searchable, 50):.0f}"
        f" searchable_p95_s={pct(searchable, 95):.0f}"
        f" profile={args.profile} counted={len(lags)}"
        f" scraped_p95_s={'na' if scraped['p95'] is None else round(scraped['p95'])}"
        f" listing_requests_per_h={per_hour(polls, seconds):.0f}"
        f" integrity_checks_per_h={per_hour(checked, seconds):.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
