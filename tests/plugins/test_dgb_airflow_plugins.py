"""The plugin registration (plugins/dgb_airflow_plugins.py): Airflow's plugin manager finds the
integrity page's FastAPI app (which also serves the pipeline view) and their Browse-menu entries."""

from __future__ import annotations

from fastapi.testclient import TestClient

import dgb_airflow_plugins as registration
from tests.support.processes import run_python


def test_the_plugin_mounts_the_integrity_app_and_links_it_from_browse():
    plugin = registration.DgbPipelinePlugin
    [app] = plugin.fastapi_apps
    assert app["url_prefix"] == registration.INTEGRITY_PREFIX == "/dgb-integrity"
    assert [(v["href"], v["url_route"], v["category"]) for v in plugin.external_views] == [
        ("dgb-integrity/", "dgb-integrity", "browse"),
        ("dgb-integrity/pipeline", "dgb-pipeline", "browse"),  # the pipeline view of the same app
    ]
    assert TestClient(app["app"]).get("/health").status_code in (200, 401, 403)


def test_airflows_plugin_manager_loads_it_from_the_plugins_folder():
    from airflow import plugins_manager

    apps, _views = plugins_manager.get_fastapi_plugins()
    assert registration.INTEGRITY_PREFIX in {a["url_prefix"] for a in apps}
    assert not plugins_manager.get_import_errors()


def test_loading_the_plugin_does_not_import_the_web_stack():
    """Every Airflow process loads the plugin (scheduler, triggerer, DAG processor, each task): it
    must not pull in FastAPI or Airflow's API server (~390 modules) for an app only the API server
    serves."""
    code = (
        "import sys, dgb_airflow_plugins as p; "
        "assert p.DgbPipelinePlugin.fastapi_apps; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('fastapi', 'starlette', 'cadwyn') "
        "or m.startswith('airflow.api_fastapi')))"
    )
    assert run_python(code) == "[]"
