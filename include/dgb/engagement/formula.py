"""The trending formula, production's definition (data-platform's trending job), in Python.

For an article of level-1 theme T published at p::

    day  = T's articles published in [p - 24 h, p]      (the article itself included)
    week = T's articles published in [p - 7 days, p]
    trending_score = round(day / (week / 7), 3), or 0 when week / 7 is 0

and, ours: 0 when ``day`` is below a minimum (``DGB_TRENDING_MIN_DAY``, 5). Production's ratio
alone gives a theme with one article in the day and none before it 7.0, the "Em alta" badge; with
a handful of articles the ratio is noise. Why 5: for a theme publishing at a steady (Poisson)
rate, an article of an ordinary day earns the badge, without a minimum, 43% of the time at 1
article a day and 27% at 2; with 5 it is 0.6% and 6%; from 4 a day on the minimum changes nothing
(1.5x the average is already 6 or more). ``scripts/eval_features.py`` prints the table.

PostgreSQL computes it (:mod:`dgb.engagement.trending`); this is the definition its tests hold the
SQL to. Rounding is half away from zero, as PostgreSQL's ``round(numeric, 3)`` and BigQuery's
``ROUND`` do (Python's ``round`` on a float rounds half to even: 7/112 = 0.0625 gives 0.063 here,
0.062 there).
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

#: The portal's "Em alta" badge threshold (its sort is trending_score:desc).
EM_ALTA = 1.5
DAY_HOURS = 24
WEEK_DAYS = 7
MIN_DAY = 5  # the default of DGB_TRENDING_MIN_DAY


def trending_score(day_count: int, week_count: int, min_day: int = 1) -> float:
    """``day_count / (week_count / 7)`` rounded to 3 decimals (half away from zero); 0 when the
    daily average is 0 or ``day_count`` is below ``min_day`` (1: production's formula alone).
    Counts are of one theme's articles; negative counts are an error."""
    if day_count < 0 or week_count < 0:
        raise ValueError(f"counts must be >= 0, got day={day_count} week={week_count}")
    if week_count == 0 or day_count < min_day:
        return 0.0
    exact = Decimal(day_count) * WEEK_DAYS / Decimal(week_count)
    return float(exact.quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))
