"""The trending formula, production's definition (data-platform's trending job), in Python.

For an article of level-1 theme T published at p::

    day  = T's articles published in [p - 24 h, p]      (the article itself included)
    week = T's articles published in [p - 7 days, p]
    trending_score = round(day / (week / 7), 3), or 0 when week / 7 is 0

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


def trending_score(day_count: int, week_count: int) -> float:
    """``day_count / (week_count / 7)`` rounded to 3 decimals (half away from zero); 0 when the
    daily average is 0. Counts are of one theme's articles; negative counts are an error."""
    if day_count < 0 or week_count < 0:
        raise ValueError(f"counts must be >= 0, got day={day_count} week={week_count}")
    if week_count == 0:
        return 0.0
    exact = Decimal(day_count) * WEEK_DAYS / Decimal(week_count)
    return float(exact.quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))
