"""Bring the local stack up and down without Docker.

Used by `make up` / `make down` / `make airflow` (``python -m dgb_dev.stack``, :mod:`.cli`), by the
test fixtures, the fault suite and CI, so there is one way to start each component. Every process we
start gets a pid file and a log file under ``<state_dir>/run`` and ``<state_dir>/logs``; `down`
stops exactly those process groups.

Components: PostgreSQL (the machine's Debian cluster via pg_ctlcluster), the Pub/Sub
emulator, Typesense, the local gov.br-like site (mirror), the embedding model service and
Airflow 3 (api-server, scheduler, triggerer, dag-processor). A watchdog process (started by `up`,
stopped first by `down`) restarts the Airflow components that exit.
With ``DGB_EXECUTOR=celery`` (``make up EXECUTOR=celery``) Airflow runs on CeleryExecutor: a
Redis broker (Debian's redis-server on loopback) and ``DGB_CELERY_WORKERS`` (2) Celery workers
join the stack. Its settings are read in :mod:`dgb.config.dev`.

Modules, one job each:

- :mod:`.process`: processes we own (pid files, process groups, CPU priority), waiting for health,
  ``StackError``;
- :mod:`.component`: the ``Component`` / ``ManagedProcess`` base classes;
- :mod:`.postgres`, :mod:`.pubsub`, :mod:`.typesense`, :mod:`.local_services` (the local site and
  the model service), :mod:`.broker` (Redis for Celery), :mod:`.celery_workers`: the components;
- :mod:`.airflow`: Airflow's environment, its component processes and CLI; :mod:`.airflow_start`:
  its start-up (migrations, pools, foreign triggers, unpausing the DAGs); :mod:`.airflow_rest`:
  the api-server's REST API (pools, DAGs, triggering a run) where a CLI call would cost seconds;
- :mod:`.components`: every component by name; :mod:`.local_secrets`: the generated secrets;
- :mod:`.lifecycle`: ensure, bootstrap, up, down, status; :mod:`.watchdog`; :mod:`.cli`.

The package's API, below, is what the test fixtures (tests/conftest.py) and the fault suite
(scripts/faults.py) drive the stack with: ``from dgb_dev import stack`` then ``stack.ensure(...)``.
Everything else is imported from its module.
"""

from dgb_dev.stack.airflow import AIRFLOW_PARTS, airflow_cli, airflow_env
from dgb_dev.stack.airflow_start import release_foreign_triggers
from dgb_dev.stack.components import SERVICES, available, component
from dgb_dev.stack.lifecycle import bootstrap, ensure, up
from dgb_dev.stack.local_secrets import ensure_secrets
from dgb_dev.stack.postgres import Postgres, ensure_database
from dgb_dev.stack.process import Proc, StackError, group_alive

__all__ = [
    "AIRFLOW_PARTS",
    "SERVICES",
    "Postgres",
    "Proc",
    "StackError",
    "airflow_cli",
    "airflow_env",
    "available",
    "bootstrap",
    "component",
    "ensure",
    "ensure_database",
    "ensure_secrets",
    "group_alive",
    "release_foreign_triggers",
    "up",
]
