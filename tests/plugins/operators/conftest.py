"""Fixtures of the operators' tests."""

from __future__ import annotations

from functools import partial

import pytest


@pytest.fixture(autouse=True)
def short_dead_letter_pulls(monkeypatch):
    """The safety-net operators bring the dead-letter topics into the table with
    ``dgb.deadletters.record_from_topics``, whose last pull of each subscription comes back empty
    and waits out the pull timeout (5 s; the emulator answers an empty pull 1 s before the timeout).
    Here the timeout is 2 s, passed through the function's own ``timeout`` parameter: a message
    on a dead-letter subscription is still answered at once, so what the operators record is the
    same."""
    from dgb import deadletters

    monkeypatch.setattr(
        deadletters, "record_from_topics", partial(deadletters.record_from_topics, timeout=2.0)
    )
