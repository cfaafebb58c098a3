"""The scrape tasks' priority weight (plugins/dgb_airflow/priority.py): the time in a run id, a run
of an older minute weighing more, the runs of one dispatcher tick in an order that is not the
alphabet's, and the strategy registered where Airflow looks for it."""

from __future__ import annotations

import statistics
from datetime import UTC, datetime

import pytest

from dgb.agencies import load_agencies
from dgb_airflow.priority import EPOCH_S, OldestRunFirst, oldest_first_weight, run_time_s, tick_rank

AT = datetime(2026, 12, 5, 5, 22, 6, 697244, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    "run_id",
    [
        "asset_triggered__2026-12-05T05:22:06.697244+00:00_QbGiLTNQ",
        "manual__2026-12-05T05:22:06.697244+00:00",
        "scheduled__2026-12-05T05:22:06.697244+00:00",
        "manual__2026-12-05T02:22:06.697244-03:00",
        "manual__2026-12-05T05:22:06.697244Z",
        "backfill__2026-12-05T05:22:06.697244",  # naive: UTC
    ],
)
def test_the_time_airflow_writes_in_a_run_id_is_read(run_id):
    assert run_time_s(run_id) == pytest.approx(AT)


@pytest.mark.parametrize("run_id", ["", "my-backfill", "manual__yesterday", "manual__2026-13-45T99:99:99"])
def test_a_run_id_without_a_time_weighs_as_a_run_made_now(run_id):
    assert run_time_s(run_id) is None
    minute = int((AT - EPOCH_S) // 60)
    rank = tick_rank("scrape_mec", minute)
    assert oldest_first_weight(run_id, "scrape_mec", now_s=AT) == -(minute * 60 + rank)


def _run_id(at_s: float) -> str:
    return f"asset_triggered__{datetime.fromtimestamp(at_s, UTC).isoformat()}_x"


def test_a_run_of_an_older_minute_weighs_more_whatever_the_dag_and_every_weight_stays_under_1():
    dags = [f"scrape_{k}" for k in sorted(load_agencies())]
    at = EPOCH_S + 6 * 365 * 86400  # a minute's start
    older = [oldest_first_weight(_run_id(at + 59.9), d) for d in dags]  # the minute's last moment
    newer = [oldest_first_weight(_run_id(at + 60), d) for d in dags]
    assert min(older) > max(newer)
    assert max(older) < 1
    assert oldest_first_weight("manual__2020-01-01T00:00:00+00:00", "scrape_mec") <= -1  # never 0 or more
    latest = oldest_first_weight("manual__2088-01-01T00:00:59+00:00", "scrape_mec")
    assert latest > -(2**31)  # an int32 column


def test_the_runs_of_one_tick_are_not_started_in_the_alphabets_order():
    """Seed 27's chaos hour: the runs one dispatcher tick made tied on whole seconds and went by DAG
    id, so the waits grew with the alphabet. Over 1,000 ticks every agency's mean place among the
    ~170 runs of its tick is near the middle (0 = first, 1 = last; the alphabet gave 0 ... 1)."""
    dags = [f"scrape_{k}" for k in sorted(load_agencies())]
    places: dict[str, list[float]] = {d: [] for d in dags}
    start = EPOCH_S + 6 * 365 * 86400 + 2
    for tick in range(1000):
        run_id = _run_id(start + tick * 60)  # the same second for every run of the tick
        order = sorted(dags, key=lambda d: -oldest_first_weight(run_id, d))
        for place, d in enumerate(order):
            places[d].append(place / (len(dags) - 1))
    means = {d: statistics.mean(v) for d, v in places.items()}
    assert len(dags) > 150 and all(0.44 < m < 0.56 for m in means.values()), means
    tenth = len(dags) // 10
    first = statistics.mean([means[d] for d in dags[:tenth]])
    last = statistics.mean([means[d] for d in dags[-tenth:]])
    assert abs(first - last) < 0.05


def test_the_strategy_reads_the_task_instances_run_id():
    from types import SimpleNamespace

    ti = SimpleNamespace(
        run_id="asset_triggered__2026-12-05T05:22:06.697244+00:00_QbGiLTNQ", dag_id="scrape_mec"
    )
    assert OldestRunFirst().get_weight(ti) == oldest_first_weight(ti.run_id, "scrape_mec")
    assert OldestRunFirst().get_weight(ti) != OldestRunFirst().get_weight(
        SimpleNamespace(run_id=ti.run_id, dag_id="scrape_saude")
    )


def test_airflows_plugin_manager_registers_it_by_its_import_path():
    from airflow import plugins_manager

    from dgb.dags_meta import SCRAPE_WEIGHT_RULE

    assert plugins_manager.get_priority_weight_strategy_plugins()[SCRAPE_WEIGHT_RULE] is OldestRunFirst
