"""Scraping on a simulated clock: publication -> scraped lag and listing requests (issues 27 and 36).

Used by ``scripts/bench_scale.py``. Publications come from
:class:`dgb_dev.mirror.publication.PublicationModel` (per-agency office hours, bursts, holidays,
drift and dormant agencies waking, estimated from real articles where the data says anything);
each article shows in its listing a lag after its publication (``PublicationModel.listing_lag``).
Two ways to start the scrapes, on the same site and host:

* **learnt** (production): every ``tick_s`` (60 s, the ``scrape_dispatcher`` DAG) the production
  functions of :mod:`dgb.scraper.cadence`, imported, not copied, decide from the history as the
  dispatcher reads it (the articles scraped so far, published in the last ``history_days``, rebuilt
  daily and added to as articles are found): the empirical Bayes prior and the week's hour budgets
  every hour, the target they can buy every day (:func:`~dgb.scraper.forecast.fit_prior`,
  :func:`~dgb.scraper.cadence.plan_week`),
  each tick the rates now, the hour's allocation and the tick's plan
  (:func:`~dgb.scraper.cadence.rate_now`, :func:`~dgb.scraper.cadence.allocate`,
  :func:`~dgb.scraper.cadence.plan`);
* **fixed** (before): every agency every 10 minutes at its staggered minute (``dgb.scraper.dags.stagger``).

Learnt, as :func:`dgb.scraper.dispatch.run_tick`: the dispatcher's task polls the due agencies one
after the other from ``dispatch_start_s`` (3 s) after its tick until its ``deadline_s`` (45 s; the
rest wait for the next tick); a poll that finds an article not scraped yet starts the agency's
scrape DAG, whose run begins ``latency_s`` (10 s: asset event -> DAG run -> task start) after the
poll's answer. Fixed: every poll is a scrape DAG run starting ``latency_s`` after its tick. A scrape
run reads its listing pages again (``ceil((new + fence) / page_items)``, at least 1) and one
article page per new article, one request after the other.

**The host** (:class:`Host`): every request takes the host budget's next token, spaced ``1 /
host_rps`` apart and at most :func:`dgb.hostbudget.window_cap` (19 at 2/s) in any 10 s; the server
answers after a log-normal latency (median 0.3 s, assumed); ``error_rate`` (1%, assumed) of the
answers are a 429/503, retried after ``retry_after_s`` (5 s) at the cost of another request.
Scrapes come before integrity, which takes the tokens left (``bench_scale.py``). An article's lag
is the answer to its own request minus its publication; articles not found by the end count with
their lag so far. DAG runs: the dispatcher's (one a tick) and the scrape runs.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter, deque
from dataclasses import dataclass, field, replace

import numpy as np

from dgb.hostbudget import window_cap
from dgb.scraper.cadence import (
    DAY,
    HOUR,
    CadencePolicy,
    History,
    allocate,
    fit_prior,
    hour_of_week,
    plan,
    plan_week,
    rate_now,
)


@dataclass
class ScrapeResult:
    lags: np.ndarray
    published: np.ndarray  # publication time of each lag's article
    requests: np.ndarray  # every scrape request's time (epoch s), listings, article pages, retries
    listing_requests: int
    days: float
    dag_runs: int = 0  # dispatcher and scrape DAG runs
    retries: int = 0
    reasons: Counter = field(default_factory=Counter)  # reason of each poll (learnt)
    targets: list[float] = field(default_factory=list)  # the week plan's target at each replan

    @property
    def dag_runs_per_hour(self) -> float:
        return self.dag_runs / (self.days * 24)

    @property
    def listing_per_day(self) -> float:
        return self.listing_requests / self.days


class Host:
    """The host budget's tokens as the site sees them (see the module docstring)."""

    def __init__(
        self,
        rps: float,
        rng,
        *,
        window_s: float = 10.0,
        latency_s: float = 0.3,
        error_rate: float = 0.01,
        retry_after_s: float = 5.0,
    ) -> None:
        self.gap, self.window_s, self.cap = 1.0 / rps, window_s, window_cap(rps, window_s)
        self.rng, self.latency_s, self.error_rate, self.retry_after_s = (
            rng,
            latency_s,
            error_rate,
            retry_after_s,
        )
        self.recent: deque[float] = deque(maxlen=self.cap)
        self.next_free = -math.inf
        self.times: list[float] = []
        self.retries: Counter = Counter()

    def request(self, at: float, kind: str = "listing") -> float:
        """One request wanted at ``at`` (retried until answered): the time of its answer."""
        while True:
            t = max(at, self.next_free)
            if len(self.recent) == self.cap:
                t = max(t, self.recent[0] + self.window_s)
            self.recent.append(t)
            self.times.append(t)
            self.next_free = t + self.gap
            done = t + self.latency_s * math.exp(0.5 * self.rng.standard_normal())
            if self.rng.random() >= self.error_rate:
                return done
            self.retries[kind] += 1
            at = done + self.retry_after_s


def stagger_minute(key: str) -> int:
    return zlib.crc32(key.encode()) % 10  # as dgb.scraper.dags.stagger


def simulate_scraping(
    keys: list[str],
    pub_times: np.ndarray,
    pub_agency: np.ndarray,
    visible_times: np.ndarray,
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
    """Scrape the publications ``(pub_times, pub_agency)``, each listed at ``visible_times``, for
    ``days`` from ``t0`` (articles published before it are known if listed by then)."""
    policy = policy or CadencePolicy()
    rng = np.random.default_rng(seed)
    host = Host(host_rps, rng)
    n = len(keys)
    order = [np.flatnonzero(pub_agency == a) for a in range(n)]
    order = [o[np.argsort(visible_times[o], kind="stable")] for o in order]
    shown = [visible_times[o] for o in order]  # per agency, sorted by when the listing shows them
    pub = [pub_times[o] for o in order]
    found = [int(np.searchsorted(s, t0, side="right")) for s in shown]
    last_poll: list[float | None] = list(t0 - rng.uniform(0, 600, n))
    hist: list[History] = []
    slot_rates: list[list[float]] = []
    budgets: list[float] = []
    lags: list[np.ndarray] = []
    lag_pub: list[np.ndarray] = []
    listing = dag_runs = 0
    reasons: Counter = Counter()
    targets: list[float] = []
    end = t0 + days * DAY
    ticks = int(days * DAY // policy.tick_s)
    minute_of = [stagger_minute(k) for k in keys]
    per_day = int(DAY // policy.tick_s)
    per_hour = int(HOUR // policy.tick_s)

    def rebuild(now: float) -> None:
        start = now - policy.history_days * DAY
        hist[:] = []
        for a in range(n):
            known = np.sort(pub[a][: found[a]])
            h = History(days=policy.history_days, last_new=float(known[-1]) if len(known) else None)
            for ts in known[np.searchsorted(known, start) :]:
                h.counts[hour_of_week(float(ts))] += 1
            hist.append(h)

    aimed = [policy]

    def replan(search: bool) -> None:
        prior = fit_prior(hist)
        slot_rates[:] = [prior.rates(h) for h in hist]
        week = plan_week(slot_rates, policy, host_rps, None if search else aimed[0].target_s)
        budgets[:] = week.budgets
        aimed[0] = replace(policy, target_s=week.target_s)
        targets.append(week.target_s)

    for i in range(ticks):
        now = t0 + i * policy.tick_s
        chosen: list[int] = []
        if mode == "fixed":
            if int(now // 60) % 10 in minute_of:
                chosen = [a for a in range(n) if minute_of[a] == int(now // 60) % 10]
        else:
            if i % per_day == 0:
                rebuild(now)
            if i % per_hour == 0:  # the target searched daily, the hour budgets hourly
                replan(search=i % per_day == 0)
            budget = budgets[hour_of_week(now)]
            rates = {keys[a]: rate_now(slot_rates[a], hist[a].last_new, now, policy) for a in range(n)}
            cad = allocate(rates, budget, aimed[0])
            decided = plan(
                [(keys[a], cad[keys[a]], last_poll[a]) for a in range(n)], now, policy, host_rps, budget
            )
            index = {k: a for a, k in enumerate(keys)}
            chosen = [index[k] for k in decided.due]
            for k in decided.due:
                reasons[cad[k].reason] += 1
            reasons["budget"] += len(decided.deferred)
        runs: list[tuple[float, int]] = []  # (run start, agency)
        if mode == "learnt":
            dag_runs += 1  # the dispatcher's own
            t = now + dispatch_start_s
            for a in chosen:
                if t - now - dispatch_start_s > deadline_s:  # the tick's deadline: first at the next one
                    reasons["budget"] += 1
                    continue
                listing += 1
                answer = host.request(t)
                seen_at = host.times[-1]  # the listing as it was when the request was served
                last_poll[a] = seen_at
                if int(np.searchsorted(shown[a], seen_at, side="right")) > found[a]:
                    runs.append((answer + latency_s, a))
                t = answer
        else:
            runs = [(now + latency_s, a) for a in chosen]
        for run_start, a in runs:
            dag_runs += 1
            t = run_start
            first_page = None
            hi = found[a]
            pages = 1
            p = 0
            while p < pages:
                listing += 1
                t = host.request(t)
                if first_page is None:
                    first_page = host.times[-1]
                    hi = int(np.searchsorted(shown[a], first_page, side="right"))
                    pages = max(1, math.ceil((hi - found[a] + fence) / page_items))
                p += 1
            if mode == "fixed":
                last_poll[a] = first_page
            if hi <= found[a]:
                continue
            got = np.empty(hi - found[a])
            for j in range(len(got)):
                t = host.request(t, "article")
                got[j] = t
            new = pub[a][found[a] : hi]
            lags.append(got - new)
            lag_pub.append(new)
            found[a] = hi
            if mode == "learnt":
                h = hist[a]
                for ts in new:
                    h.counts[hour_of_week(float(ts))] += 1
                h.last_new = max(h.last_new or -math.inf, float(new.max()))
    for a in range(n):  # not found by the end: their lag so far (a lower bound)
        left = pub[a][found[a] :]
        left = left[left < end]
        if len(left):
            lags.append(end - left)
            lag_pub.append(left)
    lag = np.concatenate(lags) if lags else np.zeros(0)
    published = np.concatenate(lag_pub) if lag_pub else np.zeros(0)
    keep = (published >= t0) & (published < end)
    return ScrapeResult(
        lags=lag[keep],
        published=published[keep],
        requests=np.sort(np.array(host.times)),
        listing_requests=listing + host.retries["listing"],
        dag_runs=dag_runs,
        days=days,
        retries=sum(host.retries.values()),
        reasons=reasons,
        targets=targets,
    )
