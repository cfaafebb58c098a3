"""The stack's components by name (``postgres``, ``airflow-scheduler``, ``celery-worker-1``, ...)."""

from __future__ import annotations

from dgb.config import Settings
from dgb_dev.stack.airflow import AirflowPart
from dgb_dev.stack.broker import Redis
from dgb_dev.stack.celery_workers import CeleryWorker
from dgb_dev.stack.component import Component
from dgb_dev.stack.local_services import Mirror, ModelService
from dgb_dev.stack.postgres import Postgres
from dgb_dev.stack.pubsub import PubSubEmulator
from dgb_dev.stack.typesense import Typesense

SERVICES = ("postgres", "pubsub", "typesense", "mirror", "model")


def component(settings: Settings, name: str) -> Component:
    """The component called ``name``: one of SERVICES, ``redis``, ``airflow-<part>`` or
    ``celery-worker-<n>``."""
    if name.startswith("airflow-"):
        return AirflowPart(settings, name.removeprefix("airflow-"))
    if name.startswith("celery-worker-"):
        return CeleryWorker(settings, int(name.removeprefix("celery-worker-")))
    return {
        "redis": Redis,
        "postgres": Postgres,
        "pubsub": PubSubEmulator,
        "typesense": Typesense,
        "mirror": Mirror,
        "model": ModelService,
    }[name](settings)


def available(name: str) -> bool:
    """Whether this checkout has the code for a component (mirror/model arrive with later work)."""
    from dgb import has_module

    needs = {"mirror": "dgb_dev.mirror.cli", "model": "dgb.embed.service"}.get(name)
    return needs is None or has_module(needs)
