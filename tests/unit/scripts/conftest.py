"""Fixtures of the scripts' unit tests."""

from __future__ import annotations

from types import SimpleNamespace

import pytest


@pytest.fixture
def fake_time():
    """A stand-in for the ``time`` module: ``monotonic()`` reads ``now``, ``sleep(s)`` adds to it."""
    clock = SimpleNamespace(now=1000.0)
    clock.monotonic = lambda: clock.now
    clock.sleep = lambda seconds: setattr(clock, "now", clock.now + seconds)
    return clock
