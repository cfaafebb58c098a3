"""Airflow plugin registration of dgb-pipeline (Airflow loads AirflowPlugin subclasses from the
modules of the plugins folder).

UI (Airflow 3): the integrity page is a FastAPI app mounted by the API server under
``/dgb-integrity`` (``fastapi_apps``), shown inside the Airflow UI from a "DGB integrity" entry of
the Browse menu (``external_views`` with a ``url_route``: the UI frames ``href`` at
``/plugin/dgb-integrity``; ``href`` is relative to the UI's base URL). The same app serves the
pipeline view at ``/dgb-integrity/pipeline``, its own "DGB pipeline" entry (``/plugin/dgb-pipeline``).
The app is built on its first request (:class:`dgb_airflow.ui.lazy.LazyApp`): every Airflow
process loads this module, each task process included, and only the API server needs FastAPI.

Scheduling: the scrape DAGs' tasks start oldest run first (``priority_weight_strategies``:
:class:`dgb_airflow.priority.OldestRunFirst`).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from dgb_airflow.priority import OldestRunFirst
from dgb_airflow.ui.lazy import LazyApp

INTEGRITY_PREFIX = "/dgb-integrity"


def integrity_app():
    """The DGB pages' FastAPI app (imported here: only the API server serves it, see LazyApp)."""
    from dgb_airflow.ui.app import create_app

    return create_app()


class DgbPipelinePlugin(AirflowPlugin):
    name = "dgb_pipeline"
    priority_weight_strategies = [OldestRunFirst]
    fastapi_apps = [
        {"app": LazyApp(integrity_app), "url_prefix": INTEGRITY_PREFIX, "name": "DGB integrity"},
    ]
    external_views = [
        {
            "name": "DGB integrity",
            "href": INTEGRITY_PREFIX.lstrip("/") + "/",
            "url_route": "dgb-integrity",
            "destination": "nav",
            "category": "browse",
        },
        {
            "name": "DGB pipeline",
            "href": INTEGRITY_PREFIX.lstrip("/") + "/pipeline",
            "url_route": "dgb-pipeline",
            "destination": "nav",
            "category": "browse",
        },
    ]
