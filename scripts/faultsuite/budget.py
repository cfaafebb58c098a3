"""How long a long outage lasts: the stage tasks' Airflow retry budget (from the scheduler's
serialized stage DAGs) that a ``--quick`` outage must outlast, and the observation that a batch
spent it (or that the dependency's circuit breaker holds the work)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from dgb.pipeline import resilience

from .catalogue import EMULATOR_QUICK_OUTAGE_S, OUTAGE_S, STAGE_DAGS, Batch
from .context import Context
from .plumbing import log


def retry_budget(tasks: list[tuple[str, dict]]) -> dict:
    """The longest retry schedule among ``(dag_id, serialized task)``: retries, and the sum over
    them of the largest delay Airflow 3's ``TaskInstance.next_retry_datetime`` can pick
    (``retry_exponential_backoff`` is a multiplier there: True is 1.0, a flat delay; otherwise
    ``ceil(delay * m ** (try - 1))`` plus a hash of up to as much again, capped by ``max_retry_delay``)."""
    worst = {"delays_s": 0.0, "retries": 0, "where": ""}
    for dag_id, t in tasks:
        retries = int(t.get("retries") or 0)
        delay = t.get("retry_delay", 300.0)
        delay = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
        cap = t.get("max_retry_delay")
        cap = cap.total_seconds() if isinstance(cap, timedelta) else (float(cap) if cap else None)
        mult = t.get("retry_exponential_backoff") or 1.0
        mult = float(mult) if float(mult) > 0 else 1.0  # True is 1.0 (Airflow 3: a multiplier)
        total = 0.0
        for k in range(1, retries + 1):
            if mult != 1.0:
                low = max(1, math.ceil(delay * mult ** (k - 1)))
                d = 2 * low - 1
            else:
                d = delay
            total += min(d, cap) if cap else d
        if (total, retries) > (worst["delays_s"], worst["retries"]):
            worst = {"delays_s": total, "retries": retries, "where": f"{dag_id}.{t.get('task_id', '?')}"}
    return worst


class RetryBudget:
    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.cached: dict | None = None

    def stage(self) -> dict:
        """The stage tasks' Airflow retry settings, as the scheduler has them (serialized DAGs),
        and the longest time from a task's first failure to its last try's start: sum over the
        retries of the largest delay Airflow's ``next_retry_datetime`` can pick."""
        if self.cached is not None:
            return self.cached
        tasks = []
        try:
            for dag_id, data in self.ctx.af.query(
                "SELECT DISTINCT ON (dag_id) dag_id, data FROM serialized_dag WHERE dag_id = ANY(%s)"
                " ORDER BY dag_id, created_at DESC",
                (list(STAGE_DAGS),),
            ):
                for t in (data or {}).get("dag", {}).get("tasks", []):
                    t = t.get("__var", t)
                    tasks.append((dag_id, t))
        except Exception as exc:
            log(f"stage retry settings from the serialized DAGs: {exc}")
        if not tasks:  # not parsed yet: what dags/pipeline_stages.py sets
            from dgb.dags_meta import DEFAULT_ARGS

            tasks = [("stage DAGs", {**DEFAULT_ARGS, "retry_delay": 10.0, "max_retry_delay": 600.0})]
        worst = retry_budget(tasks)
        self.cached = worst
        log(
            f"stage retry budget: {worst['retries']} retries, at most {worst['delays_s']:.0f}s of retry"
            f" delays ({worst['where']})"
        )
        return worst

    def outage_s(self, batch: Batch) -> float:
        """Full: OUTAGE_S (10 min). --quick: longer than a stage task's whole Airflow retry budget
        (every try failing, ~20 s per try on 2 shared cores, Bedrock's own 1+2+4 s backoff per
        article in each try of the bedrock fault), plus 30 s for the batch to reach the stage; the
        emulator's, which fails no stage task, EMULATOR_QUICK_OUTAGE_S."""
        if self.ctx.args.outage_s:
            return self.ctx.args.outage_s
        if not self.ctx.quick:
            return OUTAGE_S
        if batch.fault == "emulator_down":
            return EMULATOR_QUICK_OUTAGE_S
        b = self.stage()
        per_try = 20.0
        if batch.fault == "bedrock_throttle":
            per_try += 9.0 * math.ceil(len(batch.titles) / 4)  # DGB_BEDROCK_CONCURRENCY=4
        return max(120.0, b["delays_s"] + (b["retries"] + 1) * per_try + 30.0)

    def retries_spent(self, batch: Batch, since: datetime) -> bool:
        """The Airflow retry budget is spent against the outage, whatever each try took (the
        Typesense client's retries, Bedrock's backoff): a stage task instance ended its last try
        since the outage began (failed: a failure of the whole task before any article is handled;
        or succeeded with the work left pending, as the stages end a last try in an outage), or
        every article of the batch failed as many tries as a stage task has (``news.attempts``
        counts a stage's transient failures) or was dead-lettered."""
        tries = self.stage()["retries"] + 1
        if self.breaker_holds(batch, since):
            return True
        failed = self.ctx.af.query(
            "SELECT count(*) FROM task_instance WHERE dag_id = ANY(%s) AND state IN ('failed', 'success')"
            " AND try_number >= %s AND end_date >= %s",
            (list(STAGE_DAGS), tries, since),
        )[0][0]
        if failed:
            return True
        uids = list(batch.uids.values())
        if len(uids) < len(batch.titles):
            return False
        n = self.ctx.db.query(
            "SELECT count(*) FROM news WHERE unique_id = ANY(%s)"
            " AND (attempts >= %s OR problem = 'dead_letter')",
            (uids, tries),
        )[0][0]
        return n >= len(uids)

    def breaker_holds(self, batch: Batch, since: datetime) -> bool:
        """The stage stopped spending its tries on the outage: the dependency's circuit breaker
        is open at its longest cool-down (it re-opened up to ``DGB_BREAKER_MAX_COOLDOWN_S``), and
        a run of the stage DAG that started after that ended successfully (it deferred the batch
        rather than fail or dead-letter it). From then on every run does the same until the
        dependency answers again, so a longer outage would test nothing more; this is what ends
        ``--quick``'s outage when the breakers, not the Airflow retries, hold the work."""
        dep, dag_ids = {
            "typesense_down": (resilience.TYPESENSE, ["index_news"]),
            "model_down": (resilience.MODEL_SERVICE, ["enrich_news", "embed_news"]),
            "bedrock_throttle": (resilience.BEDROCK, ["enrich_news"]),
        }.get(batch.fault, (None, None))
        if dep is None:
            return False
        b = resilience.Breakers(self.ctx.db.get(), [dep])
        self.ctx.db.get().commit()
        state = b.states[dep]
        at_cap = b.cooldown(state.opens) >= b.max_cooldown_s
        if b.state(dep) == resilience.CLOSED or not at_cap or state.open_until is None:
            return False
        opened = state.open_until - timedelta(seconds=b.cooldown(state.opens))  # its latest opening
        if opened < since:
            return False
        n = self.ctx.af.query(
            "SELECT count(*) FROM task_instance WHERE dag_id = ANY(%s) AND state = 'success'"
            " AND start_date >= %s",
            (dag_ids, opened),
        )[0][0]
        if n:
            batch.note += f" held_by_breaker={dep}"
        return bool(n)
