"""The documentation site's generated reference (dgb_dev.docsref): every setting, command and DAG has
an entry, and the settings catalogue says what the code does."""

from __future__ import annotations

import argparse
import re

import pytest

from dgb.config import REPO_ROOT, catalog
from dgb_dev import docsref

NAME = re.compile(r"\bDGB_[A-Z0-9_]*[A-Z0-9]\b")
# parts of connection variable names (AIRFLOW_CONN_DGB_DB, AIRFLOW_CONN_DGB_MODEL_SERVICE), not settings
NOT_SETTINGS = {"DGB_DB", "DGB_MODEL_SERVICE"}


def names_in_code() -> set[str]:
    """Every DGB_* name the code, the deploy files and the test suite's root conftest mention."""
    sources = [
        *(REPO_ROOT / "include").rglob("*.py"),
        *(REPO_ROOT / "dev").rglob("*.py"),
        *(REPO_ROOT / "plugins").rglob("*.py"),
        *(REPO_ROOT / "dags").rglob("*.py"),
        *(REPO_ROOT / "scripts").glob("*.py"),
        REPO_ROOT / "tests" / "conftest.py",
        REPO_ROOT / "Makefile",
        REPO_ROOT / "docker-compose.yaml",
        REPO_ROOT / "Dockerfile",
    ]
    found: set[str] = set()
    for path in sources:
        found.update(NAME.findall(path.read_text(encoding="utf-8")))
    return found - NOT_SETTINGS


def test_every_setting_the_code_names_has_a_catalogue_entry():
    missing = sorted(names_in_code() - catalog.names())
    assert not missing, f"include/dgb/config/settings.yaml does not describe: {missing}"


def test_every_catalogue_entry_is_a_setting_something_reads():
    read = {r.name for r in docsref.config_reads()}
    test_suite = set(NAME.findall((REPO_ROOT / "tests" / "conftest.py").read_text()))
    test_suite |= {"DGB_TEST_AWS", "DGB_TEST_PROFILE"} & set(
        NAME.findall(" ".join(p.read_text() for p in (REPO_ROOT / "tests").rglob("*.py")))
    )
    stale = sorted(catalog.names() - read - test_suite)
    assert not stale, f"catalogued but read nowhere: {stale}"
    # and dgb.config reads only catalogued names
    assert read <= catalog.names()


def _default_for(setting: catalog.Setting, name: str) -> str:
    parts = [p.strip() for p in setting.default.split(" / ")]
    return parts[setting.names.index(name)] if len(parts) == len(setting.names) else setting.default


def _spellings(value) -> list[str]:
    if value is True:
        return ["1"]
    if value is False:
        return ["0"]
    if isinstance(value, float) and value.is_integer():
        return [str(int(value)), str(value)]
    return [str(value)]


def test_literal_defaults_in_the_code_are_the_catalogued_ones():
    rows = {name: s for s in catalog.settings() for name in s.names}
    checked = 0
    for read in docsref.config_reads():
        if not read.literal or read.default in (None, ""):
            continue  # an expression, a policy class's field, or "unset"
        written = _default_for(rows[read.name], read.name)
        assert any(f"`{v}`" in written for v in _spellings(read.default)), (
            f"{read.name}: {read.where} defaults to {read.default!r}, the catalogue says {written!r}"
        )
        checked += 1
    assert checked >= 40  # the check looked at the literal defaults, not at nothing


def test_config_reads_finds_names_and_defaults_kept_in_constants(tmp_path):
    (tmp_path / "x.py").write_text(
        'NAME = "DGB_FOO"\nDEFAULT = 7\n\ndef foo():\n    return env_number(NAME, DEFAULT, minimum=0)\n\n'
        'def bar(secrets):\n    return env_str("DGB_BAR", secrets.get("DGB_BAZ", "x"))\n\n'
        'def helper(name, minimum):\n    return None\n\ndef qux():\n    return helper("DGB_QUX", 1)\n'
    )
    reads = {r.name: r for r in docsref.config_reads(tmp_path)}
    assert set(reads) == {"DGB_FOO", "DGB_BAR", "DGB_QUX"}  # DGB_BAZ is a dict look-up
    assert (reads["DGB_FOO"].default, reads["DGB_FOO"].where) == (7, "dgb.config.x.foo")
    assert not reads["DGB_BAR"].literal
    assert not reads["DGB_QUX"].literal  # a helper's second argument is not known to be a default


def test_a_catalogue_row_without_a_meaning_is_refused(tmp_path, monkeypatch):
    bad = tmp_path / "settings.yaml"
    bad.write_text(
        "sections:\n- title: T\n  settings:\n  - names: [DGB_X]\n    default: '1'\n    set_by: L\n"
    )
    monkeypatch.setattr(catalog, "CATALOGUE", bad)
    catalog.settings.cache_clear()
    try:
        with pytest.raises(ValueError, match="row 0 of 'T' is malformed"):
            catalog.settings()
    finally:
        catalog.settings.cache_clear()


def test_the_settings_page_has_every_setting_with_where_it_is_read():
    page = docsref.settings_page()
    for name in catalog.names():
        assert f"`{name}`" in page
    assert "`dgb.config.features.ner_backend`" in page  # DGB_FEATURES_NER's reader


def test_the_command_page_has_every_command_and_flag_with_help():
    page = docsref.cli_page()
    paths = docsref.commands()
    assert {"dgb search", "dgb features", "dgb features backfill", "dgb status"} <= {p for p, _, _ in paths}
    for path, parser, helptext in paths:
        assert f"`{path}`" in page
        assert helptext.strip(), f"`{path}` has no help text"
        for action in docsref.options(parser):
            for flag in action.option_strings:
                assert flag in page, f"{path} {flag} missing"
            if isinstance(action, argparse._StoreAction) and action.option_strings:
                assert (action.help or "").strip(), f"{path} {action.option_strings[0]} has no help text"


def test_the_api_page_names_every_hook_operator_sensor_and_trigger_module():
    page = docsref.api_page()
    files = [
        p
        for kind in docsref.PLUGIN_KINDS
        for p in (REPO_ROOT / "plugins" / "dgb_airflow" / kind).glob("*.py")
        if p.stem != "__init__"
    ]
    assert len(files) >= 8
    for path in files:
        assert f"::: dgb_airflow.{path.parent.name}.{path.stem}" in page


@pytest.mark.airflow
def test_the_dag_page_has_every_dag_of_the_dag_bag():
    bag = docsref.dagbag()
    page = docsref.dags_page(bag)
    assert len(bag.dag_ids) >= 10
    for dag_id in bag.dag_ids:
        assert f"`{dag_id}`" in page
    assert "## `enrich_news`" in page and "**schedule**" in page
