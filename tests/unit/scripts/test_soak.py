"""The chaos soak's pure parts (scripts/bench_soak.py, scripts/faultsuite/chaos.py): the summary
line contract, the seeded fault draw, and what a fault asks of the site (the hour-long run itself
is a benchmark: README, "Benchmarks")."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))

import bench_soak  # noqa: E402
from faultsuite import chaos  # noqa: E402

SUMMARY = re.compile(
    r"soak: lost=(\d+) duplicated=(\d+) dead_lettered_healthy=(\d+) index_equal=([01])"
    r" max_rps_10s=([\d.]+) faults=(\d+) worst_recovery_s=([\d.]+) fresh_p95_s=([\d.]+|nan) seed=(\d+)"
)


def test_the_summary_line_contract():
    line = bench_soak.summary_line(
        {
            "lost": 0,
            "duplicated": 1,
            "dead_lettered_healthy": 2,
            "index_equal": 1,
            "max_rps_10s": 1.9,
            "faults": 12,
            "worst_recovery_s": 61.25,
            "fresh_p95_s": 97.0,
            "seed": 42,
        }
    )
    assert line == (
        "soak: lost=0 duplicated=1 dead_lettered_healthy=2 index_equal=1 max_rps_10s=1.90 faults=12"
        " worst_recovery_s=61.2 fresh_p95_s=97.0 seed=42"
    )
    assert SUMMARY.fullmatch(line)


def _chaos(seed):
    ctx = SimpleNamespace(s=None, af=None, db=None)
    return chaos.Chaos(ctx, seed, "http://127.0.0.1:1")


def test_the_same_seed_draws_the_same_faults_at_the_same_gaps():
    a, b, c = _chaos(7), _chaos(7), _chaos(8)
    draw = [(x.draw(), round(x.next_gap_s(300), 6)) for x in (a,) for _ in range(40)]
    again = [(b.draw(), round(b.next_gap_s(300), 6)) for _ in range(40)]
    other = [(c.draw(), round(c.next_gap_s(300), 6)) for _ in range(40)]
    assert draw == again and draw != other
    assert all(f in chaos.CHAOS for f, _ in draw)
    assert all(240 <= gap <= 360 for _, gap in draw)  # every 5 min +- 20%


def test_the_catalogue_holds_every_fault_the_issues_name():
    soak = {
        "kill_scheduler",
        "kill_triggerer",
        "kill_dag_processor",
        "kill_task",
        "kill_model",
        "restart_postgres",
        "restart_typesense",
        "restart_emulator",
        "typesense_outage",
        "model_outage",
        "site_503",
    }
    assert set(chaos.SOAK_FAULTS) == soak  # issue 28's soak
    assert set(chaos.CHAOS) == soak | {  # issue 39's chaos run
        "kill_api_server",
        "kill_postgres",
        "kill_typesense",
        "site_slow",
        "pause_scheduler",
        "pause_triggerer",
        "pause_typesense",
        "pause_model",
        "pause_task",
        "overlap",
        "upgrade",
    }
    assert chaos.CHAOS["typesense_outage"][1] == chaos.CHAOS["model_outage"][1] == 300
    assert chaos.CHAOS["site_503"][1] == chaos.CHAOS["site_slow"][1] == 180


def test_the_site_outage_answers_503_everywhere_then_clears(monkeypatch):
    sent = []
    c = _chaos(1)
    monkeypatch.setattr(c, "_site_fault", sent.append)
    monkeypatch.setattr(c, "_probe", lambda: (503, 0.01))
    monkeypatch.setattr(chaos.time, "sleep", lambda s: sent.append(("slept", round(s))))
    out = c._inject("site_503", 180, {})
    assert (out.detail, out.confirmed) == ("held_s=180", True)
    assert sent == [
        {"path_prefix": "/", "fault": "503", "retry_after": 30},
        ("slept", 180),
        {"clear": True},
    ]
