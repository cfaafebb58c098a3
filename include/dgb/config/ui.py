"""Settings of the DGB pages in the Airflow UI (the integrity page and the pipeline view): read
here and nowhere else. Standard library only."""

from __future__ import annotations

from dgb.config import env_flag


def ui_require_auth() -> bool:
    """``DGB_UI_REQUIRE_AUTH`` (default on): the DGB pages require an authenticated Airflow user;
    only an explicit off (0/false/no/off) opens them."""
    return env_flag("DGB_UI_REQUIRE_AUTH", True)
