"""The pipeline's safety net: reconciliation, dead-letter redrive and replay.

No Airflow import: the DAGs (dags/reconcile.py, operators in plugins/dgb_airflow/operators/
reconcile.py) and the CLI (``dgb reconcile|redrive|replay``) pass a psycopg 3 connection, a
Typesense client and, for seek replays, a Pub/Sub subscriber client in.

* :mod:`.stuck`   - :class:`~.stuck.Thresholds`; articles pending in a stage beyond a threshold
  (the stages' own rules, :mod:`dgb.pipeline.definitions`) and unsent outbox rows;
* :mod:`.repair`  - re-send the event that starts each stuck stage (bounded, then flagged),
  delete extra documents, make unsent outbox rows due; :func:`~.repair.run` = one whole
  reconciliation (find + Typesense drift, :mod:`dgb.search.drift` + repair + a ``reconcile_runs``
  row);
* :mod:`.redrive` - re-publish selected open dead letters after a fix;
* :mod:`.replay`  - re-process a time window (republish from PostgreSQL, or snapshot + seek);
* :mod:`.resend`  - an article's events rebuilt from PostgreSQL, into the outbox (shared by the
  three above);
* :mod:`.runs`    - the ``reconcile_runs`` ledger;
* :mod:`.cli`     - ``dgb reconcile``, ``dgb redrive``, ``dgb replay``;
* :mod:`.dags`    - the safety-net DAG ids (no Airflow import; their schedules are settings,
  :mod:`dgb.config.reconcile`).

Imports go one way: stuck, resend, runs import nothing of this package; repair, redrive
and replay import those; cli imports everything lazily; dags imports nothing.
"""
