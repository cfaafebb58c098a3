"""When gov.br agencies publish: a publication model estimated from real articles (issues 27 and 36).

``scripts/bench_scale.py`` simulates scraping on it. Estimated by :func:`estimate` from the real
gov.br articles of ``../shared/data/classifier-dev`` (``real``, ``weak``, ``labelled``: whole
articles of December 2025-March 2026 with ``agency`` and ``published_at``; excerpts and repeats by
title dropped; ``archive.jsonl`` left out: four agencies only, and most of its times are a date
alone). The sample is thin (438 articles, about 1% of what gov.br published then, on 59 days), so
each parameter says what it rests on (``basis``), and what the data cannot say is an assumption,
marked as one:

* **who**: each agency's share of articles is its count in the sample plus ``pseudo`` (0.5), so an
  agency of the catalogue that the sample missed still publishes, rarely;
* **when**: the share of a weekday's articles in each hour of the day (Brasília time; a time of
  exactly 00:00:00 is taken for a date alone and left out of the hours), with a small floor for
  the night hours the sample left empty; the weekend's rate per day as a fraction of a weekday's
  (``weekend_factor``); a national holiday's as a fraction of a weekday's (``holiday_factor``: the
  holidays on days the sample covers, i.e. with articles within 3 days on
  both sides, with half an article added to their count);
* **per agency**: each agency's office hours are the group's shifted by a normal number of hours
  (``shift_sd``: how much more the agencies' mean publication hours vary than sampling alone would
  make them, over agencies with 5 weekday articles or more); its rate changes between one period
  and the next by a log-normal factor (``drift_sd``: how much more the agencies' split of articles
  between the sample's two halves varies than a binomial would);
* **bursts**: articles come in bursts of ``1 + geometric`` articles (``burst_extra`` more on
  average) within ``burst_span_s``: estimated from how many more same-agency pairs within 10
  minutes the sample holds than the same counts at shuffled times would, scaled by the sample's
  share of all articles (at ``per_day`` a day, an assumption); the span is assumed;
* **office hours held** (:meth:`PublicationModel.office_hours`, ``bench_realtime.py --profile
  office``): the agencies' shares and bursts above, at a steady rate of a busy weekday hour chosen
  by the caller, so that any 60 minutes hold at least a given number of articles;
* **dormant agencies** (assumed: ``dormant_share`` of the agencies publish nothing until a day of the
  measured period, then at their rate) and the **listing's lag** (assumed: an article is listed a
  log-normal ``lag_median_s`` x e^(``lag_sigma`` N(0,1)) seconds after its publication time).

The estimate is stored in ``publication_model.json`` beside this module (what the benchmark reads,
so it runs without the data); ``python -m dgb_dev.mirror.publication DIR`` estimates it again.
:meth:`PublicationModel.generate` draws publication times per agency as bursts arriving as a
Poisson process whose rate, per hour, is the daily volume x the day's factor x the agency's hour
share; :meth:`PublicationModel.draw` makes the same draws and also returns that rate (the
:class:`Intensity`, for ``scripts/cadence_bound.py``).
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np

MODEL_FILE = Path(__file__).with_name("publication_model.json")
SOURCES = ("real.jsonl", "weak.jsonl", "labelled.jsonl")
BRT_OFFSET_S = -3 * 3600.0
DAY = 86400.0
ASSUMED_PER_DAY = 490.0  # gov.br's articles a day (the synthetic corpus's final rate): an assumption
CLOSE_S = 600.0  # "a burst": two articles of one agency within this
OFFICE_MEAN_OVER_FLOOR = 1.5  # office_hours: the mean rate over the floor any 60 minutes must hold
OFFICE_DRAWS = 100  # office_hours: draws tried before giving up


def _easter(year: int) -> date:
    """Gregorian Easter Sunday (the anonymous algorithm)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = b // 4, b % 4
    g = (8 * b + 13) // 25
    h = (19 * a + b - d - g + 15) % 30
    i, k = c // 4, c % 4
    l_ = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * l_) // 451
    month, day = divmod(h + l_ - 7 * m + 114, 31)
    return date(year, month, day + 1)


def holidays(year: int) -> set[date]:
    """Brazil's national holidays, and the federal Carnival Monday and Tuesday, in ``year``."""
    fixed = [(1, 1), (4, 21), (5, 1), (9, 7), (10, 12), (11, 2), (11, 15), (11, 20), (12, 25)]
    easter = _easter(year)
    moving = [easter - timedelta(days=48), easter - timedelta(days=47), easter - timedelta(days=2)]
    return {date(year, m, d) for m, d in fixed} | set(moving) | {easter + timedelta(days=60)}


def _local(ts: float) -> datetime:
    return datetime.fromtimestamp(ts + BRT_OFFSET_S, UTC)


def _read(data_dir: Path) -> list[tuple[str, float]]:
    seen: dict[str, tuple[str, float]] = {}
    for name in SOURCES:
        for line in (data_dir / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row.get("excerpt") or not row.get("published_at") or not row.get("agency"):
                continue
            seen.setdefault(
                row["title"], (row["agency"], datetime.fromisoformat(row["published_at"]).timestamp())
            )
    return sorted(seen.values(), key=lambda r: r[1])


def _days(stamps) -> int:
    return len({b.date() for b in stamps})


def _close_pairs(by_agency: dict[str, list[float]]) -> int:
    return sum(int(np.sum(np.diff(np.sort(t)) <= CLOSE_S)) for t in by_agency.values())


def estimate(data_dir: Path, pseudo: float = 0.5, night_floor: float = 0.002, seed: int = 36) -> dict:
    """The model's parameters from the real articles in ``data_dir`` (see the module docstring)."""
    rows = _read(Path(data_dir))
    agencies = Counter(a for a, _ in rows)
    brt = [(a, _local(t), t) for a, t in rows]
    # a time of exactly 00:00:00 is a date without a time: counted for the day, not for the hour
    timed = [b for _, b, _ in brt if (b.hour, b.minute, b.second) != (0, 0, 0)]
    weekday = [b for b in timed if b.weekday() < 5]
    all_days = [b for _, b, _ in brt]
    weekend = sum(1 for _, b, _ in brt if b.weekday() >= 5)
    weekdays_all = len(brt) - weekend
    hours = np.bincount([b.hour for b in weekday], minlength=24).astype(float)
    shares = np.maximum(hours / hours.sum(), night_floor)
    shares /= shares.sum()
    per_day = Counter(b.date() for _, b, _ in brt)
    first, last = min(per_day), max(per_day)
    covered = [
        first + timedelta(days=i)
        for i in range((last - first).days + 1)
        if any(per_day.get(first + timedelta(days=i - j)) for j in (1, 2, 3))
        and any(per_day.get(first + timedelta(days=i + j)) for j in (1, 2, 3))
    ]
    hol = set().union(*(holidays(y) for y in range(first.year, last.year + 1)))
    work = [d for d in covered if d.weekday() < 5 and d not in hol]
    off = [d for d in covered if d.weekday() < 5 and d in hol]
    work_mean = sum(per_day.get(d, 0) for d in work) / max(1, len(work))
    off_n = sum(per_day.get(d, 0) for d in off)
    # half an article added to the holidays' count: none seen on two days is not "never"
    holiday_factor = ((off_n + 0.5) / len(off)) / work_mean if off and work_mean else 0.1
    # per agency: spread of the mean weekday hour beyond sampling
    hour_of = defaultdict(list)
    for a, b, _ in brt:
        if b.weekday() < 5 and (b.hour, b.minute, b.second) != (0, 0, 0):
            hour_of[a].append(b.hour + b.minute / 60)
    all_hours = np.array([h for v in hour_of.values() for h in v])
    means = [(np.mean(v), len(v)) for v in hour_of.values() if len(v) >= 5]
    shifted = {a for a, v in hour_of.items() if len(v) >= 5}
    excess = np.var([m for m, _ in means], ddof=1) - np.mean([all_hours.var() / n for _, n in means])
    shift_sd = float(math.sqrt(max(0.0, excess)))
    # drift: the split of each agency's articles between the two halves of the sample
    times = sorted(t for _, t in rows)
    mid = times[len(times) // 2]
    f = sum(1 for t in times if t < mid) / len(times)
    by_agency = defaultdict(list)
    for a, t in rows:
        by_agency[a].append(t)
    split = [(sum(1 for t in v if t < mid), len(v)) for v in by_agency.values() if len(v) >= 5]
    drifted = {a for a, v in by_agency.items() if len(v) >= 5}
    x2 = sum((x - n * f) ** 2 / (n * f * (1 - f)) for x, n in split) / len(split)
    mean_n = sum(n for _, n in split) / len(split)
    var_share = max(0.0, (x2 - 1) * f * (1 - f) / mean_n)  # of each agency's share in the first half
    drift_sd = float(math.sqrt(var_share) / (f * (1 - f)))  # delta method: log-ratio of its rates
    # bursts: same-agency pairs within CLOSE_S, against the same counts at shuffled times
    rng = np.random.default_rng(seed)
    pool = np.array([t for _, t in rows])
    observed = _close_pairs(by_agency)
    shuffled = []
    for _ in range(200):
        perm = rng.permutation(pool)
        i, fake = 0, {}
        for a, v in by_agency.items():
            fake[a], i = perm[i : i + len(v)], i + len(v)
        shuffled.append(_close_pairs(fake))
    expected = float(np.mean(shuffled))
    days_span = (last - first).days + 1
    sampled = len(rows) / (days_span * ASSUMED_PER_DAY)  # the sample's share of all articles
    # a burst of M articles holds E[M(M-1)/2]/E[M] pairs per article: e for a geometric extra of
    # mean e; the sample keeps an article with probability `sampled`, a pair with its square
    burst_extra = max(0.0, observed - expected) / (len(rows) * sampled)
    return {
        "source": "../shared/data/classifier-dev/{" + ",".join(SOURCES) + "}",
        "articles": len(rows),
        "agency_counts": dict(sorted(agencies.items())),
        "pseudo": pseudo,
        "hour_share": [round(float(x), 5) for x in shares],
        "weekend_factor": round((weekend / 2) / (weekdays_all / 5), 4),
        "holiday_factor": round(holiday_factor, 4),
        "shift_sd": round(shift_sd, 4),
        "drift_sd": round(drift_sd, 4),
        "burst_extra": round(burst_extra, 4),
        "basis": {
            "agency_counts": f"{len(rows)} articles on {len(per_day)} days ({first} to {last})",
            "hour_share": f"{len(weekday)} weekday articles on {_days(weekday)} days",
            "weekend_factor": f"{weekend} weekend articles on {_days(x for x in all_days if x.weekday() > 4)}"
            f" days, {weekdays_all} weekday articles on {_days(x for x in all_days if x.weekday() < 5)} days",
            "holiday_factor": f"{off_n} articles on {len(off)} holidays ({', '.join(map(str, sorted(off)))})"
            f" against {sum(per_day.get(d, 0) for d in work)} on {len(work)} working days",
            "shift_sd": f"{len(means)} agencies with 5+ weekday articles"
            f" ({sum(n for _, n in means)} articles on"
            f" {_days(b for a, b, _ in brt if a in shifted and b.weekday() < 5)} days)",
            "drift_sd": f"{len(split)} agencies with 5+ articles ({sum(n for _, n in split)} articles on"
            f" {_days(b for a, b, _ in brt if a in drifted)} days), halves split at {_local(mid).date()}",
            "burst_extra": f"{observed} same-agency pairs within {CLOSE_S:.0f} s against {expected:.1f} at"
            f" shuffled times, {len(rows)} articles on {len(per_day)} days; the sample taken as"
            f" {100 * sampled:.2f}% of"
            f" {ASSUMED_PER_DAY:.0f} a day (assumed)",
        },
    }


@dataclass(frozen=True)
class Intensity:
    """What one draw of :meth:`PublicationModel.draw` came from, agency by agency: the expected
    bursts starting in each hour from ``start`` (Poisson, spread evenly over the hour; after the
    agency's drift), the time its articles start to count (a dormant agency's waking; -inf for the
    others), and the bursts' shape: ``burst_extra`` more articles on average, each uniformly within
    ``burst_span_s`` after the burst's first. Nothing counts from ``end`` on. The expected articles a
    second follow from it (``scripts/cadence_bound.py``), not from the articles drawn."""

    start: float
    end: float
    bursts_per_hour: np.ndarray  # (agencies, hours)
    wake: np.ndarray  # (agencies,) epoch s
    burst_extra: float
    burst_span_s: float


@dataclass
class PublicationModel:
    agency_counts: dict[str, float]
    pseudo: float
    hour_share: list[float]
    weekend_factor: float
    holiday_factor: float = 1.0
    shift_sd: float = 0.0
    drift_sd: float = 0.0
    burst_extra: float = 0.0
    basis: dict[str, str] = field(default_factory=dict)
    # assumptions, not estimates (the data cannot say)
    burst_span_s: float = 300.0
    dormant_share: float = 0.05
    lag_median_s: float = 10.0
    lag_sigma: float = 0.8

    @classmethod
    def load(cls, path: Path = MODEL_FILE) -> PublicationModel:
        return cls.of(json.loads(Path(path).read_text(encoding="utf-8")))

    @classmethod
    def from_data(cls, data_dir: Path) -> PublicationModel:
        return cls.of(estimate(Path(data_dir)))

    @classmethod
    def of(cls, raw: dict) -> PublicationModel:
        keys = ("holiday_factor", "shift_sd", "drift_sd", "burst_extra", "basis")
        return cls(
            raw["agency_counts"],
            raw["pseudo"],
            raw["hour_share"],
            raw["weekend_factor"],
            **{k: raw[k] for k in keys if k in raw},
        )

    def describe(self) -> list[str]:
        """Each parameter, its value and what it rests on (estimated) or that it is assumed."""
        est = ("agency_counts", "hour_share", "weekend_factor", "holiday_factor", "shift_sd", "drift_sd")
        value = {
            "agency_counts": f"{len(self.agency_counts)} agencies",
            "hour_share": f"{100 * sum(self.hour_share[9:18]):.0f}% of a weekday's in 9h-18h",
            "weekend_factor": f"{self.weekend_factor:g}",
            "holiday_factor": f"{self.holiday_factor:g}",
            "shift_sd": f"{self.shift_sd:g} h",
            "drift_sd": f"{self.drift_sd:g}",
            "burst_extra": f"{self.burst_extra:g}",
        }
        out = [f"{k}={value[k]} (on {self.basis.get(k, '?')})" for k in (*est, "burst_extra")]
        out.append(
            f"assumed: burst_span_s={self.burst_span_s:g} dormant_share={self.dormant_share:g}"
            f" lag_median_s={self.lag_median_s:g} lag_sigma={self.lag_sigma:g}"
        )
        return out

    def shares(self, agencies: list[str]) -> np.ndarray:
        """Each of ``agencies``' share of all articles (agencies outside the list are left out)."""
        w = np.array([self.agency_counts.get(a, 0.0) + self.pseudo for a in agencies])
        return w / w.sum()

    def day_factor(self, day: date) -> float:
        """A day's rate against the mean day (weekdays 1, weekends and holidays their factors)."""
        w = self.weekend_factor
        mean = (5 + 2 * w) / 7
        if day.weekday() >= 5:
            return w / mean
        return (self.holiday_factor if day in holidays(day.year) else 1.0) / mean

    def hourly_rate(self, start: float, hours: int, per_day: float, shift: float = 0.0) -> np.ndarray:
        """Expected articles in each hour from ``start`` (epoch s, on an hour) for ``per_day`` a day,
        the hours of the day shifted by ``shift`` hours."""
        share = np.array(self.hour_share)
        lo = math.floor(shift)
        frac = shift - lo
        shifted = (1 - frac) * np.roll(share, lo) + frac * np.roll(share, lo + 1)
        out = np.empty(hours)
        for i in range(hours):
            local = _local(start + i * 3600)
            out[i] = per_day * self.day_factor(local.date()) * shifted[local.hour]
        return out

    def generate(
        self,
        agencies: list[str],
        start: float,
        days: float,
        per_day: float,
        rng,
        *,
        measured_from: float | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Publication times (sorted epoch s) and agency indexes for ``days`` from ``start``. From
        ``measured_from`` on (default: never) each agency's rate drifts and the dormant agencies
        wake, each on a day of its own; before it they publish nothing."""
        times, who, _ = self.draw(agencies, start, days, per_day, rng, measured_from=measured_from)
        return times, who

    def draw(
        self,
        agencies: list[str],
        start: float,
        days: float,
        per_day: float,
        rng,
        *,
        measured_from: float | None = None,
    ) -> tuple[np.ndarray, np.ndarray, Intensity]:
        """:meth:`generate`'s times and agency indexes (the same draws from ``rng``), and the
        :class:`Intensity` they were drawn from."""
        hours = round(days * 24)
        shares = self.shares(agencies)
        base = self.hourly_rate(start, hours, 1.0)
        cache: dict[float, np.ndarray] = {}
        edges = start + np.arange(hours) * 3600.0
        end = start + hours * 3600.0
        times, who = [], []
        bursts = np.zeros((len(agencies), hours))
        wakes = np.full(len(agencies), -math.inf)
        dormant = rng.random(len(agencies)) < self.dormant_share
        for a in range(len(agencies)):
            shift = round(float(rng.normal(0.0, self.shift_sd)) * 4) / 4 if self.shift_sd else 0.0
            if shift not in cache:
                cache[shift] = self.hourly_rate(start, hours, 1.0, shift) if shift else base
            rate = cache[shift] * per_day * shares[a] / (1 + self.burst_extra)  # bursts an hour
            drift = math.exp(rng.normal(0.0, self.drift_sd) - self.drift_sd**2 / 2) if self.drift_sd else 1.0
            wake = -math.inf
            if measured_from is not None:
                rate = np.where(edges >= measured_from, rate * drift, rate)
                if dormant[a]:
                    wake = measured_from + rng.random() * (end - measured_from)
            bursts[a], wakes[a] = rate, wake
            n = rng.poisson(rate)
            first = np.repeat(edges, n) + rng.random(int(n.sum())) * 3600
            extra = np.zeros(len(first), dtype=int)
            if self.burst_extra:
                extra = rng.geometric(1 / (1 + self.burst_extra), len(first)) - 1
            at = np.repeat(first, 1 + extra)
            offsets = rng.random(len(at)) * self.burst_span_s
            if len(first):
                offsets[np.r_[0, np.cumsum(1 + extra)[:-1]].astype(int)] = 0.0  # each burst's first
            at = at + offsets
            at = at[(at >= wake) & (at < end)]
            times.append(at)
            who.append(np.full(len(at), a))
        t = np.concatenate(times) if times else np.zeros(0)
        w = np.concatenate(who) if who else np.zeros(0, dtype=int)
        order = np.argsort(t, kind="stable")
        return t[order], w[order], Intensity(start, end, bursts, wakes, self.burst_extra, self.burst_span_s)

    def seeded_draws(
        self,
        agencies: list[str],
        start: float,
        fit_days: float,
        days: float,
        per_day: float,
        seed: int,
        seeds: int,
    ):
        """bench_scale's draws, one per seed ``seed + 27 + 1000 k``: ``fit_days`` before ``start`` to
        fit on and ``days`` from it to measure on (drift and waking from ``start``), each article's
        listing time after its lag. Yields ``(seed, times, who, visible, intensity)``."""
        for k in range(seeds):
            s = seed + 27 + 1000 * k
            rng = np.random.default_rng(s)
            times, who, rate = self.draw(
                agencies, start - fit_days * 86400.0, fit_days + days, per_day, rng, measured_from=start
            )
            yield s, times, who, times + self.listing_lag(len(times), rng), rate

    def office_hours(
        self,
        agencies: list[str],
        start: float,
        hours: int,
        at_least: int,
        seed: int,
        window_s: float = 3600.0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Publication times and agency indexes for ``hours`` from ``start`` as a busy weekday held
        steady: :meth:`generate`'s agency shares and bursts, the hour-of-day, weekend and holiday
        factors set to 1, at a mean of ``OFFICE_MEAN_OVER_FLOOR`` x ``at_least`` articles an hour.
        Of the draws ``default_rng([seed, k])``, k = 0, 1, ..., the first in which every
        ``window_s`` within the span holds at least ``at_least`` articles (:func:`fewest_in_window`),
        so a run measured over any hour of it has that many: the same draw for the same seed."""
        if at_least <= 0 or hours <= 0:
            return np.zeros(0), np.zeros(0, dtype=int)
        flat = replace(self, hour_share=[1 / 24] * 24, weekend_factor=1.0, holiday_factor=1.0)
        end = start + hours * 3600.0
        per_day = 24 * OFFICE_MEAN_OVER_FLOOR * at_least
        for k in range(OFFICE_DRAWS):
            times, who = flat.generate(agencies, start, hours / 24, per_day, np.random.default_rng([seed, k]))
            if fewest_in_window(times, start, end, window_s) >= at_least:
                return times, who
        raise ValueError(f"office_hours: no draw of seed {seed} holds {at_least} in every {window_s:g} s")

    def listing_lag(self, n: int, rng) -> np.ndarray:
        """Seconds from publication until the listing shows each of ``n`` articles (assumed)."""
        return self.lag_median_s * np.exp(self.lag_sigma * rng.standard_normal(n))


def fewest_in_window(times: np.ndarray, lo: float, hi: float, window_s: float) -> int:
    """The fewest of ``times`` (sorted) in any window [x, x + ``window_s``) with lo <= x <= hi -
    ``window_s``: the count only drops when the window's start passes a time, so the candidates are
    the two ends and just past each time."""
    if hi - lo < window_s:
        raise ValueError(f"a window of {window_s:g} s does not fit in [{lo}, {hi}]")
    t = np.asarray(times, dtype=float)
    ends = np.array([lo, hi - window_s])
    counts = np.searchsorted(t, ends + window_s, "left") - np.searchsorted(t, ends, "left")
    past = t[(t >= lo) & (t < hi - window_s)]
    after = np.searchsorted(t, past + window_s, "right") - np.searchsorted(t, past, "right")
    return int(min(counts.min(), after.min() if len(after) else counts.min()))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    data_dir = Path(argv[0]) if argv else Path(__file__).resolve().parents[4] / "shared/data/classifier-dev"
    model = estimate(data_dir)
    MODEL_FILE.write_text(json.dumps(model, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{MODEL_FILE}: {model['articles']} articles, {len(model['agency_counts'])} agencies")
    for line in PublicationModel.of(model).describe():
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
