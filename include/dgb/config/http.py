"""The polite HTTP settings (``DGB_FETCH_*``, ``DGB_HOST_*``, ``DGB_INTEGRITY_ALLOWED_HOSTS``):
read here and nowhere else.

:class:`dgb.fetch.FetchPolicy` and :class:`dgb.hostbudget.BudgetConfig` are frozen dataclasses
whose fields hold the defaults; their ``from_env()`` passes the keyword arguments returned below,
which hold only the settings that are set (validated), so an unset one keeps the field's default.
"""

from __future__ import annotations

from typing import Any

from dgb.config import env_flag, env_number, env_str, only_set

ALLOWED_HOSTS = "DGB_INTEGRITY_ALLOWED_HOSTS"


def _whole(value: float | None) -> int | None:
    return None if value is None else int(value)


# -- one fetcher (dgb.fetch.FetchPolicy) ----------------------------------------------------------


def fetch_min_interval() -> float | None:
    """``DGB_FETCH_MIN_INTERVAL``: seconds between two requests of one fetcher to one host (None:
    unset; the shared host budget then spaces requests alone)."""
    return env_number("DGB_FETCH_MIN_INTERVAL", None)


def fetch_policy() -> dict[str, Any]:
    """``DGB_FETCH_CONNECT_TIMEOUT``, ``_READ_TIMEOUT``, ``_TOTAL_TIMEOUT``, ``_MAX_BYTES``,
    ``_RETRIES``, ``_MIN_INTERVAL`` (numbers; bytes and retries whole) and the flag
    ``DGB_FETCH_RESPECT_ROBOTS`` (default on): the ones set, as ``FetchPolicy`` keyword arguments."""
    return only_set(
        connect_timeout=env_number("DGB_FETCH_CONNECT_TIMEOUT", None),
        read_timeout=env_number("DGB_FETCH_READ_TIMEOUT", None),
        total_timeout=env_number("DGB_FETCH_TOTAL_TIMEOUT", None),
        max_bytes=_whole(env_number("DGB_FETCH_MAX_BYTES", None)),
        retries=_whole(env_number("DGB_FETCH_RETRIES", None)),
        min_interval=fetch_min_interval(),
        respect_robots=env_flag("DGB_FETCH_RESPECT_ROBOTS", True),
    )


# -- the shared per-host budget (dgb.hostbudget) --------------------------------------------------


def host_budget_enabled() -> bool:
    """``DGB_HOST_BUDGET`` (default on): off, each fetcher spaces its own requests."""
    return env_flag("DGB_HOST_BUDGET", True)


def host_budget_overrides() -> str:
    """``DGB_HOST_BUDGETS``: per-host limits, ``host=rps[/in_flight]`` comma-separated (parsed and
    checked by :func:`dgb.hostbudget.parse_host_budgets`)."""
    return env_str("DGB_HOST_BUDGETS", "")


def host_budget() -> dict[str, Any]:
    """``DGB_HOST_RPS``, ``DGB_HOST_MAX_IN_FLIGHT``, ``DGB_HOST_RESERVED_IN_FLIGHT``,
    ``DGB_HOST_LEASE``, ``DGB_HOST_WAIT_TIMEOUT``, ``DGB_HOST_ERROR_STREAK``,
    ``DGB_HOST_BACKOFF_MAX``, ``DGB_HOST_WINDOW`` (seconds; 0 turns the window cap off): the ones
    set, as ``BudgetConfig`` keyword arguments."""
    return only_set(
        default_rps=env_number("DGB_HOST_RPS", None, above=0),
        default_in_flight=env_number("DGB_HOST_MAX_IN_FLIGHT", None, integer=True, minimum=1),
        reserved=env_number("DGB_HOST_RESERVED_IN_FLIGHT", None, integer=True, minimum=0),
        lease_s=env_number("DGB_HOST_LEASE", None, above=0),
        wait_timeout_s=env_number("DGB_HOST_WAIT_TIMEOUT", None, above=0),
        error_streak=env_number("DGB_HOST_ERROR_STREAK", None, integer=True, minimum=1),
        backoff_max_s=env_number("DGB_HOST_BACKOFF_MAX", None, above=0),
        window_s=env_number("DGB_HOST_WINDOW", None, minimum=0, maximum=600),  # grants are kept 600 s
    )


# -- the URL guard (dgb.urlpolicy) ----------------------------------------------------------------


def allowed_hosts() -> list[str] | None:
    """``DGB_INTEGRITY_ALLOWED_HOSTS``: the hosts every fetch may reach, comma-separated, replacing
    the default allowlist (None: unset, the default applies)."""
    raw = env_str(ALLOWED_HOSTS, "").strip()
    return [h.strip() for h in raw.split(",") if h.strip()] if raw else None
