"""The trending formula (dgb.engagement.formula): production's ratio, its rounding and its zero."""

from __future__ import annotations

import pytest

from dgb.engagement.formula import EM_ALTA, trending_score


def test_ratio_of_the_day_to_the_daily_average_of_the_week():
    # 6 articles in the last day, 14 in the week: average 2 a day, the day is 3x the average
    assert trending_score(6, 14) == 3.0
    # a steady theme (the same every day) scores 1
    assert trending_score(3, 21) == 1.0
    # the day holds the whole week: the most a theme can score is 7
    assert trending_score(5, 5) == 7.0


def test_zero_when_the_weekly_average_is_zero():
    assert trending_score(0, 0) == 0.0
    assert trending_score(3, 0) == 0.0  # inconsistent counts still do not divide by zero


def test_three_decimals_rounded_half_away_from_zero():
    assert trending_score(1, 3) == 2.333  # 7/3 = 2.3333...
    assert trending_score(2, 3) == 4.667  # 14/3 = 4.6666...
    # 7/112 = 0.0625 exactly: half away from zero gives 0.063 (PostgreSQL's and BigQuery's round);
    # Python's round on the float rounds half to even: 0.062
    assert trending_score(1, 112) == 0.063
    assert round(7 / 112, 3) == 0.062
    assert trending_score(1, 7) == 1.0


def test_em_alta_threshold():
    # 3 in the day against 14 in the week: 1.5, the badge's threshold exactly
    assert trending_score(3, 14) == EM_ALTA
    assert trending_score(3, 15) < EM_ALTA


def test_negative_counts_are_an_error():
    with pytest.raises(ValueError, match="counts must be >= 0"):
        trending_score(-1, 3)
