"""Numeric settings: one reader (dgb.config.env_number) for ports, thresholds and ratios."""

import pytest

from dgb.config import env_number


def test_unset_or_empty_gives_the_default(monkeypatch):
    monkeypatch.delenv("DGB_X", raising=False)
    assert env_number("DGB_X", 7, integer=True) == 7
    monkeypatch.setenv("DGB_X", "  ")
    assert env_number("DGB_X", None, minimum=0.0) is None


def test_values_are_parsed_and_range_checked(monkeypatch):
    monkeypatch.setenv("DGB_X", "0.25")
    assert env_number("DGB_X", 1.0, above=0.0, maximum=1.0) == 0.25
    for raw, kwargs, message in (
        ("abc", {"integer": True}, "DGB_X must be an integer, got 'abc'"),
        ("1.5", {"integer": True}, "must be an integer"),
        ("0", {"above": 0.0}, "DGB_X must be > 0.0, got '0'"),
        ("-1", {"minimum": 0}, "DGB_X must be >= 0, got '-1'"),
        ("1.01", {"maximum": 1.0}, "DGB_X must be <= 1.0, got '1.01'"),
    ):
        monkeypatch.setenv("DGB_X", raw)
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
            env_number("DGB_X", 0, **kwargs)


def test_flags_have_one_parser(monkeypatch):
    """env_flag: the on/off words in any case; unset or empty gives the default; anything else is
    an error naming the variable (never quietly on or off)."""
    from dgb.config import env_flag

    monkeypatch.delenv("DGB_X", raising=False)
    assert env_flag("DGB_X", True) is True and env_flag("DGB_X", False) is False
    monkeypatch.setenv("DGB_X", "")
    assert env_flag("DGB_X", True) is True
    for raw, expected in (("1", True), ("TRUE", True), ("yes", True), ("On", True)):
        monkeypatch.setenv("DGB_X", raw)
        assert env_flag("DGB_X", False) is expected, raw
    for raw in ("0", "false", "No", "OFF"):
        monkeypatch.setenv("DGB_X", raw)
        assert env_flag("DGB_X", True) is False, raw
    monkeypatch.setenv("DGB_X", "maybe")
    with pytest.raises(ValueError, match="DGB_X must be a boolean"):
        env_flag("DGB_X", True)


def test_text_settings_and_only_what_is_set(monkeypatch):
    from dgb.config import env_str, only_set

    monkeypatch.setenv("DGB_X", "")
    assert env_str("DGB_X", "fallback") == "fallback"
    monkeypatch.setenv("DGB_X", "value")
    assert env_str("DGB_X", "fallback") == "value"
    assert only_set(a=1, b=None, c=0, d="") == {"a": 1, "c": 0, "d": ""}
