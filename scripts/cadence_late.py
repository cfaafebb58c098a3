#!/usr/bin/env python
"""Where are the learnt cadence's late articles? A diagnostic on bench_scale's draws (issue 36).

``scripts/bench_scale.py`` reports the learnt cadence's publication -> scraped p50 and p95; this
script says which articles make the p95. It draws the publications as ``bench_scale.py`` does (the
publication model, the first ``--agencies`` agencies of the synthetic corpus at its final daily
volume, ``history_days`` to fit on and ``--days`` measured, seeds ``--seed + 27 + 1000 k``: the
default ``--seed 500`` gives the development seeds 527 and 1527, ``--seed 14`` bench_scale's
reported ones), scrapes them with ``scripts/scrapesim.py``'s learnt cadence and splits the
measured articles, and those later than ``--late`` (180 s), by:

* **followers**: published within ``--span`` (300 s, the model's burst span) after another article
  of the same agency, against the first (or lone) ones;
* **office hours** (weekdays 9h-18h in Brasília, holidays excepted) against nights, weekends and
  holidays;
* **a find nearby**: whether a scrape run of the agency stored another article between ``--span``
  before the article's publication and 60 s after it (before its own), from the simulation's own
  stored times. Only those could be caught by polling again after a find (follow-ups, built and
  measured at ``b903f17``, removed since: docs/benchmarks.md): the others were stored with or after
  the find that a follow-up would start from.

``--set key=value,...`` overrides :class:`dgb.scraper.cadence.CadencePolicy` fields (e.g.
``forecast_miss=0.05``), to compare rules on the same draws. One line per seed and split, then a
last line per seed::

    late: seed=<n> p50_s=<n> p95_s=<n> office_p95_s=<n> listing_requests_per_day=<n> late=<n> \
late_followers=<n> late_off_hours=<n> late_with_find_nearby=<n>

    .venv/bin/python scripts/cadence_late.py [--seed 500] [--seeds 2] [--days 30] [--set forecast_miss=0.05]
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from dgb.scraper.cadence import CadencePolicy
from dgb_dev.mirror.publication import PublicationModel
from dgb_dev.mirror.synthetic import SyntheticCorpus

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/ is not a package
from bench_scale import office_hours, pct
from scrapesim import simulate_scraping


def followers(times: np.ndarray, who: np.ndarray, span_s: float) -> np.ndarray:
    """Whether each article was published within ``span_s`` after another of its agency."""
    out = np.zeros(len(times), dtype=bool)
    for a in np.unique(who):
        idx = np.flatnonzero(who == a)
        idx = idx[np.argsort(times[idx], kind="stable")]
        out[idx[1:]] = np.diff(times[idx]) <= span_s
    return out


def find_nearby(
    published: np.ndarray, stored: np.ndarray, who: np.ndarray, before_s: float, after_s: float = 60.0
) -> np.ndarray:
    """Whether another article of the same agency was stored in ``[published - before_s, published
    + after_s]``, before the article itself: a find that polling again after it could have started from."""
    out = np.zeros(len(published), dtype=bool)
    for a in np.unique(who):
        idx = np.flatnonzero(who == a)
        st = np.sort(stored[idx])
        lo = np.searchsorted(st, published[idx] - before_s, side="left")
        hi_t = np.minimum(published[idx] + after_s, stored[idx] - 1e-6)  # strictly before its own
        hi = np.searchsorted(st, hi_t, side="right")
        out[idx] = hi > lo
    return out


def parse_overrides(text: str) -> dict[str, float]:
    out = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        key, _, value = item.partition("=")
        if key not in CadencePolicy.__dataclass_fields__ or not value:
            raise SystemExit(f"--set: {item!r} is not CadencePolicy field=value")
        out[key] = float(value)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--articles", type=int, default=300_000, help="the corpus's articles over 5 years")
    ap.add_argument("--agencies", type=int, default=160, help="agencies whose listing is read")
    ap.add_argument("--days", type=float, default=30.0, help="measured days (default 30)")
    ap.add_argument("--seed", type=int, default=500, help="seeds seed+27+1000k (default 500: 527, 1527)")
    ap.add_argument("--seeds", type=int, default=2, help="draws (default 2)")
    ap.add_argument("--budget-rps", type=float, default=2.0, help="requests/s to the host")
    ap.add_argument("--late", type=float, default=180.0, help="late: scraped later than this (s)")
    ap.add_argument("--span", type=float, default=300.0, help="a follower's distance to the previous (s)")
    ap.add_argument("--set", default="", metavar="K=V,...", help="CadencePolicy fields to override")
    args = ap.parse_args(argv)
    overrides = parse_overrides(args.set)
    policy = CadencePolicy(**overrides)
    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    corpus = SyntheticCorpus(args.articles, 5.0, end=t0, extra_days=args.days, seed=14)
    model = PublicationModel.load()
    keys = list(corpus.agencies[: args.agencies])
    share = float(model.shares(list(corpus.agencies))[: len(keys)].sum())
    per_day = corpus.summary()["per_day_last_30d"] * share
    start, fit = t0.timestamp(), policy.history_days
    print(
        f"policy overrides: {overrides or 'none'}; late: > {args.late:g} s; followers: within {args.span:g} s"
    )
    for seed, times, who, visible, _ in model.seeded_draws(
        keys, start, fit, args.days, per_day, args.seed, args.seeds
    ):
        began = time.monotonic()
        r = simulate_scraping(
            keys,
            times,
            who,
            visible,
            start,
            args.days,
            mode="learnt",
            host_rps=args.budget_rps,
            seed=seed,
            policy=policy,
        )
        index = {t: i for i, t in enumerate(times.tolist())}
        drawn = np.array([index[t] for t in r.published.tolist()], dtype=int)  # each lag's article
        ag = who[drawn]
        fol = followers(times, who, args.span)[drawn]
        office = office_hours(r.published)
        late = r.lags > args.late
        near = find_nearby(r.published, r.published + r.lags, ag, args.span)
        print(
            f"seed {seed}: {len(r.lags)} articles, {int(late.sum())} later than {args.late:g} s"
            f" ({late.mean():.1%}; a p95 within it allows {0.05 * len(r.lags):.0f}),"
            f" {time.monotonic() - began:.0f} s"
        )
        for name, sel in (
            ("followers", fol),
            ("first or lone", ~fol),
            ("office hours", office),
            ("nights, weekends, holidays", ~office),
            ("followers off hours", fol & ~office),
            ("with a find nearby", near),
        ):
            n, bad = int(sel.sum()), int((sel & late).sum())
            print(
                f"  {name:<27} {n:6d} articles ({n / max(1, len(sel)):.0%}), {bad:5d} late"
                f" ({bad / max(1, int(late.sum())):.0%} of the late, {bad / max(1, n):.1%} of them),"
                f" p95 {pct(r.lags[sel], 95):.0f} s"
            )
        print(
            f"late: seed={seed} p50_s={pct(r.lags, 50):.0f} p95_s={pct(r.lags, 95):.0f}"
            f" office_p95_s={pct(r.lags[office], 95):.0f} listing_requests_per_day={r.listing_per_day:.0f}"
            f" late={int(late.sum())} late_followers={int((late & fol).sum())}"
            f" late_off_hours={int((late & ~office).sum())} late_with_find_nearby={int((late & near).sum())}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
