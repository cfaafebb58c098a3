"""Settings of the safety net (``DGB_RECONCILE_*``): read here and nowhere else.

Standard library only: the safety-net DAG file (dags/reconcile.py) reads the schedules at parse
time.
"""

from __future__ import annotations

from dgb.config import env_number, env_str


def stuck_minutes() -> float:
    """``DGB_RECONCILE_STUCK_MINUTES`` (default 10): an article pending in a stage this long is stuck."""
    return env_number("DGB_RECONCILE_STUCK_MINUTES", 10)


def outbox_minutes() -> float:
    """``DGB_RECONCILE_OUTBOX_MINUTES`` (default 5): an unsent outbox row this old is stuck."""
    return env_number("DGB_RECONCILE_OUTBOX_MINUTES", 5)


def outbox_attempts() -> int:
    """``DGB_RECONCILE_OUTBOX_ATTEMPTS`` (default 5): an unsent outbox row after this many failed
    publishes is stuck (a number, its whole part counts)."""
    return int(env_number("DGB_RECONCILE_OUTBOX_ATTEMPTS", 5))


def max_attempts() -> int:
    """``DGB_RECONCILE_MAX_ATTEMPTS`` (default 5): re-sends per article before it is flagged
    ``problem='stuck'`` (a number, its whole part counts)."""
    return int(env_number("DGB_RECONCILE_MAX_ATTEMPTS", 5))


def sweep_window_hours() -> float:
    """``DGB_RECONCILE_SWEEP_WINDOW_HOURS`` (default 48): the sweep looks at articles changed
    this recently."""
    return env_number("DGB_RECONCILE_SWEEP_WINDOW_HOURS", 48)


def daily_cron() -> str:
    """``DGB_RECONCILE_DAILY_CRON`` (default ``30 3 * * *``, 03:30 UTC): the daily reconciliation."""
    return env_str("DGB_RECONCILE_DAILY_CRON", "").strip() or "30 3 * * *"


def sweep_minutes() -> int:
    """``DGB_RECONCILE_SWEEP_MINUTES`` (default 15, an integer >= 1): the sweep's interval."""
    return env_number("DGB_RECONCILE_SWEEP_MINUTES", 15, integer=True, minimum=1)
