"""The integrity checks' settings (``DGB_INTEGRITY_*``, ``DGB_LOAD_*``): read here and nowhere else.

The policies of :mod:`dgb.integrity` are frozen dataclasses whose fields hold the defaults
(:class:`dgb.integrity.evidence.RemovalPolicy`, :class:`dgb.integrity.tiers.Schedule`,
:class:`dgb.integrity.tiers.BudgetPolicy`); their ``from_env()`` passes the keyword arguments
returned below, which hold only the settings that are set (validated), so an unset one keeps the
field's default. The load and purge thresholds, plain numbers, are returned with their defaults.

Standard library only: the integrity DAG specs (:mod:`dgb.integrity.tiers`) read it at parse time.
"""

from __future__ import annotations

from typing import Any

from dgb.config import env_flag, env_number, env_str, only_set

# -- removal evidence and breakers (dgb.integrity.evidence.RemovalPolicy) -----------------------


def removal_policy() -> dict[str, Any]:
    """``DGB_INTEGRITY_REMOVAL_CONFIRM_CHECKS``, ``_REMOVAL_DELAY_S``, ``_GONE_CONFIRM_CHECKS``,
    ``_GONE_DELAY_S``, ``_BREAKER_WINDOW_S``, ``_BREAKER_MIN_CHECKS``, ``_BREAKER_RATIO``,
    ``_BREAKER_RESET_OK``: the ones set, as ``RemovalPolicy`` keyword arguments."""

    def whole(name: str, minimum: int) -> int | None:
        return env_number(name, None, integer=True, minimum=minimum)

    return only_set(
        confirm_checks=whole("DGB_INTEGRITY_REMOVAL_CONFIRM_CHECKS", 1),
        delay_s=whole("DGB_INTEGRITY_REMOVAL_DELAY_S", 0),
        gone_confirm_checks=whole("DGB_INTEGRITY_GONE_CONFIRM_CHECKS", 1),
        gone_delay_s=whole("DGB_INTEGRITY_GONE_DELAY_S", 0),
        breaker_window_s=whole("DGB_INTEGRITY_BREAKER_WINDOW_S", 60),
        breaker_min_checks=whole("DGB_INTEGRITY_BREAKER_MIN_CHECKS", 1),
        breaker_ratio=env_number("DGB_INTEGRITY_BREAKER_RATIO", None, above=0.0, maximum=1.0),
        breaker_reset_ok=whole("DGB_INTEGRITY_BREAKER_RESET_OK", 1),
    )


# -- the schedule (dgb.integrity.tiers.Schedule and BudgetPolicy) -------------------------------


def schedule() -> dict[str, Any]:
    """``DGB_INTEGRITY_SCHEDULE`` (the mode, lower-cased; the schedule checks it),
    ``DGB_INTEGRITY_BASE_MINUTES``, ``DGB_INTEGRITY_LAMBDA`` (may be 0), ``DGB_INTEGRITY_MAX_MINUTES``,
    ``DGB_INTEGRITY_BATCH`` (positive numbers): the ones set, as ``Schedule`` keyword arguments."""
    mode = env_str("DGB_INTEGRITY_SCHEDULE", "").strip().lower()
    batch = env_number("DGB_INTEGRITY_BATCH", None, above=0.0)
    return only_set(
        mode=mode or None,
        base_minutes=env_number("DGB_INTEGRITY_BASE_MINUTES", None, above=0.0),
        lam=env_number("DGB_INTEGRITY_LAMBDA", None, minimum=0.0),
        max_minutes=env_number("DGB_INTEGRITY_MAX_MINUTES", None, above=0.0),
        batch_size=None if batch is None else int(batch),
    )


def budget_policy() -> dict[str, Any]:
    """``DGB_INTEGRITY_BUDGET_RPS``, ``DGB_INTEGRITY_SLOT_S``, ``DGB_INTEGRITY_FRESH_INTERVAL_S``,
    ``DGB_INTEGRITY_MAX_UNCHECKED_DAYS`` (days, given in seconds), ``DGB_INTEGRITY_AGE_DECAY``
    (positive numbers): the ones set, as ``BudgetPolicy`` keyword arguments."""

    def positive(name: str) -> float | None:
        return env_number(name, None, above=0.0)

    max_unchecked_days = positive("DGB_INTEGRITY_MAX_UNCHECKED_DAYS")
    return only_set(
        budget_rps=positive("DGB_INTEGRITY_BUDGET_RPS"),
        slot_seconds=positive("DGB_INTEGRITY_SLOT_S"),
        fresh_interval_s=positive("DGB_INTEGRITY_FRESH_INTERVAL_S"),
        max_unchecked_s=None if max_unchecked_days is None else max_unchecked_days * 86400.0,
        age_decay=positive("DGB_INTEGRITY_AGE_DECAY"),
    )


def min_rps() -> float:
    """``DGB_INTEGRITY_MIN_RPS`` (0.1): the least requests/s a budget run plans with, however busy the
    scrapes are (the fresh band keeps being checked; the host budget still gives scrapes first turn)."""
    return env_number("DGB_INTEGRITY_MIN_RPS", 0.1, minimum=0.0)


def modified_signal() -> bool:
    """``DGB_INTEGRITY_MODIFIED_SIGNAL`` (on): each budget run asks every Plone 6 agency's search
    which articles changed (one request an agency, :mod:`dgb.integrity.signal`) and checks those
    first; unchanged ones it covers are skipped while their last check is within their age band's
    target. Off: every article is checked one by one, as before."""
    return env_flag("DGB_INTEGRITY_MODIFIED_SIGNAL", True)


# -- backpressure (dgb.integrity.backpressure) and the check log (dgb.integrity.purge) ---------


def backlog_max() -> int:
    """``DGB_INTEGRITY_BACKLOG_MAX``: articles pending enrichment before checks yield (0: never)."""
    return env_number("DGB_INTEGRITY_BACKLOG_MAX", 5000, integer=True)


def outbox_max_age_s() -> float:
    """``DGB_INTEGRITY_OUTBOX_MAX_AGE_S``: whole seconds an outbox event may wait unpublished
    before checks yield (0: never)."""
    return float(env_number("DGB_INTEGRITY_OUTBOX_MAX_AGE_S", 60, integer=True))


def load_max_active() -> int:
    """``DGB_LOAD_MAX_ACTIVE``: other active database sessions before checks wait (0: never)."""
    return env_number("DGB_LOAD_MAX_ACTIVE", 40, integer=True)


def load_max_lock_waits() -> int:
    """``DGB_LOAD_MAX_LOCK_WAITS``: waiting lock requests before checks wait (0: never)."""
    return env_number("DGB_LOAD_MAX_LOCK_WAITS", 20, integer=True)


def check_log_days() -> int:
    """``DGB_INTEGRITY_LOG_DAYS``: days ``integrity_checks`` rows are kept (0: forever)."""
    return env_number("DGB_INTEGRITY_LOG_DAYS", 14, integer=True)
