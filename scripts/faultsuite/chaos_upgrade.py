"""The chaos run's ``upgrade`` fault: the next version deployed mid-run, the way a deploy lands it,
while the real load goes on (the fault suite's :mod:`faultsuite.upgrade` does it around one batch;
the steps are its functions).

What the next version brings:

* **a new DAG version**: the stage DAGs' file gains a tag and every Airflow component (and each
  live Celery worker) is restarted on it, one after the other;
* **a migration that rewrites a column the stages read**:
  ``ALTER TABLE news ALTER COLUMN content TYPE text USING content || ''``. Every stage reads
  ``content`` (enrich classifies and summarises it, embed embeds it, index writes it to the
  document). The values stay the same (``|| ''`` changes no text, and NULL stays NULL), but
  PostgreSQL cannot tell that from the expression, so it rewrites the whole table and rebuilds its
  indexes under an ACCESS EXCLUSIVE lock: every stage's query on ``news`` waits for the rewrite
  (``USING content`` alone is seen to be a no-op and rewrites nothing). That is what a type change
  or a backfill in one statement costs an operator. ``title`` would do the same, but views read it
  (``integrity_problems``) and PostgreSQL refuses to change the type of a column a view uses. It
  is applied by the ``dgb_bootstrap`` DAG, as on Cloud Composer;
* **events of the next minor version from every publisher**: the components restart with
  ``DGB_EVENT_MINOR_VERSION`` one above the current, so every event a task builds from then on
  carries ``event_version`` 1.1, while consumers that started earlier may still be on the old code
  (they take every minor of their major: :func:`dgb.events.version_supported`).

Confirmed when all three are seen: the migration's ``schema_migrations`` row exists and ``news``
has a new relfilenode (rewritten); every stage DAG's serialized hash changed; at least one event
of the new version was published (the outbox's ``attributes``, ``published_at`` set). Everything
is put back at the end, also on failure: the DAG file, the setting (the components restarted
again), the migration's file and row (the column needs no undo: its values never changed).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

from dgb import db as dgb_db
from dgb import events, topology
from dgb.config import messaging as messaging_config
from dgb_dev import stack
from dgb_dev.stack.celery_workers import celery_workers

from . import upgrade
from .catalogue import STAGE_DAGS
from .context import Context
from .plumbing import Db, Timeout, log, wait_for

REWRITE_VERSION = "9998"
REWRITE_MIGRATION = dgb_db.MIGRATIONS_DIR / f"{REWRITE_VERSION}_chaos_rewrite_content.sql"
REWRITE_SQL = "ALTER TABLE news ALTER COLUMN content TYPE text USING content || '';"
EVENT_TIMEOUT_S = 300.0  # a new-version event published after the restart (the load publishes every few s)


def airflow_names(s) -> list[str]:
    """The Airflow processes a deploy restarts: api-server first (the others talk to it), then the
    scheduler, triggerer, DAG processor and any live Celery worker."""
    workers = [w.name for w in celery_workers(s) if w.proc.alive()]
    return [f"airflow-{p}" for p in stack.AIRFLOW_PARTS] + workers


def restart_airflow(s) -> list[str]:
    names = airflow_names(s)
    for name in names:
        comp = stack.component(s, name)
        comp.down()
        comp.up()
    return names


def next_minor() -> int:
    current = messaging_config.event_minor_version()
    if current is None:
        current = int(topology.EVENT_VERSION.split(".")[1])
    return current + 1


def set_minor(minor: int | None) -> None:
    """This process's ``DGB_EVENT_MINOR_VERSION`` (None: unset), inherited by the components it starts."""
    if minor is None:
        os.environ.pop(messaging_config.EVENT_MINOR_VERSION_ENV, None)
    else:
        os.environ[messaging_config.EVENT_MINOR_VERSION_ENV] = str(minor)


def stage_dag_hashes(af: Db) -> dict[str, str]:
    """The serialized hash of each stage DAG's latest version (Airflow overwrites a version no task
    ran on instead of adding one, so the hash, not the version number, shows the change)."""
    rows = af.query(
        "SELECT DISTINCT ON (sd.dag_id) sd.dag_id, sd.dag_hash, dv.version_number FROM serialized_dag sd"
        " JOIN dag_version dv ON dv.id = sd.dag_version_id WHERE sd.dag_id = ANY(%s)"
        " ORDER BY sd.dag_id, dv.version_number DESC, sd.last_updated DESC",
        (list(STAGE_DAGS),),
    )
    return {dag_id: f"{h}@v{n}" for dag_id, h, n in rows}


def changed_hashes(af: Db, before: dict[str, str]) -> dict[str, str] | None:
    """Every stage DAG's latest hash, once each differs from ``before``; else None."""
    now = stage_dag_hashes(af)
    if set(now) == set(STAGE_DAGS) and all(h != before.get(d) for d, h in now.items()):
        return now
    return None


def news_filenode(db: Db) -> int:
    return int(db.query("SELECT pg_relation_filenode('news')")[0][0])


def events_since(db: Db, version: str, since: datetime) -> tuple[int, int]:
    """Events created since ``since`` and published: (of ``version``, of any other)."""
    rows = db.query(
        "SELECT count(*) FILTER (WHERE attributes->>'event_version' = %(v)s),"
        " count(*) FILTER (WHERE attributes->>'event_version' IS DISTINCT FROM %(v)s)"
        " FROM outbox WHERE created_at >= %(t)s AND published_at IS NOT NULL",
        {"v": version, "t": since},
    )
    return int(rows[0][0]), int(rows[0][1])


def run(ctx: Context) -> tuple[bool, str]:
    """Deploy the next version, confirm it, put everything back. Returns (confirmed, what was seen)."""
    s, db, af = ctx.s, ctx.db, ctx.af
    seen: list[str] = []
    ok = True
    before_minor = messaging_config.event_minor_version()
    minor = next_minor()
    version = f"{topology.EVENT_VERSION.split('.')[0]}.{minor}"
    hashes_before = stage_dag_hashes(af)
    filenode_before = news_filenode(db)
    dag_file_before = None
    try:
        dag_file_before = upgrade.change_stage_dags()
        set_minor(minor)
        if events.published_version() != version:  # the setting as the tasks will read it
            raise RuntimeError(f"DGB_EVENT_MINOR_VERSION={minor} stamps {events.published_version()}")
        restarted_at = datetime.now(UTC)
        names = restart_airflow(s)
        log(f"upgrade: {', '.join(names)} restarted with DGB_EVENT_MINOR_VERSION={minor}")
        upgrade.apply_migration(s, db, REWRITE_MIGRATION, REWRITE_VERSION, REWRITE_SQL, "the chaos upgrade")
        filenode = news_filenode(db)
        rewritten = filenode != filenode_before
        ok &= rewritten
        seen.append(
            f"migration {REWRITE_VERSION} in schema_migrations, news relfilenode {filenode_before}"
            f" -> {filenode} ({'rewritten' if rewritten else 'NOT rewritten'})"
        )
        try:
            after = wait_for(
                lambda: changed_hashes(af, hashes_before),
                upgrade.REPARSE_TIMEOUT_S,
                "upgrade: the stage DAGs' new version",
                every=2,
            )
            seen.append(f"stage DAGs re-serialized ({len(after)}: {', '.join(sorted(after.values()))})")
        except Timeout as exc:
            ok = False
            seen.append(f"stage DAGs unchanged: {exc}")
        try:
            wait_for(
                lambda: events_since(db, version, restarted_at)[0],
                EVENT_TIMEOUT_S,
                f"upgrade: an event_version {version} published",
                every=5,
            )
            new, other = events_since(db, version, restarted_at)
            seen.append(f"{new} events {version} published since the restart ({other} of another version)")
        except Timeout as exc:
            ok = False
            seen.append(f"no event {version} published: {exc}")
    except Exception as exc:
        ok = False
        seen.append(f"failed: {type(exc).__name__}: {str(exc)[:200]}")
    finally:
        seen.append(revert(ctx, dag_file_before, before_minor))
    return ok, "; ".join(seen)


def revert(ctx: Context, dag_file_before: bytes | None, before_minor: int | None) -> str:
    """The DAG file, the setting and the migration as they were, the components restarted on them."""
    if dag_file_before is not None:
        upgrade.restore_stage_dags(dag_file_before)
    set_minor(before_minor)
    upgrade.remove_migration(ctx.db, REWRITE_MIGRATION, REWRITE_VERSION)
    t0 = time.monotonic()
    try:
        restart_airflow(ctx.s)
    except Exception as exc:
        return f"reverted, but restarting Airflow failed: {exc} (the supervisor starts what is down)"
    return f"reverted (Airflow restarted on the old version in {time.monotonic() - t0:.0f}s)"
