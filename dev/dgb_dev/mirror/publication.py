"""When gov.br agencies publish: a publication model estimated from real articles (issue 27).

``scripts/bench_scale.py`` simulates scraping on it. Estimated by :func:`estimate` from the real
gov.br articles of ``../shared/data/classifier-dev`` (``real``, ``weak``, ``labelled``: whole
articles of January-March 2026 with ``agency`` and ``published_at``; excerpts and repeats by title
dropped; ``archive.jsonl`` left out: four agencies only, and most of its times are a date alone):

* **who**: each agency's share of articles is its count in the sample plus ``pseudo`` (0.5), so an
  agency of the catalogue that the sample missed still publishes, rarely;
* **when**: the share of a weekday's articles in each hour of the day (Brasília time), with a
  small floor for the night hours the sample left empty, and the weekend's rate per day as a
  fraction of a weekday's (``weekend_factor``).

The estimate is stored in ``publication_model.json`` beside this module (what the benchmark reads,
so it runs without the data); ``python -m dgb_dev.mirror.publication DIR`` estimates it again.
:meth:`PublicationModel.generate` draws publication times as a Poisson process whose rate, per hour,
is the daily volume × the day's factor × the hour's share, each article's agency drawn by share.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

MODEL_FILE = Path(__file__).with_name("publication_model.json")
SOURCES = ("real.jsonl", "weak.jsonl", "labelled.jsonl")
BRT_OFFSET_S = -3 * 3600.0
DAY = 86400.0


def estimate(data_dir: Path, pseudo: float = 0.5, night_floor: float = 0.002) -> dict:
    """The model's parameters from the real articles in ``data_dir`` (see the module docstring)."""
    seen: dict[str, tuple[str, datetime]] = {}
    for name in SOURCES:
        for line in (data_dir / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row.get("excerpt") or not row.get("published_at") or not row.get("agency"):
                continue
            stamp = datetime.fromisoformat(row["published_at"])
            seen.setdefault(row["title"], (row["agency"], stamp))
    agencies = Counter(a for a, _ in seen.values())
    # Brasília wall-clock hour and weekday (the data's offsets are all -03:00)
    brt = [datetime.fromtimestamp(s.timestamp() + BRT_OFFSET_S, UTC) for _, s in seen.values()]
    weekday = [b for b in brt if b.weekday() < 5]
    weekend = len(brt) - len(weekday)
    hours = np.bincount([b.hour for b in weekday], minlength=24).astype(float)
    shares = hours / hours.sum()
    shares = np.maximum(shares, night_floor)
    shares /= shares.sum()
    return {
        "source": "../shared/data/classifier-dev/{" + ",".join(SOURCES) + "}",
        "articles": len(seen),
        "agency_counts": dict(sorted(agencies.items())),
        "pseudo": pseudo,
        "hour_share": [round(float(x), 5) for x in shares],
        "weekend_factor": round((weekend / 2) / (len(weekday) / 5), 4),
    }


@dataclass
class PublicationModel:
    agency_counts: dict[str, float]
    pseudo: float
    hour_share: list[float]
    weekend_factor: float

    @classmethod
    def load(cls, path: Path = MODEL_FILE) -> PublicationModel:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls(raw["agency_counts"], raw["pseudo"], raw["hour_share"], raw["weekend_factor"])

    @classmethod
    def from_data(cls, data_dir: Path) -> PublicationModel:
        raw = estimate(Path(data_dir))
        return cls(raw["agency_counts"], raw["pseudo"], raw["hour_share"], raw["weekend_factor"])

    def shares(self, agencies: list[str]) -> np.ndarray:
        """Each of ``agencies``' share of all articles (agencies outside the list are left out)."""
        w = np.array([self.agency_counts.get(a, 0.0) + self.pseudo for a in agencies])
        return w / w.sum()

    def hourly_rate(self, start: float, hours: int, per_day: float) -> np.ndarray:
        """Expected articles in each hour from ``start`` (epoch s, on an hour) for ``per_day`` a day."""
        w = self.weekend_factor
        day_factor = {False: 7 / (5 + 2 * w), True: 7 * w / (5 + 2 * w)}
        out = np.empty(hours)
        for i in range(hours):
            local = datetime.fromtimestamp(start + i * 3600 + BRT_OFFSET_S, UTC)
            out[i] = per_day * day_factor[local.weekday() >= 5] * self.hour_share[local.hour]
        return out

    def generate(
        self, agencies: list[str], start: float, days: float, per_day: float, rng
    ) -> tuple[np.ndarray, np.ndarray]:
        """Publication times (sorted epoch s) and agency indexes for ``days`` from ``start``."""
        hours = round(days * 24)
        counts = rng.poisson(self.hourly_rate(start, hours, per_day))
        times = np.repeat(start + np.arange(hours) * 3600.0, counts) + rng.random(int(counts.sum())) * 3600
        times.sort()
        who = rng.choice(len(agencies), size=len(times), p=self.shares(agencies))
        return times, who


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    data_dir = Path(argv[0]) if argv else Path(__file__).resolve().parents[4] / "shared/data/classifier-dev"
    model = estimate(data_dir)
    MODEL_FILE.write_text(json.dumps(model, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{MODEL_FILE}: {model['articles']} articles, {len(model['agency_counts'])} agencies")
    return 0


if __name__ == "__main__":
    sys.exit(main())
