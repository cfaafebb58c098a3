"""The scrape DAGs' settings (``DGB_SCRAPE_*``): read here and nowhere else.

Standard library only: the scrape DAG specs (:mod:`dgb.scraper.dags`) read it at parse time.
"""

from __future__ import annotations

from dgb.config import env_str


def scrape_agencies() -> str:
    """``DGB_SCRAPE_AGENCIES`` (default empty: the catalogue's choice): agency keys to scrape,
    comma-separated, or ``all``."""
    return env_str("DGB_SCRAPE_AGENCIES", "").strip()
