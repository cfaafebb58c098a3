"""A Celery app for the host-budget test: each task fetches URLs of one host through the shared
budget (a Fetcher + HostBudget per task, as an Airflow task does). Broker and result backend: the
Redis the test started (``DGB_TEST_CELERY_BROKER``)."""

from __future__ import annotations

import os
import socket

from celery import Celery

app = Celery("dgb_budget_test", broker=os.environ["DGB_TEST_CELERY_BROKER"])
app.conf.update(
    result_backend=os.environ["DGB_TEST_CELERY_BROKER"],
    worker_prefetch_multiplier=1,
    task_acks_late=True,
    broker_connection_retry_on_startup=True,
)


@app.task(name="fetch_many")
def fetch_many(base: str, tag: str, n: int, rps: float, in_flight: int) -> dict:
    from urllib.parse import urlsplit

    from dgb.config import settings
    from dgb.fetch import Fetcher, FetchPolicy
    from dgb.hostbudget import BudgetConfig, HostBudget

    host = urlsplit(base).netloc
    budget = HostBudget(settings().pg_dsn(), BudgetConfig(overrides={host: (rps, in_flight)}, reserved=0))
    statuses = []
    with Fetcher(FetchPolicy(min_interval=0.0, retries=0), budget=budget, priority="scrape") as f:
        for i in range(n):
            statuses.append(f.get(f"{base}/{tag}/{i}", raise_for_status=False, check_robots=False).status)
    return {"statuses": statuses, "worker": os.environ.get("DGB_TEST_WORKER", socket.gethostname())}
