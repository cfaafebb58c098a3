"""The scrape tasks' priority weight (plugins/dgb_airflow/priority.py): the time in a run id, the
older run weighing more, and the strategy registered where Airflow looks for it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dgb_airflow.priority import EPOCH_S, OldestRunFirst, oldest_first_weight, run_time_s

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
    assert oldest_first_weight(run_id, now_s=AT) == -int(AT - EPOCH_S)


def test_an_older_run_weighs_more_and_every_weight_stays_under_the_default():
    older = oldest_first_weight("asset_triggered__2026-12-05T05:22:06+00:00_a")
    newer = oldest_first_weight("asset_triggered__2026-12-05T05:22:07+00:00_b")
    assert older == newer + 1 and older < 1
    assert oldest_first_weight("manual__2020-01-01T00:00:00+00:00") == -1  # never 0 or more
    assert oldest_first_weight("manual__2088-01-01T00:00:00+00:00") > -(2**31)  # an int32 column


def test_the_strategy_reads_the_task_instances_run_id():
    from types import SimpleNamespace

    ti = SimpleNamespace(run_id="asset_triggered__2026-12-05T05:22:06.697244+00:00_QbGiLTNQ")
    assert OldestRunFirst().get_weight(ti) == oldest_first_weight(ti.run_id)


def test_airflows_plugin_manager_registers_it_by_its_import_path():
    from airflow import plugins_manager

    from dgb.dags_meta import SCRAPE_WEIGHT_RULE

    assert plugins_manager.get_priority_weight_strategy_plugins()[SCRAPE_WEIGHT_RULE] is OldestRunFirst
