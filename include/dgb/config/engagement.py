"""Settings of the portal-engagement jobs (``DGB_TRENDING_*``, ``DGB_ENGAGEMENT_*``,
``DGB_UMAMI_*``): the trending scores and the Umami view-count import. Read here and nowhere
else. Standard library only: the DAG file (dags/engagement.py) reads the schedules at parse time.
"""

from __future__ import annotations

from dgb.config import env_number, env_str


def trending_minutes() -> int:
    """``DGB_TRENDING_MINUTES`` (default 10, an integer >= 1): the trending DAG's interval. A score
    that crosses the 24-hour line is set to 0 at most this long after it does."""
    return env_number("DGB_TRENDING_MINUTES", 10, integer=True, minimum=1)


def trending_min_day() -> int:
    """``DGB_TRENDING_MIN_DAY`` (default 5, an integer >= 1): a theme trends only with at least this
    many articles in the 24 hours; below it the score is 0 (one article in a quiet week would
    otherwise score 7.0, "Em alta"). ``scripts/eval_features.py`` prints why 5."""
    return env_number("DGB_TRENDING_MIN_DAY", 5, integer=True, minimum=1)


def engagement_max_drop() -> float:
    """``DGB_ENGAGEMENT_MAX_DROP`` (default 0.5, 0-1): the view-count import refuses to write when
    the source's total pageviews are below (1 - this) x the stored total (or zero while counts are
    stored): the old counts stay and the run fails with the reason. 1 turns the check off."""
    return env_number("DGB_ENGAGEMENT_MAX_DROP", 0.5, minimum=0.0, maximum=1.0)


def engagement_cron() -> str:
    """``DGB_ENGAGEMENT_CRON`` (default ``17 * * * *``, hourly): the Umami view-count import."""
    return env_str("DGB_ENGAGEMENT_CRON", "").strip() or "17 * * * *"


def engagement_days() -> int:
    """``DGB_ENGAGEMENT_DAYS`` (default 30, production's window): pageviews of this many days count."""
    return env_number("DGB_ENGAGEMENT_DAYS", 30, integer=True, minimum=1, maximum=3650)


def umami_website_ids() -> tuple[str, ...]:
    """``DGB_UMAMI_WEBSITE_ID``: the portal's Umami website id(s), comma-separated UUIDs. Unset
    (the default): every website of the Umami database counts, as production's query does."""
    raw = env_str("DGB_UMAMI_WEBSITE_ID", "")
    return tuple(part.strip() for part in raw.split(",") if part.strip())
