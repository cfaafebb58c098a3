"""ReplayRequest: the one description of a replay, read from ``dgb replay``'s options and from the
``replay_events`` DAG's conf (dgb.reconcile.replay)."""

import pytest

from dgb import topology
from dgb.reconcile.replay import ReplayRequest

WINDOW = {"start": "2026-11-01T00:00:00+00:00", "end": "2026-11-02T00:00:00+00:00"}


def test_conf_needs_a_window():
    for conf in ({}, {"start": WINDOW["start"]}, {"end": WINDOW["end"]}, {**WINDOW, "start": ""}):
        with pytest.raises(ValueError, match="'start' and 'end'"):
            ReplayRequest.from_conf(conf)


def test_conf_defaults_are_the_cli_defaults():
    """Unset and empty conf values give the same request as the CLI's defaults."""
    expected = ReplayRequest(WINDOW["start"], WINDOW["end"])
    assert ReplayRequest.from_conf(WINDOW) == expected
    empty = {**WINDOW, "topic": "", "mode": "", "subscription": "", "limit": "", "dry_run": False}
    assert ReplayRequest.from_conf(empty) == expected
    assert expected.topic == topology.TOPIC_SCRAPED and expected.mode == "republish"
    assert expected.limit == 50_000 and not expected.dry_run and not expected.fallback_republish


def test_conf_values_are_taken():
    conf = {
        **WINDOW,
        "topic": topology.TOPIC_ENRICHED,
        "mode": "seek",
        "subscription": topology.SUB_EMBEDDINGS,
        "limit": "20",
        "dry_run": True,
        "fallback_republish": True,
    }
    request = ReplayRequest.from_conf(conf)
    assert request == ReplayRequest(
        WINDOW["start"],
        WINDOW["end"],
        topic=topology.TOPIC_ENRICHED,
        mode="seek",
        subscription=topology.SUB_EMBEDDINGS,
        limit=20,
        dry_run=True,
        fallback_republish=True,
    )
