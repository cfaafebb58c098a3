"""The scrape DAGs' settings (``DGB_SCRAPE_*``): read here and nowhere else.

Standard library only: the scrape DAG specs (:mod:`dgb.scraper.dags`) read it at parse time.
"""

from __future__ import annotations

from dgb.config import env_flag, env_number, env_str, only_set


def scrape_agencies() -> str:
    """``DGB_SCRAPE_AGENCIES`` (default empty: the catalogue's choice): agency keys to scrape,
    comma-separated, or ``all``."""
    return env_str("DGB_SCRAPE_AGENCIES", "").strip()


def scrape_cadence_mode() -> str:
    """``DGB_SCRAPE_CADENCE`` (default ``learnt``): what starts the scrape DAGs. ``learnt``: the
    ``scrape_dispatcher`` DAG, from each agency's publication history (:mod:`dgb.scraper.cadence`);
    ``fixed``: every 10 minutes, staggered (the old cron schedule)."""
    mode = env_str("DGB_SCRAPE_CADENCE", "learnt").strip().lower()
    if mode not in ("learnt", "fixed"):
        raise ValueError(f"DGB_SCRAPE_CADENCE must be 'learnt' or 'fixed', got {mode!r}")
    return mode


def cadence_policy() -> dict:
    """``DGB_SCRAPE_FLOOR`` (s), ``DGB_SCRAPE_CEILING`` (s), ``DGB_SCRAPE_LISTING_SHARE`` (of the
    host's requests over the week, for listing polls), ``DGB_SCRAPE_PEAK_SHARE`` (of the host's
    requests/s, at most, in any hour), ``DGB_SCRAPE_TARGET`` (s, the p95 publication -> scraped the
    allocation aims at), ``DGB_SCRAPE_HISTORY_DAYS``: the ones set, as
    :class:`dgb.scraper.cadence.CadencePolicy` keyword arguments."""
    return only_set(
        floor_s=env_number("DGB_SCRAPE_FLOOR", None, minimum=10),
        ceiling_s=env_number("DGB_SCRAPE_CEILING", None, minimum=60),
        listing_share=env_number("DGB_SCRAPE_LISTING_SHARE", None, above=0, maximum=1),
        peak_share=env_number("DGB_SCRAPE_PEAK_SHARE", None, above=0, maximum=1),
        target_s=env_number("DGB_SCRAPE_TARGET", None, minimum=60),
        history_days=env_number("DGB_SCRAPE_HISTORY_DAYS", None, minimum=1),
    )


def conditional_policy() -> dict:
    """``DGB_SCRAPE_CONDITIONAL`` (default on): conditional listing polls (If-None-Match, else
    If-Modified-Since); ``DGB_SCRAPE_VALIDATOR_MAX_AGE`` (s) and ``DGB_SCRAPE_VALIDATOR_MAX_HITS``
    (304s in a row) after which a listing's validators are dropped and the listing fetched whole: the
    ones set, as :class:`dgb.scraper.conditional.ConditionalPolicy` keyword arguments."""
    return only_set(
        enabled=env_flag("DGB_SCRAPE_CONDITIONAL", True),
        max_age_s=env_number("DGB_SCRAPE_VALIDATOR_MAX_AGE", None, minimum=0),
        max_hits=env_number("DGB_SCRAPE_VALIDATOR_MAX_HITS", None, integer=True, minimum=0),
    )
