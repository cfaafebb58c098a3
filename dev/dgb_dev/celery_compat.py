"""Run Airflow's Celery provider on the pinned Celery (local stack only).

``apache-airflow-providers-celery`` 3.26.0 imports ``retry`` from ``celery.backends.database``,
which Celery 5.7 removed (its database backend now retries by itself), so with the pinned
``celery==5.7.0`` the CeleryExecutor and ``airflow celery worker`` fail at import. Until the pins
agree (Celery < 5.7, or a provider release that drops the import), the local stack loads the
executor through this module, which puts back an equivalent ``retry`` decorator when it is missing
and changes nothing otherwise:

* scheduler: ``AIRFLOW__CORE__EXECUTOR=dgb_dev.celery_compat.CeleryExecutor``;
* workers: ``python -m dgb_dev.celery_compat celery worker ...`` (the Airflow CLI after the shim).
"""

from __future__ import annotations

import functools
import logging
import sys

log = logging.getLogger(__name__)


def ensure_database_retry() -> bool:
    """Give ``celery.backends.database`` its ``retry`` decorator back if it lacks one; True if added."""
    import celery.backends.database as database

    if hasattr(database, "retry"):
        return False
    from sqlalchemy.exc import DatabaseError, InvalidRequestError
    from sqlalchemy.orm.exc import StaleDataError

    def retry(fun):
        """Celery <= 5.6's decorator: up to ``max_retries`` (3) attempts on database errors."""

        @functools.wraps(fun)
        def _inner(*args, **kwargs):
            max_retries = kwargs.pop("max_retries", 3)
            for retries in range(max_retries):
                try:
                    return fun(*args, **kwargs)
                except (DatabaseError, InvalidRequestError, StaleDataError):
                    log.warning(
                        "failed operation %s, %d retries left", fun.__name__, max_retries - retries - 1
                    )
                    if retries + 1 >= max_retries:
                        raise
            return None

        return _inner

    database.retry = retry
    return True


ensure_database_retry()

from airflow.providers.celery.executors.celery_executor import CeleryExecutor  # noqa: E402

__all__ = ["CeleryExecutor", "ensure_database_retry"]


def main() -> None:
    """The Airflow CLI (``airflow <args>``) with the shim in place."""
    from airflow.__main__ import main as airflow_main

    sys.argv = ["airflow", *sys.argv[1:]]
    airflow_main()


if __name__ == "__main__":
    main()
