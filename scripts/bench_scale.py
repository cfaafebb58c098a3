#!/usr/bin/env python
"""Integrity at production scale under one request budget, with a simulated clock (issue 14).

The synthetic corpus of the local site (:mod:`dgb_dev.mirror.synthetic`: N articles over 5 years
for every agency, then the final rate for ``--days``, with edits at known times) is checked for
``--days`` simulated days, in slots of ``--slot`` seconds (the ``integrity_budget`` DAG's
cadence), by two policies at the same budget:

* **ours**: each slot calls :func:`dgb.integrity.tiers.choose` (the production choice, the
  function ``run_budget`` calls in the DAG) on :class:`dgb.integrity.tiers.Candidates` built from
  an in-memory store, with the agencies' measured modification rates recomputed daily by
  :func:`dgb.integrity.tiers.agency_rate_multipliers`;
* **fixed**: the seed's tiers (10 min / 1 h / 6 h / 24 h / 7 d by whole days of age,
  :data:`dgb.integrity.tiers.DEFAULT_TIERS`), the due articles taken most overdue first (never
  checked first, as ``due_articles`` orders them) as far as the same budget allows, each check
  with its image (as the tier runs do).

The host budget (``--budget-rps``, default 2) includes the scrape traffic, simulated first
(:mod:`scrapesim`, issues 27 and 36): publications from the model estimated from real articles
(:mod:`dgb_dev.mirror.publication`: per-agency office hours, bursts, holidays, drift, dormant
agencies waking; it prints what each parameter rests on) for the first ``--agencies-listing``
agencies at the corpus's final daily volume, polled by the learnt cadence (the production
:mod:`dgb.scraper.cadence` functions and the dispatcher's polls) and, for comparison, every 10
minutes. Each of ``--seeds`` (5) draws covers the fit period (the cadence's ``history_days``
before the start, its starting history) and the ``--days`` measured after it, which the cadence
never saw. Integrity runs once, on the draw whose p95 is the median: the listed agencies'
articles of both periods are that draw's, so their edits follow publication, and its scrape
requests (polls, listing pages, new articles, retries) take their turns first, as the shared host
budget gives scrapes priority; the integrity checks get the rest of each slot, at most
:func:`dgb.hostbudget.window_cap` (19) in any 10 s. Requests within a slot go out evenly paced, so
``max_rps`` (the largest count in any 10 s window ÷ 10) checks the accounting, not a network. An
article is read when scraped (0-10 min after publication); articles older than that start "last
checked" uniformly within the previous ``--warm-days``. Each content check (a conditional GET)
finds every edit made since the last check (an image edit changes the page's image URL): its
delay is check time - edit time; edits still undetected at the end count with their delay so far
(a lower bound). 304s make later checks cheaper.

Prints per-band tables for both policies and, as its last line but one::

    scale: max_rps=<x> p95_delay_3h_min=<x> p95_delay_2d_min=<x> p95_delay_30d_h=<x> \
max_unchecked_days=<x> mean_delay_vs_fixed=<ratio> office_p95_delay_3h_min=<x> \
office_p95_delay_2d_min=<x> office_p95_delay_30d_h=<x>

(3h = edits to articles under 3 h old, 2d = under 2 days, 30d = 3-30 days; ours; the ratio is our
mean delay over all edits ÷ the fixed tiers' at the same budget; ``office_`` the same p95 for the
edits made on weekdays 9h-18h in Brasília, holidays excepted), then the last::

    freshness: p50_s=<n> p95_s=<n> listing_requests_per_day=<n> \
fixed_cadence_listing_requests_per_day=<n> seeds=<n> p50_s_range=<lo>-<hi> p95_s_range=<lo>-<hi> \
listing_requests_per_day_range=<lo>-<hi> office_p50_s=<n> office_p95_s=<n> \
office_p95_s_range=<lo>-<hi> fixed_p95_s=<n>

(publication -> stored lag of the learnt cadence on the measured periods, its listing requests a
day and those of the fixed 10 minutes: medians over the seeds, their min-max, the same for the
articles published in office hours). ``--chart DIR`` also writes the charts ``scale-freshness``
(both cadences' publication -> scraped distributions, median seed) and ``scale-edit-detection``
(edit -> detection per age band of the ``scale:`` line, per policy) into DIR as SVG + JSON
(:mod:`dgb_dev.benchcharts`).

    .venv/bin/python scripts/bench_scale.py --articles 300000 --budget-rps 2 --days 30
"""

from __future__ import annotations

import argparse
import ctypes
import math
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from dgb.hostbudget import window_cap
from dgb.integrity.tiers import (
    AGE_BANDS,
    DEFAULT_TIERS,
    BudgetPolicy,
    Candidates,
    agency_rate_multipliers,
    choose,
)
from dgb.scraper.cadence import CadencePolicy
from dgb_dev.mirror.publication import PublicationModel
from dgb_dev.mirror.synthetic import DAY, SyntheticCorpus

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/ is not a package: scrapesim
from scrapesim import simulate_scraping

HOUR = 3600.0


def keep_temporaries_in_the_heap() -> None:
    """Let glibc serve numpy's per-slot temporaries (a few MB each) from the heap instead of a
    fresh mmap each time: the page faults otherwise cost more than the arithmetic."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 1 << 28)  # M_MMAP_THRESHOLD: 256 MB
        libc.mallopt(-1, 1 << 29)  # M_TRIM_THRESHOLD: 512 MB
    except (OSError, AttributeError):  # not glibc: only slower
        pass


@dataclass
class Store:
    """The simulated integrity_state: what a policy knows of every article."""

    last_checked: np.ndarray
    last_changed: np.ndarray
    page_modified: np.ndarray
    cheap: np.ndarray
    image_checked: np.ndarray
    next_edit: np.ndarray  # index (flat edit arrays) of the first edit not seen yet
    max_gap: np.ndarray
    delays: list = field(default_factory=list)  # (edit index, delay s)
    requests: int = 0
    checks: int = 0
    coverage: dict = field(default_factory=dict)  # band -> list of daily coverage


def initial_store(c: SyntheticCorpus, t0: float, warm_days: float, rng) -> Store:
    n = len(c)
    scraped = c.published + rng.uniform(0, 600, n)
    age0 = np.maximum(0.0, t0 - c.published)
    warm = t0 - rng.uniform(0, 1, n) * np.minimum(age0, warm_days * DAY)
    last_checked = np.where(scraped >= t0, scraped, np.maximum(warm, scraped))
    # edits already seen: those up to the last check (the scrape counts as a read)
    pos = np.arange(len(c.edit_time))
    seen = c.edit_time <= last_checked[c.edit_article]
    next_edit = c.edit_start[1:].copy()
    unseen = np.flatnonzero(~seen)
    # first unseen edit per article (edits are sorted by article, then time)
    np.minimum.at(next_edit, c.edit_article[unseen], pos[unseen])
    last_seen = np.full(n, np.nan)
    seen_idx = np.flatnonzero(seen)
    np.fmax.at(last_seen, c.edit_article[seen_idx], c.edit_time[seen_idx])
    return Store(
        last_checked=last_checked,
        last_changed=last_seen.copy(),
        page_modified=last_seen.copy(),
        cheap=~np.isnan(last_checked),
        image_checked=last_checked.copy(),
        next_edit=next_edit,
        max_gap=np.zeros(n),
    )


def fixed_intervals(age_s: np.ndarray) -> np.ndarray:
    """The seed's tier interval (seconds) for each age, by whole days as the tiers count them."""
    days = np.floor(np.maximum(age_s, 0.0) / DAY)
    out = np.full(len(age_s), DEFAULT_TIERS[-1].interval.total_seconds())
    for t in reversed(DEFAULT_TIERS[:-1]):
        out = np.where(days <= t.max_days, t.interval.total_seconds(), out)
    return out


def check(c: SyntheticCorpus, st: Store, idx: np.ndarray, times: np.ndarray, image: np.ndarray) -> None:
    """Check articles ``idx`` at ``times``: detect their edits, update the store."""
    gap = times - st.last_checked[idx]
    st.max_gap[idx] = np.maximum(st.max_gap[idx], gap)
    ptr = st.next_edit[idx]
    end = c.edit_start[idx + 1]
    has = ptr < end
    hit = np.zeros(len(idx), dtype=bool)
    hit[has] = c.edit_time[ptr[has]] <= times[has]
    for j in np.flatnonzero(hit):
        i, tc, p, e = idx[j], times[j], ptr[j], end[j]
        while p < e and c.edit_time[p] <= tc:
            st.delays.append((p, tc - c.edit_time[p]))
            p += 1
        st.next_edit[i] = p
        st.last_changed[i] = st.page_modified[i] = c.edit_time[p - 1]
    st.cheap[idx] = ~hit
    st.last_checked[idx] = times
    img = idx[image]
    st.image_checked[img] = times[image]
    st.checks += len(idx)
    st.requests += int(len(idx) + image.sum())


def measured_rates(c: SyntheticCorpus, st: Store, cut: int) -> np.ndarray:
    k = len(c.agencies)
    checked = np.bincount(c.agency[:cut][~np.isnan(st.last_checked[:cut])], minlength=k)
    modified = np.bincount(c.agency[:cut][~np.isnan(st.last_changed[:cut])], minlength=k)
    mult = agency_rate_multipliers(
        {str(a): int(modified[a]) for a in range(k)}, {str(a): int(checked[a]) for a in range(k)}
    )
    return np.array([mult[str(a)] for a in range(k)])


def coverage_snapshot(c: SyntheticCorpus, st: Store, now: float, cut: int) -> None:
    age = now - c.published[:cut]
    since = now - st.last_checked[:cut]
    for b in AGE_BANDS:
        hi = np.inf if b.max_age is None else b.max_age.total_seconds()
        sel = (age >= b.min_age.total_seconds()) & (age < hi) & (since >= 0)
        n = int(sel.sum())
        if n:
            covered = int((since[sel] <= b.target.total_seconds()).sum())
            st.coverage.setdefault(b.name, []).append(covered / n)


def simulate(c, policy_name, args, t0, rng_seed, scrape_times) -> tuple[Store, np.ndarray]:
    rng = np.random.default_rng(rng_seed)
    st = initial_store(c, t0, args.warm_days, rng)
    bp = BudgetPolicy(budget_rps=args.budget_rps, slot_seconds=args.slot)
    # the shared host pacer: one request every 1/budget s; listings (priority) take the first free
    # turn at or after their time, integrity checks the remaining turns of the slot in order
    # the host budget's window cap (19 in any 10 s at 2/s) makes its rate 1.9/s when saturated
    turns = int(window_cap(args.budget_rps, 10.0) / 10.0 * args.slot)
    rate = turns / args.slot
    seconds = args.days * DAY
    sent: list[np.ndarray] = []
    rates = None
    slots = int(seconds // args.slot)
    for s in range(slots):
        now = t0 + s * args.slot
        cut = int(np.searchsorted(c.published, now, side="right"))
        if s % int(DAY // args.slot) == 0:
            rates = measured_rates(c, st, cut) if policy_name == "ours" else None
            if s:  # daily, after the warm start
                coverage_snapshot(c, st, now, cut)
        rel = s * args.slot
        lo, hi = np.searchsorted(scrape_times, [rel, rel + args.slot])
        listing_at = scrape_times[lo:hi] - rel
        # each scrape request takes the first turn at or after its time not taken by the one before
        first = np.ceil(listing_at * rate - 1e-9).astype(int) - np.arange(len(listing_at))
        taken = np.minimum(np.maximum.accumulate(first) + np.arange(len(listing_at)), turns - 1)
        taken = np.unique(taken)
        free = np.setdiff1d(np.arange(turns), taken)
        capacity = float(len(free))
        if policy_name == "ours":
            cand = Candidates(
                news_id=np.arange(cut),
                published=c.published[:cut],
                last_checked=st.last_checked[:cut],
                last_changed=st.last_changed[:cut],
                page_modified=st.page_modified[:cut],
                agency_rate=rates[c.agency[:cut]],
                cheap=st.cheap[:cut],
                image_checked=st.image_checked[:cut],
                has_image=c.has_image[:cut],
                urgent=np.zeros(cut, dtype=bool),
            )
            plan = choose(cand, now, capacity, bp)
            idx, image = plan.index, plan.image
        else:
            due_at = st.last_checked[:cut] + fixed_intervals(now - c.published[:cut])
            due = np.flatnonzero(due_at <= now)
            per_check = 2  # content + image, as the tier runs check
            take = int(capacity // per_check)
            if take <= 0:
                due = due[:0]
            elif len(due) > take:
                part = np.argpartition(due_at[due], take - 1)[:take]
                due = due[part]
            idx = due[np.argsort(due_at[due], kind="stable")]
            image = c.has_image[idx].copy()
        cost = 1 + image.astype(int)
        used = int(cost.sum())
        sent.append(rel + np.concatenate([taken, free[:used]]) / rate)
        if not len(idx):
            continue
        before = np.concatenate([[0], np.cumsum(cost)[:-1]]).astype(int)
        times = now + free[before] / rate
        check(c, st, idx.astype(np.int64), times, image)
    end = t0 + slots * args.slot
    cut = int(np.searchsorted(c.published, end, side="right"))
    coverage_snapshot(c, st, end, cut)
    st.max_gap[:cut] = np.maximum(st.max_gap[:cut], end - st.last_checked[:cut])
    # edits in the window still undetected: their delay so far (a lower bound)
    pending = []
    for i in range(cut):
        p, e = st.next_edit[i], c.edit_start[i + 1]
        while p < e and c.edit_time[p] <= end:
            pending.append((p, end - c.edit_time[p]))
            p += 1
    st.pending = pending
    return st, np.sort(np.concatenate(sent)) if sent else np.zeros(0)


def delay_table(c, st, t0):
    rows = st.delays + st.pending
    if not rows:
        return np.zeros(0, dtype=int), np.zeros(0), np.zeros(0)
    p = np.array([r[0] for r in rows])
    d = np.array([r[1] for r in rows])
    keep = c.edit_time[p] >= t0  # edits made during the simulated window
    p, d = p[keep], d[keep]
    age = c.edit_time[p] - c.published[c.edit_article[p]]
    return p, d, age


def pct(values, q):
    return float(np.percentile(values, q)) if len(values) else float("nan")


def fmt_delay(s: float) -> str:
    if math.isnan(s):
        return "-"
    if s < 2 * HOUR:
        return f"{s / 60:.1f}m"
    if s < 2 * DAY:
        return f"{s / HOUR:.1f}h"
    return f"{s / DAY:.1f}d"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--articles", type=int, default=300_000, help="articles over 5 years (default 300000)")
    ap.add_argument("--budget-rps", type=float, default=2.0, help="requests/s to the host, in total")
    ap.add_argument("--days", type=float, default=30.0, help="simulated days (default 30)")
    ap.add_argument("--slot", type=float, default=600.0, help="seconds per integrity run (default 600)")
    ap.add_argument("--agencies-listing", type=int, default=160, help="agencies whose listing is read")
    ap.add_argument(
        "--publication-data",
        type=Path,
        default=None,
        help="estimate the publication model from these real articles (default: the stored estimate)",
    )
    ap.add_argument("--latency", type=float, default=10.0, help="dispatch tick -> listing request, seconds")
    ap.add_argument("--warm-days", type=float, default=7.0, help="initial last checks within these days")
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument(
        "--seeds", type=int, default=5, help="publication draws the scraping is measured on (default 5)"
    )
    ap.add_argument("--skip-fixed", action="store_true", help="only our policy (no ratio)")
    ap.add_argument(
        "--chart",
        type=Path,
        default=None,
        metavar="DIR",
        help="also write the charts scale-freshness and scale-edit-detection (SVG + JSON) into DIR",
    )
    args = ap.parse_args(argv)
    keep_temporaries_in_the_heap()
    started = time.monotonic()
    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    corpus = SyntheticCorpus(args.articles, 5.0, end=t0, extra_days=args.days, seed=args.seed)
    info = corpus.summary()
    T0 = t0.timestamp()
    fresh = scraping(corpus, info, args, T0)
    # integrity's articles: the corpus, with the listed agencies' articles of the fit and measured
    # periods those of the integrity seed's draw, so their edits follow office hours and bursts
    since, times, who = fresh["draw"]
    corpus = SyntheticCorpus(
        args.articles, 5.0, end=t0, extra_days=args.days, seed=args.seed, recent=(since, times, who)
    )
    info = corpus.summary()
    print(
        f"corpus: {info['articles']} articles ({args.articles} over 5 years + {args.days:g} days of new"
        " ones),"
        f" {info['agencies']} agencies, {info['edits']} edits, ~{info['per_day_last_30d']} new/day;"
        f" the listed agencies' articles from {fresh['fit_days']:g} days before the start are seed"
        f" {fresh['integrity_seed']}'s draw"
    )
    scrape_times = fresh["learnt"].requests - T0
    listing_rps = len(scrape_times) / (args.days * DAY)
    print(
        f"budget: {args.budget_rps:g} req/s = scrapes {listing_rps:.3f} req/s (mean: listings and new"
        f" articles, learnt cadence) + integrity the rest; slot {args.slot:g} s"
    )
    results = {}
    for name in ("ours",) + (() if args.skip_fixed else ("fixed",)):
        t = time.monotonic()
        st, sent = simulate(corpus, name, args, T0, args.seed + 1, scrape_times)
        # the most requests in any 10 s window [x, x + 10): windows starting at a request
        in_window = np.searchsorted(sent, sent + 10.0 - 1e-6, side="left") - np.arange(len(sent))
        p, d, age = delay_table(corpus, st, T0)
        results[name] = (st, float(in_window.max()) / 10.0 if len(sent) else 0.0, d, age)
        print(
            f"{name}: {st.checks} checks, {st.requests} integrity requests, {len(d)} edits in the window"
            f" ({len(st.pending)} still undetected at the end), {time.monotonic() - t:.0f} s"
        )
    head = f"{'band':<14}" + "".join(
        f" {pol + ' ' + col:>16}" for pol in results for col in ("p50", "p95", "coverage")
    )
    print("")
    print("edit -> detection delay and coverage (mean of daily snapshots) per article-age band:")
    print(head)
    print("-" * len(head))
    for b in AGE_BANDS:
        lo = b.min_age.total_seconds()
        hi = np.inf if b.max_age is None else b.max_age.total_seconds()
        cells = []
        for _name, (st, _, d, age) in results.items():
            sel = d[(age >= lo) & (age < hi)]
            cov = st.coverage.get(b.name) or []
            cov_text = f"{100 * np.mean(cov):.1f}%" if cov else "-"
            cells += [fmt_delay(pct(sel, 50)), fmt_delay(pct(sel, 95)), cov_text]
        print(f"{b.label:<14}" + "".join(f" {x:>16}" for x in cells))
    st, max_rps, d, age = results["ours"]

    def p95(lo, hi):
        return pct(d[(age >= lo) & (age < hi)], 95)

    p3h = p95(0, 3 * HOUR) / 60
    p2d = p95(0, 2 * DAY) / 60
    p30 = p95(3 * DAY, 30 * DAY) / HOUR
    # the same for the edits made in office hours (weekdays 9h-18h in Brasília, holidays excepted)
    p_idx = delay_table(corpus, st, T0)[0]
    office = office_hours(corpus.edit_time[p_idx]) if len(p_idx) else np.zeros(0, dtype=bool)

    def p95_office(lo, hi):
        return pct(d[(age >= lo) & (age < hi) & office], 95)

    o3h = p95_office(0, 3 * HOUR) / 60
    o2d = p95_office(0, 2 * DAY) / 60
    o30 = p95_office(3 * DAY, 30 * DAY) / HOUR
    ours_mean = float(d.mean()) if len(d) else float("nan")
    print("")
    for name, (s, mr, dd, _) in results.items():
        print(
            f"{name}: max_rps={mr:.2f} mean_delay={fmt_delay(float(dd.mean()) if len(dd) else math.nan)}"
            f" max_unchecked={s.max_gap.max() / DAY:.1f}d"
        )
    ratio = float("nan")
    if "fixed" in results and len(results["fixed"][2]):
        ratio = ours_mean / float(results["fixed"][2].mean())
    print(f"elapsed: {time.monotonic() - started:.0f} s")
    if args.chart:  # after the measured time, before the last two lines (they stay last)
        write_charts(args, sys.argv[1:] if argv is None else argv, fresh, results)
    print(
        f"scale: max_rps={max(r[1] for r in results.values()):.2f} p95_delay_3h_min={p3h:.1f}"
        f" p95_delay_2d_min={p2d:.1f} p95_delay_30d_h={p30:.1f}"
        f" max_unchecked_days={st.max_gap.max() / DAY:.1f} mean_delay_vs_fixed={ratio:.3f}"
        f" office_p95_delay_3h_min={o3h:.1f} office_p95_delay_2d_min={o2d:.1f}"
        f" office_p95_delay_30d_h={o30:.1f}"
    )
    print(freshness_line(fresh["seeds"]))
    return 0


def office_hours(ts: np.ndarray) -> np.ndarray:
    """Whether each epoch time is in office hours: a weekday, not a holiday, 9h-18h in Brasília."""
    from dgb_dev.mirror.publication import BRT_OFFSET_S, holidays

    local = ts + BRT_OFFSET_S
    hour = (local % DAY) // HOUR
    days = np.floor(local / DAY).astype(np.int64)
    weekday = (days + 3) % 7  # 1970-01-01 was a Thursday
    off = {d for y in (2025, 2026, 2027) for d in holidays(y)}
    epoch = datetime(1970, 1, 1).date()
    is_off = np.array([(epoch + timedelta(days=int(x))) in off for x in days], dtype=bool)
    return (weekday < 5) & (hour >= 9) & (hour < 18) & ~is_off


def spread(values: list[float]) -> str:
    return f"{min(values):.0f}-{max(values):.0f}"


def freshness_line(seeds: list[dict]) -> str:
    """The last line: medians over the seeds' measured periods, and their spread (min-max)."""

    def med(key: str) -> float:
        return float(np.median([x[key] for x in seeds]))

    keys = ("p50", "p95", "office_p50", "office_p95", "listing", "fixed_listing")
    m = {k: med(k) for k in keys}
    return (
        f"freshness: p50_s={m['p50']:.0f} p95_s={m['p95']:.0f}"
        f" listing_requests_per_day={m['listing']:.0f}"
        f" fixed_cadence_listing_requests_per_day={m['fixed_listing']:.0f}"
        f" seeds={len(seeds)} p50_s_range={spread([x['p50'] for x in seeds])}"
        f" p95_s_range={spread([x['p95'] for x in seeds])}"
        f" listing_requests_per_day_range={spread([x['listing'] for x in seeds])}"
        f" office_p50_s={m['office_p50']:.0f} office_p95_s={m['office_p95']:.0f}"
        f" office_p95_s_range={spread([x['office_p95'] for x in seeds])}"
        f" fixed_p95_s={med('fixed_p95'):.0f}"
    )


# the age bands of the ``scale:`` line: (label, lowest age, highest age) in seconds
SCALE_BANDS = (("< 3 h", 0.0, 3 * HOUR), ("< 2 d", 0.0, 2 * DAY), ("3-30 d", 3 * DAY, 30 * DAY))


def write_charts(args, argv: list[str], fresh: dict, results: dict) -> None:
    """``--chart DIR``: the freshness of both cadences and edit detection per age band of the
    policies run, from the lags and delays this run computed (:mod:`dgb_dev.benchcharts`)."""
    from dgb_dev import benchcharts, charts

    command = charts.command_line(__file__, argv)
    common = {"days": args.days, "budget_rps": args.budget_rps}

    def curve(values, label: str) -> dict:
        p50, p95 = pct(values, 50), pct(values, 95)
        return benchcharts.cdf(values) | {
            "label": label,
            "p50": None if math.isnan(p50) else round(p50, 1),
            "p95": None if math.isnan(p95) else round(p95, 1),
        }

    labels = {"learnt": "learnt cadence", "fixed": "fixed, every 10 min"}
    series = [curve(fresh[mode].lags, labels[mode]) for mode in ("learnt", "fixed")]
    data = common | {"agencies": args.agencies_listing, "series": series}
    for path in benchcharts.save(args.chart, "scale-freshness", "freshness", data, command):
        print(f"chart: {path}")
    policies = []
    for name, (_st, _rps, d, age) in results.items():
        bands = [curve(d[(age >= lo) & (age < hi)], label) for label, lo, hi in SCALE_BANDS]
        label = "ours (tiers.choose)" if name == "ours" else "fixed tiers"
        policies.append({"name": name, "label": label, "bands": bands})
    bands = [{"label": label, "min_age_s": lo, "max_age_s": hi} for label, lo, hi in SCALE_BANDS]
    data = common | {"bands": bands, "policies": policies}
    for path in benchcharts.save(args.chart, "scale-edit-detection", "edit_detection", data, command):
        print(f"chart: {path}")


def scraping(corpus, info, args, t0: float) -> dict:
    """Publication -> scraped lag of the learnt cadence and of the fixed 10 minutes (scrapesim), on
    ``--seeds`` draws of the publication model: each cadence starts with the history of the fit
    period (the ``history_days`` before ``t0``) and is measured on the ``--days`` after it, which
    it never saw (drift, dormant agencies waking and the period's holidays included)."""
    model = (
        PublicationModel.from_data(args.publication_data)
        if args.publication_data
        else PublicationModel.load()
    )
    print("publication model (what each parameter rests on):")
    for line in model.describe():
        print(f"  {line}")
    keys = list(corpus.agencies[: args.agencies_listing])
    everyone = model.shares(list(corpus.agencies))
    per_day = info["per_day_last_30d"] * float(everyone[: len(keys)].sum())
    fit = CadencePolicy().history_days
    end = t0 + args.days * DAY
    seeds, draws, runs = [], [], []
    for seed, times, who, visible, _ in model.seeded_draws(
        keys, t0, fit, args.days, per_day, args.seed, args.seeds
    ):
        measured = (times >= t0) & (times < end)
        out = {}
        for mode in ("fixed", "learnt"):
            t = time.monotonic()
            r = out[mode] = simulate_scraping(
                keys,
                times,
                who,
                visible,
                t0,
                args.days,
                mode=mode,
                host_rps=args.budget_rps,
                latency_s=args.latency,
                seed=seed,
            )
            reasons = " ".join(f"{k}={v}" for k, v in sorted(r.reasons.items()))
            office = office_hours(r.published)
            print(
                f"scrape seed {seed} {mode}: {int(measured.sum())} articles published in the measured"
                f" period ({int(office.sum())} in office hours), lag p50 {pct(r.lags, 50):.0f} s p95"
                f" {pct(r.lags, 95):.0f} s max {r.lags.max() if len(r.lags) else 0:.0f} s, office hours"
                f" p95 {pct(r.lags[office], 95):.0f} s; {r.listing_per_day:.0f} listing requests/day"
                f" ({r.retries / args.days:.0f} retried 429/503 a day), {len(r.requests) / args.days:.0f}"
                " scrape requests/day,"
                f" {r.dag_runs_per_hour:.0f} DAG runs/h"
                + (f"; polls by reason {reasons}" if reasons else "")
                + (f"; target {np.median(r.targets):.0f} s (median of the plans)" if r.targets else "")
                + f", {time.monotonic() - t:.0f} s"
            )
        learnt, fixed = out["learnt"], out["fixed"]
        office = office_hours(learnt.published)
        seeds.append(
            {
                "seed": seed,
                "p50": pct(learnt.lags, 50),
                "p95": pct(learnt.lags, 95),
                "office_p50": pct(learnt.lags[office], 50),
                "office_p95": pct(learnt.lags[office], 95),
                "listing": learnt.listing_per_day,
                "fixed_listing": fixed.listing_per_day,
                "fixed_p95": pct(fixed.lags, 95),
            }
        )
        draws.append((t0 - fit * DAY, times, who))
        runs.append(out)
    # integrity runs once: against the scrape traffic of the seed whose p95 is the median
    middle = sorted(range(len(seeds)), key=lambda i: seeds[i]["p95"])[len(seeds) // 2]
    return {
        "learnt": runs[middle]["learnt"],
        "fixed": runs[middle]["fixed"],
        "seeds": seeds,
        "draw": draws[middle],
        "integrity_seed": seeds[middle]["seed"],
        "fit_days": fit,
    }


if __name__ == "__main__":
    sys.exit(main())
