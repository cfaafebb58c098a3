"""Which integrity DAGs exist and when they run (no Airflow import; dags/integrity.py builds them).

* ``DGB_INTEGRITY_SCHEDULE=budget`` (the default, issue 14): one DAG, ``integrity_budget``, every
  slot (``DGB_INTEGRITY_SLOT_S``, 10 min): the load sensor, then one budget run
  (:func:`dgb.integrity.runs.run_budget`) taking what the request budget allows in the slot;
* ``tiers`` / ``exponential``: one DAG per tier of :class:`dgb.integrity.tiers.Schedule`
  (``integrity_tier_0_2d`` ...), each on its tier's own interval, a fixed batch per run, the load
  sensor first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from dgb.integrity.tiers import BudgetPolicy, Schedule, Tier

POOL = "integrity_http"
BUDGET_DAG_ID = "integrity_budget"


@dataclass(frozen=True)
class TierDagSpec:
    dag_id: str
    tier: Tier
    every: timedelta
    batch_size: int

    @property
    def tier_name(self) -> str:
        return self.tier.name


@dataclass(frozen=True)
class BudgetDagSpec:
    dag_id: str
    every: timedelta
    budget_rps: float | None  # None: integrity's share of the host budget, per run


def tier_dag_specs(schedule: Schedule | None = None) -> list[TierDagSpec]:
    schedule = schedule or Schedule.from_env()
    return [TierDagSpec(t.dag_id, t, schedule.dag_interval(t), schedule.batch_size) for t in schedule.tiers]


def budget_dag_spec(policy: BudgetPolicy | None = None) -> BudgetDagSpec:
    policy = policy or BudgetPolicy.from_env()
    return BudgetDagSpec(BUDGET_DAG_ID, timedelta(seconds=policy.slot_seconds), policy.budget_rps)


def dag_ids(settings=None) -> list[str]:
    schedule = Schedule.from_env()
    if schedule.mode == "budget":
        return [BUDGET_DAG_ID]
    return [s.dag_id for s in tier_dag_specs(schedule)]
