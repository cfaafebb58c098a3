"""Each agency's expected articles in each hour of the week: an empirical Bayes forecast (issues 27
and 36), what :mod:`dgb.scraper.cadence` allocates the listing budget on.

Standard library only, pure. An agency's history (:class:`History`) is its article count in each of
the 168 hours of the week (Brasília time) over the last ``history_days`` (28). Its rate in hour
``h`` is the posterior mean of a gamma-Poisson model whose prior is fitted over all agencies
(:func:`fit_prior`):

* its volume (articles a week) has a gamma prior, shape ``a`` and rate ``b`` by the method of
  moments over the agencies' weekly counts (their spread minus the Poisson part), so its estimate
  is ``(a + n) / (b + weeks)``: a new or quiet agency (small ``n``) is pulled towards the group's
  mean, a busy one keeps its own;
* its share of the week in hour ``h`` has a Dirichlet prior around the group's week profile with a
  concentration ``k`` fitted from how much more the agencies' hour-of-day counts vary than the
  multinomial would (Pearson's statistic), so its profile is ``(count[h] + k * profile[h]) /
  (n + k)``: an agency with a few articles publishes as the group does, one with hundreds as itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

SLOTS = 168  # hours in a week
HOUR = 3600.0
DAY = 86400.0
BRT_OFFSET_S = -3 * HOUR  # Brasília time: UTC-3 all year (no daylight saving since 2019)


def hour_of_week(ts: float) -> int:
    """Hour of the week in Brasília time for epoch seconds ``ts``: Monday 00h = 0 ... Sunday 23h = 167."""
    local = ts + BRT_OFFSET_S
    days = math.floor(local / DAY)
    weekday = (days + 3) % 7  # 1970-01-01 was a Thursday
    return int(weekday * 24 + (local - days * DAY) // HOUR)


@dataclass
class History:
    """One agency's publication history: counts per hour of the week over ``days``, newest article."""

    counts: list[float] = field(default_factory=lambda: [0.0] * SLOTS)
    days: float = 28.0
    last_new: float | None = None  # epoch seconds of its newest article (published_at)

    @classmethod
    def from_times(cls, published: Iterable[float], now: float, days: float) -> History:
        """From publication times (epoch seconds): those in ``[now - days, now]`` are counted."""
        h = cls(days=days)
        start = now - days * DAY
        for ts in published:
            if ts <= now:
                h.last_new = ts if h.last_new is None else max(h.last_new, ts)
                if ts >= start:
                    h.counts[hour_of_week(ts)] += 1
        return h

    @property
    def total(self) -> float:
        return float(sum(self.counts))

    @property
    def weeks(self) -> float:
        return max(self.days / 7.0, 1e-9)


def week_profile(histories: Iterable[History]) -> list[float]:
    """Every agency's share of articles per hour of the week (sums to 1; uniform with no data).

    A small uniform part (1% of the week's total) keeps hours nobody published in above zero."""
    total = [0.0] * SLOTS
    for h in histories:
        for i, c in enumerate(h.counts):
            total[i] += c
    n = sum(total)
    if n <= 0:
        return [1.0 / SLOTS] * SLOTS
    smoothed = [c + 0.01 * n / SLOTS for c in total]
    s = sum(smoothed)
    return [c / s for c in smoothed]


@dataclass(frozen=True)
class Prior:
    """The empirical Bayes prior fitted over the agencies (see the module docstring): gamma
    ``shape``/``rate`` of the articles a week, Dirichlet ``concentration`` around ``profile``."""

    shape: float
    rate: float  # in weeks: the prior weighs as this many weeks of an agency's own data
    concentration: float  # in articles: the profile prior weighs as this many of its own articles
    profile: tuple[float, ...]
    agencies: int = 0

    @property
    def mean_per_week(self) -> float:
        return self.shape / self.rate

    def per_week(self, history: History) -> float:
        """Posterior mean of the agency's articles a week."""
        return (self.shape + history.total) / (self.rate + history.weeks)

    def rates(self, history: History) -> list[float]:
        """Posterior mean articles per hour in each hour of the week."""
        n, k = history.total, self.concentration
        volume = self.per_week(history)
        return [volume * (c + k * p) / (n + k) for c, p in zip(history.counts, self.profile, strict=True)]


def _hour_of_day(counts: Sequence[float]) -> list[float]:
    out = [0.0] * 24
    for slot, c in enumerate(counts):
        out[slot % 24] += c
    return out


def fit_prior(histories: Iterable[History]) -> Prior:
    """The prior from every agency's history: moments of the weekly counts for the gamma, the
    overdispersion of the hour-of-day counts around the group's for the Dirichlet (the
    concentration does not change when hours are pooled, so it is fitted on the 24 hours of the day,
    where counts are less sparse, and used on the 168 of the week)."""
    hs = list(histories)
    profile = tuple(week_profile(hs))
    if not hs:
        return Prior(1.0, 1.0, 1.0, profile, 0)
    per_week = [h.total / h.weeks for h in hs]
    mean = sum(per_week) / len(hs)
    if mean <= 0:
        return Prior(1e-3, 1.0, 1.0, profile, len(hs))
    spread = sum((x - mean) ** 2 for x in per_week) / max(1, len(hs) - 1)
    noise = sum(mean / h.weeks for h in hs) / len(hs)  # what Poisson counts alone would spread
    between = max(spread - noise, mean * mean * 1e-6)
    shape, rate = mean * mean / between, mean / between
    if rate > 1e6:  # no spread beyond Poisson: the group's mean for everyone
        shape, rate = mean * 1e6, 1e6
    day = _hour_of_day(profile)
    excess, pairs = 0.0, 0.0
    for h in hs:
        n = h.total
        if n < 2:
            continue
        x2 = sum(
            (c - n * p) ** 2 / (n * p) for c, p in zip(_hour_of_day(h.counts), day, strict=True) if p > 0
        )
        excess += x2 / 23.0 - 1.0
        pairs += n - 1
    inv = excess / pairs if pairs else 1.0  # ~ 1 / (concentration + 1)
    inv = min(max(inv, 1e-4), 1.0)
    concentration = max(0.5, 1.0 / inv - 1.0)
    return Prior(shape, rate, concentration, profile, len(hs))
