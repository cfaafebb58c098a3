"""PostgreSQL access: connections, the migration runner and reference-data loading (the `dgb db`
commands: :mod:`dgb.db_cli`).

Migrations are the ordered files ``migrations/NNNN_name.sql``. Each runs in its own
transaction under an advisory lock and is recorded with a checksum in
``schema_migrations``; re-running is a no-op, and an applied file that was edited
afterwards is an error (write a new migration instead).

Adopting a production (DestaquesGovBr) database: when ``news`` already exists but
``schema_migrations`` does not, ``migrations/adopt/production.sql`` first adds what this pipeline
needs to production's tables (columns, per-stage state backfilled, constraints), then 0001 runs
with ``IF NOT EXISTS`` on its tables and indexes, so production's rows stay as they are; from there
on migrations run as usual. All of it is one transaction: a database that cannot be adopted (e.g.
duplicate (agency_key, url) rows) is left untouched, with the reason in the error.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

from dgb.config import database

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
ADOPT_SQL = MIGRATIONS_DIR / "adopt" / "production.sql"
_CREATE = re.compile(r"^CREATE (TABLE|INDEX|UNIQUE INDEX) (?!IF NOT EXISTS)", re.MULTILINE)
_LOCK_ID = 0x64676200  # "dgb\0": serialises concurrent migrators
log = logging.getLogger(__name__)


class MigrationError(RuntimeError):
    pass


@dataclass(frozen=True)
class Migration:
    version: str
    name: str
    path: Path

    @property
    def sql(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def discover(folder: Path = MIGRATIONS_DIR) -> list[Migration]:
    found = []
    for path in sorted(folder.glob("*.sql")):
        m = _NAME.match(path.name)
        if not m:
            raise MigrationError(f"bad migration file name {path.name!r} (want NNNN_name.sql)")
        found.append(Migration(m.group(1), m.group(2), path))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"duplicate migration versions in {folder}: {versions}")
    return found


def connect(dsn: str, **kwargs):
    """A psycopg (3) connection, autocommit off: the same driver the Airflow postgres provider's
    PostgresHook returns, so domain functions take either."""
    return psycopg.connect(dsn, **kwargs)


def lock_articles(cur, unique_ids) -> None:
    """Lock the ``news`` rows of ``unique_ids`` for update, in ``unique_id`` order, at the start of
    a transaction that writes several of them.

    Stage transactions overlap on the same articles (the index stage marks a chunk while the embed
    stage commits vectors for some of its rows). Each takes its row locks in its own order (a
    chunk's order, a join plan's order), so two of them could wait on each other (a deadlock:
    PostgreSQL aborts one). Taking every lock first in one global order means they only queue."""
    ids = sorted(set(unique_ids))
    if ids:
        cur.execute("SELECT 1 FROM news WHERE unique_id = ANY(%s) ORDER BY unique_id FOR UPDATE", (ids,))


class RealArray:
    """A vector to write as a PostgreSQL ``real[]`` parameter, sent in binary: the values as
    big-endian float4, no text formatting on either side. psycopg's own list adaptation formats
    each element through Python (~6 ms for a 512-d embedding: a 2,000-article backlog spent ~12 CPU
    s there). Usable on a connection once :func:`adapt_real_arrays` has registered its dumper."""

    __slots__ = ("values",)

    def __init__(self, values) -> None:
        import numpy as np

        values = np.asarray(values, dtype=">f4")
        if values.ndim != 1 or values.size == 0:
            raise ValueError(f"RealArray takes a non-empty 1-d vector, got shape {values.shape}")
        self.values = values


_FLOAT4_OID, _FLOAT4_ARRAY_OID = 700, 1021


class _RealArrayDumper(Dumper):
    format = Format.BINARY
    oid = _FLOAT4_ARRAY_OID

    def dump(self, obj: RealArray) -> bytes:
        import struct

        import numpy as np

        n = obj.values.size
        # array header: 1 dimension, no NULLs, element type float4; the dimension: n values from
        # index 1; then each value as its length (4) and its 4 bytes
        cells = np.empty(n, dtype=[("length", ">i4"), ("value", ">f4")])
        cells["length"] = 4
        cells["value"] = obj.values
        return struct.pack(">iiIii", 1, 0, _FLOAT4_OID, n, 1) + cells.tobytes()


def adapt_real_arrays(conn_or_cursor) -> None:
    """Let a connection or a cursor take :class:`RealArray` parameters (idempotent). A cursor
    copies its connection's adapters when it is made: registering on the connection alone does not
    reach a cursor already open, so a writer registers on the cursor it writes with."""
    conn_or_cursor.adapters.register_dumper(RealArray, _RealArrayDumper)


@contextmanager
def transaction(conn) -> Iterator:
    """Yield a cursor inside one transaction: commit on success, roll back on error."""
    try:
        with conn.cursor() as cur:
            yield cur
        conn.commit()
    except BaseException:
        conn.rollback()
        raise


def migrate(conn, folder: Path = MIGRATIONS_DIR) -> list[str]:
    """Apply pending migrations; return the versions applied now."""
    migrations = discover(folder)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(%s)", (_LOCK_ID,))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT to_regclass('schema_migrations') IS NULL AND to_regclass('news') IS NOT NULL")
            adopting = cur.fetchone()[0]
        if adopting:
            return _adopt(conn, migrations)
        with conn.cursor() as cur:
            cur.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version text PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            cur.execute("SELECT version, checksum FROM schema_migrations")
            done = dict(cur.fetchall())
        applied = []
        for mig in migrations:
            if mig.version in done:
                if done[mig.version] != mig.checksum:
                    raise MigrationError(
                        f"migration {mig.path.name} changed after it was applied; "
                        "add a new migration instead of editing an applied one"
                    )
                continue
            _apply(conn, mig)
            applied.append(f"{mig.version}_{mig.name}")
        return applied
    finally:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_ID,))


def _apply(conn, mig: Migration, sleep=time.sleep) -> None:
    """Run one migration in its own transaction, its lock waits bounded (see
    :mod:`dgb.config.database`: under load, a migration waiting for a lock would hold up every
    later query on the table): a try whose lock wait times out is rolled back and tried again."""
    timeout_s = database.migrate_lock_timeout_s()
    retries = database.migrate_lock_retries()
    for attempt in range(retries + 1):
        conn.autocommit = False
        try:
            with transaction(conn) as cur:
                if timeout_s > 0:
                    cur.execute(
                        "SELECT set_config('lock_timeout', %s, true)", (f"{int(timeout_s * 1000)}ms",)
                    )
                cur.execute(mig.sql)
                cur.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                    (mig.version, mig.name, mig.checksum),
                )
            return
        except psycopg.errors.LockNotAvailable as exc:
            if attempt == retries:
                raise MigrationError(
                    f"migration {mig.path.name}: its locks were not free within {timeout_s:g}s in"
                    f" {retries + 1} tries (long transactions on the tables it changes?); nothing of it"
                    f" was applied. Run it again, or raise DGB_MIGRATE_LOCK_TIMEOUT_S /"
                    f" DGB_MIGRATE_LOCK_RETRIES: {exc}"
                ) from exc
            log.warning(
                "migration %s: lock wait over %ss (try %d of %d); rolled back, trying again",
                mig.path.name,
                timeout_s,
                attempt + 1,
                retries + 1,
            )
            sleep(min(5.0, 0.5 * (attempt + 1)))
        finally:
            conn.autocommit = True


_SCHEMA_MIGRATIONS = (
    "CREATE TABLE schema_migrations ("
    " version text PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now())"
)


def _adopt(conn, migrations: list[Migration]) -> list[str]:
    """Bring a production database under our migrations in one transaction (module docstring)."""
    applied = ["adopt_production"]
    conn.autocommit = False
    with transaction(conn) as cur:
        cur.execute(ADOPT_SQL.read_text(encoding="utf-8"))
        cur.execute(_SCHEMA_MIGRATIONS)
        for mig in migrations:
            sql = mig.sql
            if mig.version == "0001":  # its tables may already exist: create only what is missing
                sql = _CREATE.sub(lambda m: f"CREATE {m.group(1)} IF NOT EXISTS ", sql)
            cur.execute(sql)
            cur.execute(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                (mig.version, mig.name, mig.checksum),
            )
            applied.append(f"{mig.version}_{mig.name}")
    conn.autocommit = True
    return applied


def migrate_dsn(dsn: str) -> list[str]:
    conn = connect(dsn)
    try:
        return migrate(conn)
    finally:
        conn.close()


# --------------------------------------------------------------------------- reference data


def upsert_agencies(conn, agencies) -> int:
    rows = [
        (a.key, a.name, a.type, a.parent, a.url, a.site_kind, a.active, a.disabled_reason) for a in agencies
    ]
    with transaction(conn) as cur:
        cur.executemany(
            "INSERT INTO agencies (key, name, type, parent_key, url, site_kind, active, disabled_reason)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (key) DO UPDATE SET name = EXCLUDED.name, type = EXCLUDED.type,"
            " parent_key = EXCLUDED.parent_key, url = EXCLUDED.url, site_kind = EXCLUDED.site_kind,"
            " active = EXCLUDED.active, disabled_reason = EXCLUDED.disabled_reason, updated_at = now()"
            " WHERE (agencies.name, agencies.type, agencies.parent_key, agencies.url, agencies.site_kind,"
            " agencies.active, agencies.disabled_reason) IS DISTINCT FROM (EXCLUDED.name, EXCLUDED.type,"
            " EXCLUDED.parent_key, EXCLUDED.url, EXCLUDED.site_kind, EXCLUDED.active,"
            " EXCLUDED.disabled_reason)",
            rows,
        )
    return len(rows)


def upsert_themes(conn, rows: list[dict]) -> int:
    """Load the whole taxonomy (rows parents before children) into ``themes``; idempotent.

    In the same transaction the tree's changes reach the articles: those classified with a code
    that is gone, or whose label changed (the code now means something else), lose their
    enrichment and are classified again by the normal enrich -> embed -> index flow; then the
    ``themes`` rows of the codes that are gone are deleted (see :func:`_retire_themes`).
    """
    ordered = sorted(rows, key=lambda r: (r["level"], r["code"]))
    values = [
        (
            r["code"],
            r["label"],
            r["full_name"],
            r["level"],
            r["parent_code"],
            r["description"],
            list(r.get("keywords") or []),
        )
        for r in ordered
    ]
    with transaction(conn) as cur:
        changed = _retire_themes(cur, {r["code"]: r["label"] for r in ordered})
        cur.executemany(
            "INSERT INTO themes (code, label, full_name, level, parent_code, description, keywords)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (code) DO UPDATE SET label = EXCLUDED.label,"
            " full_name = EXCLUDED.full_name, level = EXCLUDED.level, parent_code = EXCLUDED.parent_code,"
            " description = EXCLUDED.description, keywords = EXCLUDED.keywords, updated_at = now()"
            " WHERE (themes.label, themes.full_name, themes.description, themes.keywords)"
            " IS DISTINCT FROM (EXCLUDED.label, EXCLUDED.full_name, EXCLUDED.description, EXCLUDED.keywords)",
            values,
        )
        if changed:
            # one statement: parent_code references are checked at its end, so gone parents and
            # their gone children go together; no article points at them any more
            cur.execute("DELETE FROM themes WHERE NOT (code = ANY(%s))", ([r["code"] for r in ordered],))
            log.info("themes: %d code(s) no longer in the taxonomy deleted", cur.rowcount)
    return len(values)


#: What an article loses when its themes are no longer valid: the same reset as an edit at the
#: source (dgb.scraper.store), so enrich, embed and index all run again for the new version.
_RESET_ENRICHMENT = (
    "theme_l1_id = NULL, theme_l2_id = NULL, theme_l3_id = NULL, most_specific_theme_id = NULL,"
    " summary = NULL, enriched_at = NULL, classifier = NULL, classifier_version = NULL,"
    " theme_confidence = NULL, content_embedding = NULL, embedding_model = NULL, embedding_dim = NULL,"
    " embedding_generated_at = NULL, embedded_at = NULL, last_error = NULL, last_error_stage = NULL,"
    " attempts = 0, reconcile_attempts = 0, version = version + 1, updated_at = now()"
)


def _retire_themes(cur, labels: dict[str, str]) -> bool:
    """Clear the enrichment of articles pointing at a theme that is gone from ``labels`` (code ->
    label of the new tree) or whose label changed; True if some stored code is gone.

    The enrich stage's pending condition (``enriched_at IS NULL``) then picks these articles up
    again. Logged with counts; a no-op when the stored tree already equals the new one.
    """
    cur.execute("SELECT id, code, label FROM themes")
    stale = {tid: code for tid, code, label in cur.fetchall() if labels.get(code) != label}
    if not stale:
        return False
    ids = list(stale)
    cur.execute(
        f"UPDATE news SET {_RESET_ENRICHMENT} WHERE theme_l1_id = ANY(%(ids)s) OR theme_l2_id = ANY(%(ids)s)"
        " OR theme_l3_id = ANY(%(ids)s) OR most_specific_theme_id = ANY(%(ids)s)",
        {"ids": ids},
    )
    gone = sorted(code for code in stale.values() if code not in labels)
    log.info(
        "themes: %d code(s) gone, %d relabelled; %d article(s) queued for enrichment again",
        len(gone),
        len(stale) - len(gone),
        cur.rowcount,
    )
    return bool(gone)


def load_reference_data(settings) -> str:
    """Agencies and the theme taxonomy into PostgreSQL (whichever this checkout has)."""
    parts = []
    conn = connect(settings.pg_dsn())
    try:
        try:
            from dgb import agencies
        except ModuleNotFoundError:
            agencies = None
        if agencies is not None:
            catalogue = agencies.load_agencies()
            parts.append(f"{upsert_agencies(conn, catalogue.values())} agencies")
        try:
            from dgb import taxonomy
        except ModuleNotFoundError:
            taxonomy = None
        if taxonomy is not None:
            parts.append(f"{upsert_themes(conn, taxonomy.themes_rows(taxonomy.load_taxonomy()))} themes")
    finally:
        conn.close()
    return ", ".join(parts) or "nothing to load"
