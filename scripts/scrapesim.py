"""Scraping on a simulated clock: publication -> scraped lag and listing requests (issue 27).

Used by ``scripts/bench_scale.py``. Publications come from
:class:`dgb_dev.mirror.publication.PublicationModel` (per-agency rates and office hours estimated
from real articles). Two ways to start the scrapes, on the same site and budget:

* **learnt** (production): every ``tick_s`` (60 s, the ``scrape_dispatcher`` DAG) each agency's
  :func:`dgb.scraper.cadence.cadence` is computed from its history as the dispatcher reads it (the
  articles scraped so far, published in the last ``history_days``; the week profile of all agencies,
  rebuilt daily), and :func:`dgb.scraper.cadence.plan` picks the due agencies inside the listing
  share of the budget: the production functions, imported, not copied. An agency is re-evaluated
  at each tick where it may have become due (its interval only grows between hour boundaries and
  polls, so skipping the ticks before ``last poll + interval - tick/2`` changes nothing);
* **fixed** (before): every agency every 10 minutes at its staggered minute (``dgb.scraper.dags.stagger``).

Learnt, as :func:`dgb.scraper.dispatch.run_tick`: the dispatcher's task polls the due agencies
from ``dispatch_start_s`` (3 s) after its tick, one listing request each, until its ``deadline_s``
(45 s; the rest wait for the next tick); a poll that finds an article not scraped yet starts the
agency's scrape DAG, whose run begins ``latency_s`` (10 s: asset event -> DAG run -> task start)
after the poll. Fixed: every poll is a scrape DAG run starting ``latency_s`` after its tick. A
scrape run reads its listing pages again (``ceil((new + fence) / page_items)``, at least 1) and
one article page per new article. Every request takes the host budget's next free turn (one every
``1 / host_rps``; scrapes before integrity, which takes what is left). An article's lag is the
time of its own request minus its publication; articles not found by the end count with their
lag so far. DAG runs: the dispatcher's (one a tick) and the scrape runs.
"""

from __future__ import annotations

import heapq
import math
import zlib
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from dgb.scraper.cadence import DAY, HOUR, CadencePolicy, History, cadence, hour_of_week, plan, week_profile


@dataclass
class ScrapeResult:
    lags: np.ndarray
    requests: np.ndarray  # every scrape request's time (epoch s), listings and article pages
    listing_requests: int
    days: float
    dag_runs: int = 0  # dispatcher and scrape DAG runs

    @property
    def dag_runs_per_hour(self) -> float:
        return self.dag_runs / (self.days * 24)

    reasons: Counter = field(default_factory=Counter)  # reason of each poll (learnt)

    @property
    def listing_per_day(self) -> float:
        return self.listing_requests / self.days


def stagger_minute(key: str) -> int:
    return zlib.crc32(key.encode()) % 10  # as dgb.scraper.dags.stagger


def simulate_scraping(
    keys: list[str],
    pub_times: np.ndarray,
    pub_agency: np.ndarray,
    t0: float,
    days: float,
    *,
    mode: str,
    host_rps: float,
    policy: CadencePolicy | None = None,
    latency_s: float = 10.0,
    dispatch_start_s: float = 3.0,
    deadline_s: float = 45.0,
    page_items: int = 25,
    fence: int = 3,
    seed: int = 27,
) -> ScrapeResult:
    policy = policy or CadencePolicy()
    rng = np.random.default_rng(seed)
    n = len(keys)
    per = [np.sort(pub_times[pub_agency == a]) for a in range(n)]
    found = [int(np.searchsorted(p, t0, side="right")) for p in per]  # known at the start
    last_poll: list[float | None] = list(t0 - rng.uniform(0, 600, n))
    hist: list[History] = []
    profile: list[float] = []
    wake: list[tuple[float, int]] = []
    lags: list[np.ndarray] = []
    requests: list[float] = []
    listing = 0
    dag_runs = 0
    next_free = 0.0  # the host budget's next free turn (scrapes first: integrity takes the rest)
    reasons: Counter = Counter()
    end = t0 + days * DAY
    ticks = int(days * DAY // policy.tick_s)
    minute_of = [stagger_minute(k) for k in keys]

    def rebuild(now: float) -> None:
        nonlocal profile, wake
        start = now - policy.history_days * DAY
        hist[:] = []
        for a in range(n):
            known = per[a][: found[a]]
            h = History(days=policy.history_days, last_new=float(known[-1]) if len(known) else None)
            for ts in known[np.searchsorted(known, start) :]:
                h.counts[hour_of_week(float(ts))] += 1
            hist.append(h)
        profile = week_profile(hist)
        wake = [(now, a) for a in range(n)]
        heapq.heapify(wake)

    for i in range(ticks):
        now = t0 + i * policy.tick_s
        if mode == "learnt" and i % int(DAY // policy.tick_s) == 0:
            rebuild(now)
        chosen: list[int] = []
        if mode == "fixed":
            if int(now // 60) % 10 in minute_of:
                chosen = [a for a in range(n) if minute_of[a] == int(now // 60) % 10]
        else:
            hour_end = (math.floor(now / HOUR) + 1) * HOUR
            candidates = []
            while wake and wake[0][0] <= now:
                _, a = heapq.heappop(wake)
                c = cadence(hist[a], now, policy, profile)
                candidates.append((keys[a], c, last_poll[a]))
                due_at = (last_poll[a] or now) + c.interval_s - policy.tick_s / 2
                if due_at > now:
                    heapq.heappush(wake, (min(due_at, hour_end), a))
            decided = plan(candidates, now, policy, host_rps)
            index = {k: a for a, k in enumerate(keys)}
            chosen = [index[k] for k in decided.due]
            reason = {k: c.reason for k, c, _ in candidates}
            for k in decided.due:
                reasons[reason[k]] += 1
            for k in decided.deferred:
                heapq.heappush(wake, (now + policy.tick_s, index[k]))
                reasons["budget"] += 1
        # learnt: the dispatcher's task polls (one listing request each) from ``dispatch_start_s``
        # after its tick, until its deadline; a poll that finds news starts the scrape DAG, whose
        # run begins ``latency_s`` later. fixed: each poll is a scrape DAG run, ``latency_s`` after
        # its tick.
        start = now + (dispatch_start_s if mode == "learnt" else latency_s)
        runs: list[tuple[float, int]] = []  # (run start, agency)
        if mode == "learnt":
            dag_runs += 1  # the dispatcher's own
            for j, a in enumerate(chosen):
                at = max(start, next_free)
                if at - start > deadline_s:  # the tick's deadline: still due, first at the next tick
                    for b in chosen[j:]:
                        heapq.heappush(wake, (now + policy.tick_s, b))
                        reasons["budget"] += 1
                    break
                listing += 1
                requests.append(at)
                next_free = at + 1 / host_rps
                last_poll[a] = at
                heapq.heappush(wake, (now + policy.tick_s, a))
                if int(np.searchsorted(per[a], at, side="right")) > found[a]:
                    runs.append((at + latency_s, a))
        else:
            runs = [(start, a) for a in chosen]
        for run_start, a in runs:
            dag_runs += 1
            at = max(run_start, next_free)
            p = per[a]
            hi = int(np.searchsorted(p, at, side="right"))
            new = p[found[a] : hi]
            pages = max(1, math.ceil((len(new) + fence) / page_items))
            listing += pages
            times = at + np.arange(pages + len(new)) / host_rps
            requests.extend(times)
            next_free = at + (pages + len(new)) / host_rps
            if mode == "fixed":
                last_poll[a] = at
            if len(new):
                lags.append(times[pages:] - new)
                found[a] = hi
                if mode == "learnt":
                    h = hist[a]
                    for ts in new:
                        h.counts[hour_of_week(float(ts))] += 1
                    h.last_new = float(new[-1])
    for a in range(n):  # not found by the end: their lag so far (a lower bound)
        p = per[a]
        left = p[found[a] : int(np.searchsorted(p, end, side="right"))]
        if len(left):
            lags.append(end - left)
    return ScrapeResult(
        lags=np.concatenate(lags) if lags else np.zeros(0),
        requests=np.sort(np.array(requests)),
        listing_requests=listing,
        dag_runs=dag_runs,
        days=days,
        reasons=reasons,
    )
