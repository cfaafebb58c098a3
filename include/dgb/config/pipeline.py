"""Settings of the event-driven stages (``DGB_STAGE_*``) and their circuit breakers
(``DGB_BREAKER_*``): read here and nowhere else.

Each is read when it is used (a stage run, a breaker set), so a changed environment takes effect
on the next run. Standard library only.
"""

from __future__ import annotations

from dgb.config import env_number


def stage_chunk_size() -> int:
    """``DGB_STAGE_CHUNK_SIZE`` (default 25, >= 1): articles per committed chunk of a stage run."""
    return env_number("DGB_STAGE_CHUNK_SIZE", 25, integer=True, minimum=1)


def stage_max_failures() -> int:
    """``DGB_STAGE_MAX_FAILURES`` (default 3, >= 1): permanent failures in a stage before an
    article is parked for an operator."""
    return env_number("DGB_STAGE_MAX_FAILURES", 3, integer=True, minimum=1)


def breaker_threshold() -> int:
    """``DGB_BREAKER_THRESHOLD`` (default 3, >= 1): consecutive transient failures that open a
    dependency's circuit breaker."""
    return env_number("DGB_BREAKER_THRESHOLD", 3, integer=True, minimum=1)


def breaker_cooldown_s() -> float:
    """``DGB_BREAKER_COOLDOWN_S`` (default 30, >= 0): how long a breaker's first opening lasts
    (doubling on each re-opening)."""
    return env_number("DGB_BREAKER_COOLDOWN_S", 30.0, minimum=0)


def breaker_max_cooldown_s() -> float:
    """``DGB_BREAKER_MAX_COOLDOWN_S`` (default 60, >= 0): the longest a breaker stays open."""
    return env_number("DGB_BREAKER_MAX_COOLDOWN_S", 60.0, minimum=0)
