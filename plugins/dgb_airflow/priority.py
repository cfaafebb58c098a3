"""Which waiting scrape task Airflow starts first: the one whose run is the oldest.

Airflow's scheduler starts the task instances waiting for a pool slot in order of their priority
weight, then of their run's logical date. Asset-triggered runs (every scrape DAG's: the dispatcher's
due assets set them off) have no logical date, so among equal weights the order is whatever
PostgreSQL returns, in practice the DAG id's. With the ``scrape_http`` pool full, agencies late in
the alphabet waited while earlier ones ran again: in the chaos hour of seed 26 the mean wait from a
scrape run's event to its task's start grew steadily from 18 s (``scrape_agricultura``) to 103 s
(``scrape_turismo``), the longest from 136 s to 1,041 s (docs/benchmarks.md).

:class:`OldestRunFirst` weighs a task by its run's time, the one Airflow writes into every run id
(``asset_triggered__<time>_<suffix>``, ``manual__<time>``, ``scheduled__<time>``): minus the seconds
since 2020, so the older run goes first. The weights are negative, so the scrape tasks rank after
every task of Airflow's default weight (1): the stage DAGs' and the dispatcher's, which the DAG-id
order mostly put first already. A run id without a time (one given by hand) weighs as a run made
now.

Whole seconds were not enough: the runs one dispatcher tick sets off are made within the same
second, in DAG id order, so they tied and the tie still went by the alphabet (chaos hour of seed 27:
mean/longest wait 12/107 s for ``scrape_agricultura``, 59/150 s for ``scrape_turismo``). So the
weight counts whole minutes (the dispatcher's tick) and, within a minute, a rank in 0-59 drawn from
the DAG id and that minute (a stable hash): a run of an older minute still goes first, and among the
runs of one tick the order is shuffled afresh every minute, so no agency is always last. The weight
keeps the magnitude of seconds since 2020, so it fits Airflow's int32 column until 2088.

Registered by ``dgb_airflow_plugins.DgbPipelinePlugin``; the scrape DAGs name it by its import path.
"""

from __future__ import annotations

import re
import time
import zlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from airflow.task.priority_strategy import PriorityWeightStrategy

if TYPE_CHECKING:
    from airflow.models.taskinstance import TaskInstance

EPOCH_S = datetime(2020, 1, 1, tzinfo=UTC).timestamp()
# the time Airflow puts after the run type in a run id: 2026-12-05T05:22:06.697244+00:00
_RUN_TIME = re.compile(r"__(\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)")


def run_time_s(run_id: str) -> float | None:
    """Epoch seconds of the time in an Airflow run id, or None when it holds none (naive: UTC)."""
    match = _RUN_TIME.search(run_id or "")
    if match is None:
        return None
    try:
        at = datetime.fromisoformat(match.group(1))
    except ValueError:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.timestamp()


def tick_rank(dag_id: str, minute: int) -> int:
    """0-59: where a DAG's run stands among the runs of one minute (stable, reshuffled each minute)."""
    return zlib.crc32(f"{dag_id}|{minute}".encode()) % 60


def oldest_first_weight(run_id: str, dag_id: str = "", now_s: float | None = None) -> int:
    """The priority weight of a task of DAG ``dag_id``'s run ``run_id``: higher for a run of an
    older minute, shuffled among the runs of one minute, always below 1."""
    at = run_time_s(run_id)
    if at is None:
        at = time.time() if now_s is None else now_s
    minute = int((at - EPOCH_S) // 60)
    return -max(1, minute * 60 + tick_rank(dag_id, minute))


class OldestRunFirst(PriorityWeightStrategy):
    """Priority weight strategy: a task of an older run first (see the module docstring)."""

    def get_weight(self, ti: TaskInstance) -> int:
        return oldest_first_weight(ti.run_id, ti.dag_id)
