"""Which integrity DAGs exist and when they run (no Airflow import; dags/integrity.py builds them).

One DAG per tier of :class:`dgb.integrity.tiers.Schedule` (``integrity_tier_0_2d`` ...), each on
its tier's own interval, from the one configuration (``DGB_INTEGRITY_*``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from dgb.integrity.tiers import Schedule, Tier

POOL = "integrity_http"


@dataclass(frozen=True)
class TierDagSpec:
    dag_id: str
    tier: Tier
    every: timedelta
    batch_size: int

    @property
    def tier_name(self) -> str:
        return self.tier.name


def tier_dag_specs(schedule: Schedule | None = None) -> list[TierDagSpec]:
    schedule = schedule or Schedule.from_env()
    return [TierDagSpec(t.dag_id, t, schedule.dag_interval(t), schedule.batch_size) for t in schedule.tiers]


def dag_ids(settings=None) -> list[str]:
    return [s.dag_id for s in tier_dag_specs()]
