"""Settings of the migration runner (``DGB_MIGRATE_*``) and of the Airflow metadata database's
sessions: read here and nowhere else.

A migration that changes a busy table (``ALTER TABLE news ...``, a new table referencing
``news``) needs a lock that waits for the stages' open transactions; while it waits, PostgreSQL
queues every later query on that table behind it, so a migration applied under load would pause
the pipeline. The runner therefore waits at most ``lock_timeout_s`` for its locks, gives the
migration up (rolled back, nothing half-applied) and tries again, up to ``lock_retries`` times.
"""

from __future__ import annotations

from dgb.config import env_number


def migrate_lock_timeout_s() -> float:
    """``DGB_MIGRATE_LOCK_TIMEOUT_S`` (default 5, >= 0; 0: wait without limit): the longest one
    try of a migration waits for a lock before it is rolled back and tried again."""
    return env_number("DGB_MIGRATE_LOCK_TIMEOUT_S", 5.0, minimum=0)


def migrate_lock_retries() -> int:
    """``DGB_MIGRATE_LOCK_RETRIES`` (default 30, >= 0): tries after the first when a migration's
    lock wait timed out; then the migration fails with a clear error (and nothing applied)."""
    return env_number("DGB_MIGRATE_LOCK_RETRIES", 30, integer=True, minimum=0)


def airflow_idle_tx_timeout_s() -> int:
    """``DGB_AIRFLOW_DB_IDLE_TX_TIMEOUT_S`` (default 60, >= 0; 0: no limit): PostgreSQL ends an
    Airflow metadata session left idle inside a transaction this long (its
    ``idle_in_transaction_session_timeout``). A scheduler killed mid-transaction leaves its
    connection open in the task processes it forked (they outlive it, and inherit its socket), so
    the server never sees it close: the dead transaction kept its row locks and stalled the next
    scheduler and the DAG processor until those tasks ended (9 minutes in seed 28's chaos run)."""
    return env_number("DGB_AIRFLOW_DB_IDLE_TX_TIMEOUT_S", 60, integer=True, minimum=0)
