"""The plugin registration (plugins/dgb_airflow_plugins.py): Airflow's plugin manager finds the
integrity page's FastAPI app and its Browse-menu entry."""

from __future__ import annotations

from fastapi.testclient import TestClient

import dgb_airflow_plugins as registration


def test_the_plugin_mounts_the_integrity_app_and_links_it_from_browse():
    plugin = registration.DgbPipelinePlugin
    [app] = plugin.fastapi_apps
    assert app["url_prefix"] == registration.INTEGRITY_PREFIX == "/dgb-integrity"
    [view] = plugin.external_views
    assert (view["href"], view["url_route"], view["category"]) == (
        "dgb-integrity/",
        "dgb-integrity",
        "browse",
    )
    assert TestClient(app["app"]).get("/health").status_code in (200, 401, 403)


def test_airflows_plugin_manager_loads_it_from_the_plugins_folder():
    from airflow import plugins_manager

    apps, _views = plugins_manager.get_fastapi_plugins()
    assert registration.INTEGRITY_PREFIX in {a["url_prefix"] for a in apps}
    assert not plugins_manager.get_import_errors()
