"""What ``scripts/bench_realtime.py`` reads once its run is over (and ``scripts/bench_soak.py``
reuses): the site's request log, each agency's scrape lag and publication -> searchable, the scrape
DAG runs, edit detection by age band, what the integrity checks did, and, for ``--chart DIR``,
the run minute by minute (:func:`timeline`, drawn by :func:`dgb_dev.benchcharts.realtime`).
Every reader takes the settings, the corpus and the run's times; nothing here starts or stops a
component."""

from __future__ import annotations

import json
import math
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

BANDS = ((0, 3 * 3600, "<3h"), (3 * 3600, 2 * 86400, "3h-2d"), (2 * 86400, 30 * 86400, "2-30d"))
BANDS += ((30 * 86400, math.inf, ">30d"),)


def mirror_requests(base: str, since: float) -> dict:
    with urllib.request.urlopen(f"{base}/_control/requests?since={since:.0f}", timeout=10) as resp:
        return json.loads(resp.read())


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, max(0, math.ceil(q / 100 * len(v)) - 1))]


MIN_FOR_P95 = 20  # under this many articles a "p95" is one of the slowest few: not called one


def delays(values: list[float]) -> dict:
    """``n``, ``p50``, ``p95`` and ``max`` of ``values`` (None when empty; ``p95`` None under
    :data:`MIN_FOR_P95` values)."""
    n = len(values)
    return {
        "n": n,
        "p50": pct(values, 50) if n else None,
        "p95": pct(values, 95) if n >= MIN_FOR_P95 else None,
        "max": max(values) if n else None,
    }


def delay_line(label: str, values_s: list[float]) -> str:
    """One line of :func:`delays` in seconds, with the count they are over."""
    d = delays(values_s)
    if not d["n"]:
        return f"{label}: no articles"
    p95 = f"p95 {d['p95']:.0f} s" if d["p95"] is not None else f"no p95 (under {MIN_FOR_P95} articles)"
    return f"{label}: {d['n']} articles, p50 {d['p50']:.0f} s, {p95}, max {d['max']:.0f} s"


def per_hour(count: float, seconds: float) -> float:
    return count * 3600.0 / seconds if seconds > 0 else float("nan")


def kinds_between(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Requests by kind between two snapshots of the site's log (its ``total``, counted from the
    site's start). A kind that went down means the site restarted: what it counted since."""
    out = {k: n - before.get(k, 0) if n >= before.get(k, 0) else n for k, n in after.items()}
    return {k: n for k, n in sorted(out.items()) if n > 0}


def run_lines(
    scraped_s: list[float],
    searchable_s: list[float],
    kinds: dict[str, int],
    checks: int,
    seconds: float,
    max_10s: float,
    cpu: dict,
) -> list[str]:
    """What issue 36 asks of the run, one figure a line: publication -> scraped and -> searchable
    (:func:`delay_line`), listing requests and integrity checks per hour (the site's requests by
    kind over the run, :func:`kinds_between`; ``integrity_checks`` rows), the most requests in any
    10 s and the scheduler's CPU (the process, % of one core)."""
    listing, search = kinds.get("listing", 0), kinds.get("api_search", 0)
    pages = sum(kinds.get(k, 0) for k in ("article", "api_item", "image"))
    sched = cpu.get("airflow-scheduler")
    return [
        delay_line("publication -> scraped", scraped_s),
        delay_line("publication -> searchable", searchable_s),
        f"listing requests per hour: {per_hour(listing + search, seconds):.0f}"
        f" (kind listing {per_hour(listing, seconds):.0f}, kind api_search {per_hour(search, seconds):.0f}:"
        " Plone 6 listings and integrity's @search signal)",
        f"integrity checks per hour: {per_hour(checks, seconds):.0f} (integrity_checks rows;"
        f" article pages, Plone 6 items and images asked {per_hour(pages, seconds):.0f}/h, scrapes included)",
        f"max requests over any 10 s: {round(max_10s * 10)} ({max_10s:.2f}/s)",
        f"scheduler CPU: {sched['cpu_pct_process']:.1f}% of one core (the scheduler process;"
        f" {sched['cpu_pct_tree']:.1f}% with its children, the LocalExecutor's workers)"
        if sched
        else "scheduler CPU: not sampled",
    ]


def request_figures(log_: dict, start: float, end: float) -> dict:
    counts = {int(t): n for t, n in log_["per_second"] if start <= t < end}
    secs = range(int(start), int(end))
    series = [counts.get(t, 0) for t in secs]
    windows = [sum(series[k : k + 10]) / 10 for k in range(max(1, len(series) - 9))]
    busiest = max(range(len(windows)), key=windows.__getitem__) if windows else None
    return {
        "requests": sum(series),
        "mean_rps": round(sum(series) / max(1, len(series)), 3),
        "max_rps_10s": round(max(windows) if windows else 0.0, 2),
        # when the busiest 10 s began (the first such window; None: no requests counted)
        "max_rps_10s_at": None
        if busiest is None or not any(series)
        else datetime.fromtimestamp(int(start) + busiest, UTC).isoformat(timespec="seconds"),
        "max_rps_1s": max(series) if series else 0,
        "by_kind": log_["total"],
    }


def scrape_lags(
    s, corpus, start: datetime, stop: datetime, grace_min: float, scraped_keys: set[str]
) -> tuple[dict, list[float], int, int, list[float]]:
    """Per agency: the articles published during the run (until ``grace_min`` before its end, so
    each had that long to be found), and scraped_at - published_at of each (not scraped: censored
    at the end of the run and counted); with publication -> searchable (indexed_at, not indexed by
    the end: censored there too) of every one. The synthetic corpus also publishes for the
    catalogue's inactive agencies, which have no scrape DAG: those are counted apart (``inactive``)."""
    from dgb import db

    lo, hi = start.timestamp(), stop.timestamp() - grace_min * 60
    idx = [i for i in range(len(corpus)) if lo <= corpus.published[i] < hi]
    with db.connect(s.pg_dsn()) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT agency_key, url, published_at, scraped_at, indexed_at FROM news WHERE published_at >= %s",
            (start - timedelta(minutes=1),),
        )
        stored = {url.rsplit("/", 1)[-1]: (key, pub, sc, ix) for key, url, pub, sc, ix in cur.fetchall()}
    per: dict[str, dict] = {}
    lags: list[float] = []
    searchable: list[float] = []
    missed = inactive = 0
    for i in idx:
        key = corpus.agencies[int(corpus.agency[i])]
        if key not in scraped_keys:
            inactive += 1
            continue
        slug = corpus.slug(i)
        pub = datetime.fromtimestamp(float(corpus.published[i]), UTC)
        row = stored.get(slug)
        if row is None:
            lag = (stop - pub).total_seconds()
            missed += 1
        else:
            lag = (row[2] - pub).total_seconds()
        indexed = row[3] if row is not None and row[3] is not None else stop
        searchable.append((indexed - pub).total_seconds())
        lag_min = lag / 60
        lags.append(lag_min)
        a = per.setdefault(key, {"new": 0, "lags_min": [], "missed": 0})
        a["new"] += 1
        a["lags_min"].append(round(lag_min, 2))
        a["missed"] += row is None
    return per, lags, missed, inactive, searchable


def dag_cadence(s, start: datetime) -> dict[str, dict]:
    """Per scrape DAG: runs started since ``start``, and the longest gap between run starts."""
    from dgb import db

    with db.connect(s.pg_dsn(s.pg_airflow_db)) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT dag_id, start_date, state FROM dag_run WHERE dag_id LIKE 'scrape\\_%%'"
            " AND start_date >= %s ORDER BY dag_id, start_date",
            (start,),
        )
        rows = cur.fetchall()
    out: dict[str, dict] = {}
    for dag_id, started, state in rows:
        d = out.setdefault(dag_id, {"runs": 0, "failed": 0, "starts": []})
        d["runs"] += 1
        d["failed"] += state == "failed"
        d["starts"].append(started)
    for d in out.values():
        gaps = [(b - a).total_seconds() / 60 for a, b in zip(d["starts"], d["starts"][1:])]
        d["max_gap_min"] = round(max(gaps), 1) if gaps else None
        del d["starts"]
    return out


def edit_delays(s, corpus, start: datetime, stop: datetime) -> dict[str, dict]:
    """Edits made during the run, by the article's age at the edit: how many the integrity checks
    detected (a history row after the edit) and the delay p50/p95 of those."""
    from dgb import db

    lo, hi = start.timestamp(), stop.timestamp()
    sel = (corpus.edit_time >= lo) & (corpus.edit_time < hi)
    arts = corpus.edit_article[sel]
    times = corpus.edit_time[sel]
    with db.connect(s.pg_dsn()) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT n.url, h.detected_at FROM news_update_history h JOIN news n ON n.id = h.news_id"
            " WHERE h.source = 'integrity' AND h.detected_at >= %s",
            (start,),
        )
        seen: dict[str, list[float]] = {}
        for url, at in cur.fetchall():
            seen.setdefault(url.rsplit("/", 1)[-1], []).append(at.timestamp())
    out: dict[str, dict] = {name: {"edits": 0, "detected": 0, "delays_min": []} for *_, name in BANDS}
    for i, te in zip(arts, times):
        age = te - corpus.published[int(i)]
        name = next(n for a, b, n in BANDS if a <= age < b)
        band = out[name]
        band["edits"] += 1
        after = [t for t in seen.get(corpus.slug(int(i)), []) if t >= te]
        if after:
            band["detected"] += 1
            band["delays_min"].append((min(after) - te) / 60)
    for band in out.values():
        d = band.pop("delays_min")
        band["p50_min"] = round(pct(d, 50), 1) if d else None
        band["p95_min"] = round(pct(d, 95), 1) if d else None
    return out


def run_checks(s, corpus, start: datetime) -> dict:
    """What the integrity checks did during the run (outcomes, by kind), and how many articles
    published before the run were stored again by a scrape (should be none: known URLs stop it)."""
    from dgb import db

    with db.connect(s.pg_dsn()) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT outcome, count(*) FROM integrity_checks WHERE checked_at >= %s GROUP BY 1", (start,)
        )
        outcomes = dict(cur.fetchall())
        # synthetic ones only: the site also serves the dev corpus (~100 real articles), which the
        # scratch database does not hold, so the first scrape of those agencies stores them once
        cur.execute(
            "SELECT count(*) FILTER (WHERE url LIKE '%%/sintetica-%%'),"
            " count(*) FILTER (WHERE url NOT LIKE '%%/sintetica-%%')"
            " FROM news WHERE scraped_at >= %s AND published_at < %s",
            (start, corpus.end),  # the preload holds everything published before the corpus's end
        )
        rescraped, corpus_articles = cur.fetchone()
        cur.execute(
            "SELECT field_changed, count(*) FROM news_update_history WHERE detected_at >= %s GROUP BY 1",
            (start,),
        )
        changed = dict(cur.fetchall())
    return {
        "outcomes": outcomes,
        "old_articles_stored_again": rescraped,
        "dev_corpus_articles_stored": corpus_articles,
        "fields_changed": changed,
    }


def request_windows(log_: dict, start: datetime, stop: datetime, window_s: int = 10) -> list[float]:
    """Requests/s in each whole ``window_s`` window from ``start`` (the site's per-second log)."""
    base, end = int(start.timestamp()), int(stop.timestamp())
    counts = {int(t): n for t, n in log_["per_second"] if base <= t < end}
    return [
        sum(counts.get(w + k, 0) for k in range(window_s)) / window_s
        for w in range(base, end - window_s + 1, window_s)
    ]


def timeline(s, log_: dict, start: datetime, stop: datetime, window_s: int = 10) -> dict:
    """The run minute by minute, for the chart: requests/s in consecutive ``window_s`` windows (the
    site's per-second log, as :func:`request_figures` reads it), the pending backlog of each stage
    every minute (:func:`dgb.observe.overview.backlog_history`: reconstructed from the articles'
    stage timestamps, as the pipeline view draws it), scrape DAG runs started (Airflow's
    ``dag_run``, the dispatcher left out) and integrity checks made (``integrity_checks``) per minute."""
    from dgb import db
    from dgb.observe.overview import backlog_history

    minutes = max(1, math.ceil((stop - start).total_seconds() / 60))

    def per_minute(cur, sql: str) -> list[int]:
        cur.execute(sql, {"start": start, "stop": stop})
        out = [0] * minutes
        for minute, n in cur.fetchall():
            out[min(minutes - 1, int(minute))] += n
        return out

    by_minute = "floor(extract(epoch FROM {col} - %(start)s) / 60)"
    with db.connect(s.pg_dsn()) as conn:
        history = backlog_history(
            conn, stop, hours=(stop - start).total_seconds() / 3600, step_minutes=1, model=s.embedding_model
        )
        with conn.cursor() as cur:
            checks = per_minute(
                cur,
                f"SELECT {by_minute.format(col='checked_at')}, count(*) FROM integrity_checks"
                " WHERE checked_at >= %(start)s AND checked_at < %(stop)s GROUP BY 1",
            )
    with db.connect(s.pg_dsn(s.pg_airflow_db)) as conn, conn.cursor() as cur:
        runs = per_minute(
            cur,
            f"SELECT {by_minute.format(col='start_date')}, count(*) FROM dag_run"
            " WHERE dag_id LIKE 'scrape\\_%%' AND dag_id <> 'scrape_dispatcher'"
            " AND start_date >= %(start)s AND start_date < %(stop)s GROUP BY 1",
        )
    stages = [k for k in history[0] if k != "at"] if history else []
    at = [(datetime.fromisoformat(p["at"]) - start).total_seconds() / 60 for p in history]
    return {
        "requests": {"window_s": window_s, "rps": request_windows(log_, start, stop, window_s)},
        "backlog": {
            "minutes": [round(m, 2) for m in at],
            "stages": {k: [p[k] for p in history] for k in stages},
        },
        "activity": {"scrape_runs": runs, "integrity_checks": checks},
    }


def write_chart(directory: Path, argv: list[str], data: dict) -> None:
    """``--chart DIR``: the chart ``realtime-timeline`` of :func:`timeline`'s data (with the run's
    figures: start, minutes, articles, cadence, the host budget, the max requests/s over 10 s)."""
    from dgb_dev import benchcharts, charts

    command = charts.command_line(Path(__file__).with_name("bench_realtime.py"), argv)
    for path in benchcharts.save(directory, "realtime-timeline", "realtime", data, command):
        print(f"chart: {path}")
