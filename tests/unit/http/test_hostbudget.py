"""Host budget settings (no database): per-host limits, overrides, priorities, bad values."""

from __future__ import annotations

import pytest

from dgb.hostbudget import (
    BudgetConfig,
    HostLimits,
    host_key,
    parse_host_budgets,
    priority_value,
    window_cap,
)


def test_defaults_give_gov_br_and_every_other_host_two_per_second_two_in_flight(monkeypatch):
    for name in ("DGB_HOST_BUDGETS", "DGB_HOST_RPS", "DGB_HOST_MAX_IN_FLIGHT", "DGB_HOST_RESERVED_IN_FLIGHT"):
        monkeypatch.delenv(name, raising=False)
    cfg = BudgetConfig.from_env()
    assert cfg.limits("www.gov.br") == HostLimits(2.0, 2, 1)
    assert cfg.limits("127.0.0.1:8090") == HostLimits(2.0, 2, 1)  # the local mirror: a host like any other


def test_overrides_and_defaults_from_the_environment(monkeypatch):
    monkeypatch.setenv("DGB_HOST_RPS", "0.5")
    monkeypatch.setenv("DGB_HOST_MAX_IN_FLIGHT", "1")
    monkeypatch.setenv("DGB_HOST_BUDGETS", " WWW.GOV.BR=3/4 , agenciabrasil.ebc.com.br=1 ")
    cfg = BudgetConfig.from_env()
    assert cfg.limits("www.gov.br") == HostLimits(3.0, 4, 1)
    assert cfg.limits("agenciabrasil.ebc.com.br") == HostLimits(1.0, 1, 1)  # in flight: the default
    assert cfg.limits("tvbrasil.ebc.com.br") == HostLimits(0.5, 1, 1)


@pytest.mark.parametrize("raw", ["www.gov.br", "www.gov.br=0", "www.gov.br=2/0", "=2/2", "x=fast"])
def test_bad_overrides_name_the_setting(raw):
    with pytest.raises(ValueError, match="DGB_HOST_BUDGETS"):
        parse_host_budgets(raw)


def test_bad_numbers_name_the_variable(monkeypatch):
    monkeypatch.setenv("DGB_HOST_RPS", "0")
    with pytest.raises(ValueError, match="DGB_HOST_RPS"):
        BudgetConfig.from_env()


def test_priorities_and_host_keys():
    assert priority_value("scrape") < priority_value("integrity")
    with pytest.raises(ValueError, match="unknown request priority"):
        priority_value("bulk")
    assert host_key("https://WWW.gov.br/mec/pt-br/x?y=1") == "www.gov.br"
    assert host_key("http://127.0.0.1:8090/www.gov.br/mec") == "127.0.0.1:8090"


def test_task_fetcher_lets_the_budget_space_requests(monkeypatch):
    from dgb.hostbudget import HostBudget, task_fetcher

    monkeypatch.delenv("DGB_FETCH_MIN_INTERVAL", raising=False)
    monkeypatch.delenv("DGB_HOST_BUDGET", raising=False)
    with task_fetcher("integrity") as f:  # the budget connects on first use only: nothing opened here
        assert isinstance(f.budget, HostBudget) and f.priority == "integrity"
        assert f.policy.min_interval == 0.0
    monkeypatch.setenv("DGB_HOST_BUDGET", "0")
    with task_fetcher("scrape") as f:  # no shared budget: the fetcher spaces its own requests
        assert f.budget is None and f.policy.min_interval == 1.0
    monkeypatch.setenv("DGB_HOST_BUDGET", "1")
    monkeypatch.setenv("DGB_FETCH_MIN_INTERVAL", "0.5")
    with task_fetcher("scrape") as f:  # an explicit per-task floor is kept
        assert f.policy.min_interval == 0.5
    with pytest.raises(ValueError, match="unknown request priority"):
        task_fetcher("bulk")


def test_window_cap_keeps_one_token_of_margin_where_it_costs_little(monkeypatch):
    assert window_cap(2.0, 10.0) == 19  # www.gov.br: never 2.0/s over 10 s, even with jitter
    assert window_cap(1.0, 10.0) == 9
    assert window_cap(0.5, 10.0) == 5  # below 10 a window the 1/rate spacing alone decides
    assert window_cap(0.05, 10.0) == 1
    monkeypatch.delenv("DGB_HOST_WINDOW", raising=False)
    assert BudgetConfig.from_env().window_s == 10.0
    monkeypatch.setenv("DGB_HOST_WINDOW", "0")
    assert BudgetConfig.from_env().window_s == 0.0
    monkeypatch.setenv("DGB_HOST_WINDOW", "-1")
    with pytest.raises(ValueError, match="DGB_HOST_WINDOW"):
        BudgetConfig.from_env()
