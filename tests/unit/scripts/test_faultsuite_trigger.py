"""The fault suite triggers its scrape DAG runs through Airflow's REST API and falls back on the
``airflow dags trigger`` CLI only when the API cannot be reached (faultsuite.articles)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "scripts"))  # scripts/ is not a package: its faultsuite is

from faultsuite import articles  # noqa: E402

from dgb_dev.stack import airflow_rest  # noqa: E402


def trigger(monkeypatch, api, cli_exit: int | None = 0):
    """Run articles.trigger_dag_run with ``api`` as the REST call; returns (result, CLI argvs, pauses)."""
    calls: list[list[str]] = []
    pauses: list[float] = []

    def cli(settings, argv, check, capture):
        calls.append(argv)
        return SimpleNamespace(returncode=cli_exit, stderr="boom")

    monkeypatch.setattr(airflow_rest, "trigger_dag_run", api)
    monkeypatch.setattr(articles.stack, "airflow_cli", cli)
    monkeypatch.setattr(articles, "log", lambda msg: None)
    result = articles.trigger_dag_run(object(), "scrape_mec", {"k": 1}, sleep=pauses.append)
    return result, calls, pauses


def test_the_api_triggers_and_the_cli_is_not_started(monkeypatch):
    result, calls, pauses = trigger(monkeypatch, lambda s, dag_id, conf: "manual__1")
    assert (result, calls, pauses) == ("api", [], [])


def test_the_cli_is_the_fallback_when_the_api_is_unreachable(monkeypatch):
    def unreachable(s, dag_id, conf):
        raise airflow_rest.ApiUnreachable("connection refused")

    result, calls, pauses = trigger(monkeypatch, unreachable)
    assert result == "cli"
    assert calls == [["dags", "trigger", "scrape_mec", "-c", '{"k": 1}']]
    assert pauses == []


def test_a_refused_trigger_is_retried_and_then_given_up_without_the_cli(monkeypatch):
    def refused(s, dag_id, conf):
        raise airflow_rest.ApiError(404, "no such DAG")

    result, calls, pauses = trigger(monkeypatch, refused)
    assert result is None and calls == []
    assert pauses == [articles.TRIGGER_PAUSE_S] * articles.TRIGGER_TRIES


def test_a_failing_cli_fallback_is_retried(monkeypatch):
    def unreachable(s, dag_id, conf):
        raise airflow_rest.ApiUnreachable("HTTP 503")

    result, calls, pauses = trigger(monkeypatch, unreachable, cli_exit=1)
    assert result is None
    assert len(calls) == len(pauses) == articles.TRIGGER_TRIES
