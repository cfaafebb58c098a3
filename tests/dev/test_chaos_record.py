"""The chaos run's summary line (dgb_dev.chaos.record): the exact form the issue names, every key in
its order, numbers readable (an unrecovered fault prints inf, a p95 of no articles nan)."""

from __future__ import annotations

import math

from dgb_dev.chaos.record import SUMMARY_KEYS, summary_line


def figures(**over) -> dict:
    base = dict.fromkeys(SUMMARY_KEYS, 0)
    base |= {"worst_recovery_s": 41.25, "fresh_p95_s": 183.4, "max_rps_10s": 1.9, "seed": 7}
    return base | over


def test_the_line_has_every_key_in_the_issue_order():
    line = summary_line(figures())
    assert line == (
        "chaos: lost=0 duplicated=0 wrong=0 stuck=0 faults=0 faults_unconfirmed=0"
        " worst_recovery_s=41.2 fresh_p95_s=183.4 max_rps_10s=1.90 seed=7"
    )


def test_unrecovered_and_empty_figures_stay_visible():
    line = summary_line(figures(worst_recovery_s=math.inf, fresh_p95_s=math.nan, lost=3))
    assert "lost=3 " in line and "worst_recovery_s=inf" in line and "fresh_p95_s=nan" in line


def test_scrape_waits_are_summed_per_dag_in_dag_id_order():
    from dgb_dev.chaos.record import wait_figures

    rows = [("scrape_turismo", 1041.2), ("scrape_agricultura", 10.0), ("scrape_turismo", 3.0)]
    rows.append(("scrape_agricultura", -0.4))  # a task started before its run's event: no wait
    assert wait_figures(rows) == {
        "scrape_agricultura": {"runs": 2, "mean_s": 5.0, "max_s": 10.0},
        "scrape_turismo": {"runs": 2, "mean_s": 522.1, "max_s": 1041.2},
    }
    assert list(wait_figures(rows)) == ["scrape_agricultura", "scrape_turismo"]
    assert wait_figures([]) == {}
