"""Shared fixtures. Tests talk to the real servers (PostgreSQL, Pub/Sub emulator, Typesense),
started or reused through dgb_dev.stack (the dev package), but keep their own database, Pub/Sub project and
Typesense alias so a running dev stack's data is never touched."""

from __future__ import annotations

import os

# Test isolation, set before anything reads settings.
os.environ["DGB_PG_DB"] = os.environ.get("DGB_TEST_PG_DB", "dgb_test")
os.environ["DGB_PG_AIRFLOW_DB"] = os.environ.get("DGB_TEST_PG_AIRFLOW_DB", "dgb_airflow_test")
os.environ["DGB_GCP_PROJECT"] = os.environ.get("DGB_TEST_GCP_PROJECT", "dgb-test")
os.environ["DGB_TYPESENSE_COLLECTION"] = os.environ.get("DGB_TEST_TYPESENSE_COLLECTION", "test_news")

import pytest  # noqa: E402

from dgb.config import Settings  # noqa: E402

try:
    from dgb_dev import stack
except ModuleNotFoundError as _exc:  # the Astro image has no dev package: server tests skip there
    if _exc.name != "dgb_dev":
        raise
    stack = None

if stack is not None:
    _settings = stack.ensure_secrets(Settings.from_env())
    _airflow = stack.airflow_env(_settings)
    _airflow["AIRFLOW_HOME"] = str(_settings.state_dir / "airflow-test")
    for _key, _value in _airflow.items():
        if _key.startswith(("AIRFLOW", "PUBSUB_EMULATOR_HOST")):
            os.environ[_key] = _value

KEEP = ("schema_migrations", "agencies", "themes")  # reference data survives between tests


@pytest.fixture(scope="session")
def settings() -> Settings:
    return Settings.from_env()


@pytest.fixture(scope="session")
def pg_server(settings):
    """PostgreSQL running, our role and the test databases created, migrations applied."""
    stack.ensure(["postgres"], settings)
    pg = stack.Postgres(settings)
    stack.ensure_database(pg, settings.pg_db)
    stack.ensure_database(pg, settings.pg_airflow_db)
    from dgb import db

    db.migrate_dsn(settings.pg_dsn())
    return settings


@pytest.fixture
def pg(pg_server):
    """A connection to a clean test database (pipeline tables truncated)."""
    from dgb import db

    conn = db.connect(pg_server.pg_dsn())
    with db.transaction(conn) as cur:
        cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND NOT (tablename = ANY(%s))",
                    (list(KEEP),))
        tables = [r[0] for r in cur.fetchall()]
        cur.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
    yield conn
    conn.close()


@pytest.fixture(scope="session")
def pubsub_server(settings):
    stack.ensure(["pubsub"], settings)
    os.environ["PUBSUB_EMULATOR_HOST"] = settings.pubsub_emulator_host
    return settings


@pytest.fixture(scope="session")
def typesense_server(settings):
    stack.ensure(["typesense"], settings)
    return settings


# --------------------------------------------------------------------------- container profile
# `astro dev pytest` runs this suite inside the Astro image, where no PostgreSQL, Pub/Sub emulator
# or Typesense runs. Under DGB_TEST_PROFILE=container (the default inside an Astro Runtime
# container) tests that need those servers (marked `stack`, or using a server fixture) are
# skipped with a reason; DAG-integrity and unit tests run as everywhere. `make test` = local.
from dgb.config import REPO_ROOT as _REPO_ROOT  # noqa: E402

TEST_PROFILE = os.environ.get("DGB_TEST_PROFILE") or (
    "container" if os.environ.get("ASTRONOMER_RUNTIME_VERSION") or str(_REPO_ROOT) == "/usr/local/airflow"
    else "local")
_SERVER_FIXTURES = {"pg_server", "pg", "pubsub_server", "typesense_server"}


def pytest_ignore_collect(collection_path, config):
    """Where the dev package is absent (the Astro image), test modules that import it at module
    level are not collected (the rest skip their server tests as below)."""
    if stack is None and collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        import ast

        tree = ast.parse(collection_path.read_text(encoding="utf-8"))
        for node in tree.body:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n == "dgb_dev" or n.startswith("dgb_dev.") for n in names):
                return True
    return None


def pytest_collection_modifyitems(config, items):
    if TEST_PROFILE != "container":
        return
    skip = pytest.mark.skip(reason="DGB_TEST_PROFILE=container: needs PostgreSQL / the Pub/Sub emulator / "
                                   "Typesense, which `make test` starts; none runs in this container")
    for item in items:
        if item.get_closest_marker("stack") or _SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(skip)
