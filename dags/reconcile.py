"""The safety net: reconcile_news (daily), reconcile_sweep (frequent), redrive_dead_letters and
replay_events (manual). Ids come from dgb.reconcile.dags, schedules from dgb.config.reconcile."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param

from dgb import topology
from dgb.config.reconcile import daily_cron, sweep_minutes
from dgb.dags_meta import DEFAULT_ARGS
from dgb.reconcile.dags import RECONCILE_DAG_ID, REDRIVE_DAG_ID, REPLAY_DAG_ID, SWEEP_DAG_ID
from dgb_airflow.operators.reconcile import ReconcileOperator, RedriveOperator, ReplayOperator

START = pendulum.datetime(2026, 1, 1, tz="UTC")

COMMON_DOC = """
**What counts as stuck** (each beyond `DGB_RECONCILE_STUCK_MINUTES`, default 10): scraped but not
enriched; enriched but not embedded with the current model (`DGB_EMBEDDING_MODEL`); enriched but not
indexed at its current `version` (never indexed, or stale); outbox events unsent for
`DGB_RECONCILE_OUTBOX_MINUTES` (default 5) or after `DGB_RECONCILE_OUTBOX_ATTEMPTS` failed publishes.
**Typesense drift**: documents missing, extra (article gone or removed) or older than PostgreSQL.

**Repair** goes through the normal path: the event that starts the stuck stage is written to the
outbox (`dgb.news.scraped` / `dgb.news.enriched` / `dgb.news.embedded`, attribute
`dgb_source=reconcile`) and relayed; extra documents are deleted; unsent outbox rows are made due.
The stages are idempotent, so a re-send costs at most a skipped message. **Bounded**: at most
`DGB_RECONCILE_MAX_ATTEMPTS` (default 5) re-sends per article; then `news.problem = 'stuck'`
(flagged for an operator: `SELECT unique_id, last_error FROM news WHERE problem = 'stuck'`;
re-arm with `dgb reconcile --reset-stuck`). Cleared automatically once the article is complete.

**Reports**: the task log, a `reconcile_runs` row (found, repaired, flagged, seconds) and StatsD
gauges `dgb.reconcile.<mode>.*`. The same from a shell: `dgb reconcile [--full] [--dry-run] [--json]`.

**Conf overrides** (manual runs): `older_than_s`, `window_hours`, `max_attempts`, `dry_run`,
`reset_stuck`, `drift`.
"""

with DAG(
    dag_id=RECONCILE_DAG_ID,
    schedule=daily_cron(),
    start_date=START,
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=3),
    default_args=DEFAULT_ARGS,
    tags=["dgb", "reconcile"],
    doc_md=f"""
### {RECONCILE_DAG_ID}
Daily reconciliation (the safety net for articles a stage never processed), `{daily_cron()}`
(UTC, `DGB_RECONCILE_DAILY_CRON`):
**every** article is checked for a stuck stage, and the whole Typesense collection is compared with
PostgreSQL (one export of ids and versions).
{COMMON_DOC}""",
) as reconcile_news:
    ReconcileOperator(task_id="reconcile", mode="daily", execution_timeout=timedelta(hours=2))

with DAG(
    dag_id=SWEEP_DAG_ID,
    schedule=timedelta(minutes=sweep_minutes()),
    start_date=START,
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(minutes=30),
    default_args={**DEFAULT_ARGS, "retry_delay": timedelta(seconds=30)},
    tags=["dgb", "reconcile"],
    doc_md=f"""
### {SWEEP_DAG_ID}
The light sweep, every {sweep_minutes()} minutes (`DGB_RECONCILE_SWEEP_MINUTES`): the same checks as
`{RECONCILE_DAG_ID}`, over the articles changed in the last `DGB_RECONCILE_SWEEP_WINDOW_HOURS`
(default 48) hours, their Typesense documents compared by filtered export.
{COMMON_DOC}""",
) as reconcile_sweep:
    ReconcileOperator(task_id="sweep", mode="sweep", execution_timeout=timedelta(minutes=20))

with DAG(
    dag_id=REDRIVE_DAG_ID,
    schedule=None,
    start_date=START,
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["dgb", "reconcile", "dead-letters"],
    params={
        "reason": Param(
            None,
            type=["null", "string"],
            description="only dead letters with this reason (e.g. malformed_llm_output, unknown_id)",
        ),
        "limit": Param(100, type="integer", minimum=1, maximum=100_000, description="at most this many"),
        "subscription": Param(
            None,
            type=["null", "string"],
            enum=[None] + [s.name for s in topology.SUBSCRIPTIONS],
            description="only dead letters of this subscription",
        ),
        "ids": Param(None, type=["null", "array"], description="only these dead_letters ids"),
        "dry_run": Param(False, type="boolean", description="report what would be redriven; change nothing"),
    },
    doc_md=f"""
### {REDRIVE_DAG_ID}
Manual: re-publishes selected **open** dead letters after the cause was fixed (dead letters are
handled explicitly by the pipeline, not by Pub/Sub), oldest first, and marks them `redriven`
(`resolved_at`, `resolution`).

`airflow dags trigger {REDRIVE_DAG_ID} -c '{{"reason": "malformed_llm_output", "limit": 50}}'`
(optional `subscription`, `ids`, `dry_run`). Inspect first:
`SELECT reason, subscription, count(*) FROM dead_letters WHERE status = 'open' GROUP BY 1, 2`.

An article's dead letter gets a fresh event built from PostgreSQL (the subscription's topic, or the
earliest stage the article still needs) and its `problem = 'dead_letter'` flag is cleared; a dead letter
without a known article is re-published with its original payload and attributes (one whose payload
is not JSON cannot be and stays open). A letter that fails again is re-opened by the stage. Outcome:
the task log and a `reconcile_runs` row (mode `redrive`). Shell: `dgb redrive --reason R --limit N`.
""",
) as redrive_dead_letters:
    RedriveOperator(task_id="redrive", execution_timeout=timedelta(minutes=30))

with DAG(
    dag_id=REPLAY_DAG_ID,
    schedule=None,
    start_date=START,
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["dgb", "reconcile", "replay"],
    params={
        "start": Param(
            None, type=["null", "string"], description="window start, ISO 8601 (UTC without offset)"
        ),
        "end": Param(None, type=["null", "string"], description="window end (exclusive), ISO 8601"),
        "topic": Param(topology.TOPIC_SCRAPED, type="string", enum=list(topology.TOPICS)),
        "mode": Param("republish", type="string", enum=["republish", "seek"]),
        "subscription": Param(None, type=["null", "string"], description="seek: only this subscription"),
        "limit": Param(50_000, type="integer", minimum=1),
        "dry_run": Param(False, type="boolean"),
        "fallback_republish": Param(
            False,
            type="boolean",
            description="seek: republish from PostgreSQL when Pub/Sub cannot snapshot/seek (else fail)",
        ),
    },
    doc_md=f"""
### {REPLAY_DAG_ID}
Manual: re-processes a time window.

`airflow dags trigger {REPLAY_DAG_ID} -c '{{"start": "2026-11-28T00:00:00Z", "end": "2026-11-29T00:00:00Z",
"topic": "dgb.news.scraped", "mode": "republish"}}'`

* `republish` (default): re-emits, from PostgreSQL, `topic`'s event of every article whose stage time
  (`scraped_at` / `enriched_at` / `embedded_at`) falls in `[start, end)`. **Idempotent**: the stages skip
  work already done (enrich: `enriched_at` set; embed: embedded with the current model; index:
  `indexed_version = version`), so replaying twice changes nothing; only what is missing gets done.
* `seek` (Pub/Sub replay, its recommended reprocessing workflow): for each subscription of `topic`
  (or `subscription`),
  snapshots it, creates a NEW subscription `<subscription>--replay-<stamp>` from the snapshot, seeks that
  one back to `start` (the topics retain 7 days of messages) and runs the consuming stage over the
  messages published in `[start, end)` there; then deletes the new subscription and the snapshot. The
  subscriptions the stage DAGs consume are never seeked. When Pub/Sub cannot do it (no snapshot/seek,
  a window older than the topic's retention) the task fails, unless `fallback_republish` is true: then
  it logs why and republishes instead.

Outcome: the task log and a `reconcile_runs` row (mode `replay`). Shell: `dgb replay --start ... --end ...`.
""",
) as replay_events:
    ReplayOperator(task_id="replay", execution_timeout=timedelta(hours=2))
