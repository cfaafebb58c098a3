"""Settings of the event-driven stages (``DGB_STAGE_*``) and their circuit breakers
(``DGB_BREAKER_*``): read here and nowhere else.

Each is read when it is used (a stage run, a breaker set), so a changed environment takes effect
on the next run. Standard library only.
"""

from __future__ import annotations

from dgb.config import env_flag, env_number


def stage_chunk_size() -> int:
    """``DGB_STAGE_CHUNK_SIZE`` (default 25, >= 1): articles per committed chunk of a stage run."""
    return env_number("DGB_STAGE_CHUNK_SIZE", 25, integer=True, minimum=1)


def stage_prefetch_chunks() -> int:
    """``DGB_STAGE_PREFETCH_CHUNKS`` (default 2, >= 0): how many chunks ahead of the one being
    processed a stage starts its free model calls (:mod:`dgb.pipeline.prefetch`; 0: none). Two keep
    a request waiting at the model service while the task is slowed by other processes' bursts."""
    return env_number("DGB_STAGE_PREFETCH_CHUNKS", 2, integer=True, minimum=0)


def stage_max_failures() -> int:
    """``DGB_STAGE_MAX_FAILURES`` (default 3, >= 1): permanent failures in a stage before an
    article is parked for an operator."""
    return env_number("DGB_STAGE_MAX_FAILURES", 3, integer=True, minimum=1)


def stage_blas_threads() -> int:
    """``DGB_STAGE_BLAS_THREADS`` (default 1, >= 1): the BLAS threads numpy may use in a stage task
    (the classifier's heads, the prototype scores: small products a second thread only spins for,
    on the cores the model service needs; :func:`dgb.pipeline.threads.blas_threads`)."""
    return env_number("DGB_STAGE_BLAS_THREADS", 1, integer=True, minimum=1)


def stage_deadline_s() -> float:
    """``DGB_STAGE_DEADLINE_S`` (default 600, > 0): seconds after which a stage run starts no new
    chunk (well inside the stage DAGs' 30 min run timeout)."""
    return env_number("DGB_STAGE_DEADLINE_S", 600.0, above=0)


def stage_linger_s() -> float:
    """``DGB_STAGE_LINGER_S`` (default 60, >= 0): once it has done work, a stage run goes on
    sweeping until this many seconds pass with nothing to do (0: it ends at once); a run that found
    nothing ends at once."""
    return env_number("DGB_STAGE_LINGER_S", 60.0, minimum=0)


def stage_early_wake() -> bool:
    """``DGB_STAGE_EARLY_WAKE`` (default on): the scraped event that starts the enrich stage's DAG
    also starts the embed and index stages' DAGs, which wait warm for the work it announces
    (:mod:`dgb.pipeline.dags`); off: each stage starts on its own input's event. Read when the DAG
    file is parsed."""
    return env_flag("DGB_STAGE_EARLY_WAKE", True)


def stage_linger_max_s() -> float:
    """``DGB_STAGE_LINGER_MAX_S`` (default 540, >= 0): the longest a stage run goes on sweeping
    (under the run's 600 s deadline: a busy stream is then taken up by the next run)."""
    return env_number("DGB_STAGE_LINGER_MAX_S", 540.0, minimum=0)


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
