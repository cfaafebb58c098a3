"""The ``upgrade`` fault: the next version deployed while a batch is in flight, the way a deploy
lands it (issue 28: upgrade under load).

What the next version brings, all of it at once while the batch's events are on their way:

* **a migration** that changes ``news`` (``ALTER TABLE news ADD COLUMN``), written into the
  migrations folder the deployed code reads and applied by the ``dgb_bootstrap`` DAG, as Cloud
  Composer applies it (``make up`` runs the same ``dgb.db.migrate``). Its lock waits are bounded
  and retried (``DGB_MIGRATE_LOCK_TIMEOUT_S``), so it never queues the stages' queries;
* **a changed DAG**: the stage DAGs' file gains a tag; the DAG processor re-parses it and every
  stage DAG gets a new version while its runs are deferred or running;
* **events of the next minor version**: from then on every copy of the batch's events is
  published as ``event_version`` 1.1 with a field this version does not know (the old workers
  must take them: :func:`dgb.events.version_supported`).

Checked afterwards (the report): nothing lost or duplicated, no healthy article dead-lettered
(an event refused for its version would be), and no task of the stage DAGs or of the bootstrap
failed for good (``failed_for_good`` in the batch's note; any makes the run fail).

Everything is put back at the end, also on failure: the DAG file's bytes, the migration file,
its column and its ``schema_migrations`` row.

The steps (the stage DAGs' file changed and restored, a probe migration written, applied by the
bootstrap DAG and removed, the changed DAGs seen parsed) are functions of this module, shared with
the chaos run's upgrade (:mod:`faultsuite.chaos_upgrade`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from dgb import db as dgb_db
from dgb.config import Settings
from dgb_dev.stack import airflow_rest

from .articles import Articles
from .catalogue import STAGE_DAGS, Batch
from .completion import Completion
from .context import Context
from .duplicator import Duplicator
from .plumbing import Db, log, wait_for

REPO = Path(__file__).resolve().parents[2]
STAGE_DAG_FILE = REPO / "dags" / "pipeline_stages.py"
PROBE_VERSION = "9999"
PROBE_MIGRATION = dgb_db.MIGRATIONS_DIR / f"{PROBE_VERSION}_upgrade_probe.sql"
PROBE_COLUMN = "upgrade_probe"
PROBE_TAG = "upgrade-probe"
TAGS_BEFORE = 'tags=["dgb", "pipeline", spec.stage]'
TAGS_AFTER = f'tags=["dgb", "pipeline", spec.stage, "{PROBE_TAG}"]'
BOOTSTRAP_DAG = "dgb_bootstrap"
APPLY_TIMEOUT_S = 240.0  # the bootstrap run queued, run, its migration applied
REPARSE_TIMEOUT_S = 180.0  # the DAG processor re-parses every 30 s (AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL)


def change_stage_dags() -> bytes:
    """Tag the stage DAGs (their file rewritten: the DAG processor re-parses it and each gets a
    new version); returns the file's bytes before, for :func:`restore_stage_dags`."""
    text = STAGE_DAG_FILE.read_bytes()
    if TAGS_BEFORE.encode() not in text:
        raise RuntimeError(f"upgrade: {STAGE_DAG_FILE} no longer holds {TAGS_BEFORE}; update the probe")
    STAGE_DAG_FILE.write_bytes(text.replace(TAGS_BEFORE.encode(), TAGS_AFTER.encode()))
    log(f"upgrade: {STAGE_DAG_FILE.name} changed (stage DAGs tagged {PROBE_TAG!r})")
    return text


def restore_stage_dags(before: bytes) -> None:
    STAGE_DAG_FILE.write_bytes(before)
    log(f"upgrade: {STAGE_DAG_FILE.name} restored")


def stage_dags_tagged(s: Settings) -> bool:
    """Whether Airflow serves every stage DAG with the probe tag (the changed file was parsed)."""
    for dag_id in STAGE_DAGS:
        dag = airflow_rest.call(s, "GET", f"/dags/{dag_id}") or {}
        if PROBE_TAG not in {t.get("name") for t in dag.get("tags") or []}:
            return False
    return True


def apply_migration(s: Settings, db: Db, path: Path, version: str, sql: str, why: str) -> str:
    """Write a probe migration into the folder the deployed code reads and have the
    ``dgb_bootstrap`` DAG apply it, as Cloud Composer does; returns the bootstrap run's id once
    the migration's ``schema_migrations`` row exists (:class:`~faultsuite.plumbing.Timeout` if
    not within APPLY_TIMEOUT_S)."""
    path.write_text(f"-- {why}; removed by the fault suite\n{sql}\n", encoding="utf-8")
    run_id = airflow_rest.trigger_dag_run(s, BOOTSTRAP_DAG)
    log(f"upgrade: migration {path.name} written, {BOOTSTRAP_DAG} triggered ({run_id})")
    wait_for(lambda: migration_applied(db, version), APPLY_TIMEOUT_S, f"upgrade: {path.name} applied")
    return run_id


def migration_applied(db: Db, version: str) -> bool:
    rows = db.query("SELECT count(*) FROM schema_migrations WHERE version = %s", (version,))
    return bool(rows[0][0])


def remove_migration(db: Db, path: Path, version: str, undo_sql: str | None = None) -> None:
    """The probe migration's file and ``schema_migrations`` row gone, ``undo_sql`` run first
    (idempotent, also after a failure)."""
    path.unlink(missing_ok=True)
    try:
        if undo_sql:
            db.query(undo_sql)
        db.query("DELETE FROM schema_migrations WHERE version = %s", (version,))
    except Exception as exc:
        log(f"upgrade: removing the probe migration {path.name}: {exc}")


@dataclass
class Upgrade:
    ctx: Context
    articles: Articles
    completion: Completion
    duplicator: Duplicator
    dag_file_before: bytes | None = field(default=None, init=False)
    since: datetime | None = field(default=None, init=False)

    def deploy(self, batch: Batch) -> None:
        self.articles.await_in_flight(batch)
        self.completion.note_pending(batch)
        batch.fault_at = time.monotonic()
        self.since = datetime.now(UTC)
        self.duplicator.next_version.set()
        log("upgrade: copies of the batch's events now published as event_version 1.1")
        self.dag_file_before = change_stage_dags()
        apply_migration(
            self.ctx.s,
            self.ctx.db,
            PROBE_MIGRATION,
            PROBE_VERSION,
            f"ALTER TABLE news ADD COLUMN IF NOT EXISTS {PROBE_COLUMN} text;",
            f"the fault suite's upgrade probe (run {self.ctx.run_id})",
        )
        log(f"upgrade: migration applied after {time.monotonic() - batch.fault_at:.1f}s")
        wait_for(
            lambda: stage_dags_tagged(self.ctx.s),
            REPARSE_TIMEOUT_S,
            "upgrade: the changed stage DAGs parsed",
            every=2,
        )
        log(f"upgrade: the changed stage DAGs parsed after {time.monotonic() - batch.fault_at:.1f}s")
        batch.fault_end = time.monotonic()

    def failed_for_good(self) -> list[str]:
        """Task instances of the stage DAGs and the bootstrap that ended failed (no retry left)
        since the upgrade began."""
        if self.since is None:
            return []
        rows = self.ctx.af.query(
            "SELECT dag_id || '.' || task_id FROM task_instance WHERE dag_id = ANY(%s)"
            " AND state = 'failed' AND end_date >= %s",
            ([*STAGE_DAGS, BOOTSTRAP_DAG], self.since),
        )
        return [r[0] for r in rows]

    def check(self, batch: Batch) -> None:
        failed = self.failed_for_good()
        batch.add_note(f"failed_for_good={len(failed)}")
        if failed:
            batch.failed_for_good = len(failed)
            log(f"upgrade: tasks failed for good: {', '.join(failed[:6])}")

    def revert(self) -> None:
        """The working tree and the database as they were (idempotent, also after a failure)."""
        self.duplicator.next_version.clear()
        if self.dag_file_before is not None:
            restore_stage_dags(self.dag_file_before)
            self.dag_file_before = None
        remove_migration(
            self.ctx.db,
            PROBE_MIGRATION,
            PROBE_VERSION,
            f"ALTER TABLE news DROP COLUMN IF EXISTS {PROBE_COLUMN}",
        )
