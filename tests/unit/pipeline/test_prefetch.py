"""dgb.pipeline.prefetch: the answer is taken only for the rows it was started for, and a
failure comes back as the same exception where the stage would have called the model itself."""

from __future__ import annotations

import pytest

from dgb.pipeline.prefetch import MISSING, Ahead


def test_the_answer_goes_to_the_same_rows_only():
    ahead = Ahead()
    assert ahead.take(("a",)) is MISSING  # nothing started
    ahead.start(("a", "b"), lambda xs: [x.upper() for x in xs], ["a", "b"])
    assert ahead.take(("a", "c")) is MISSING  # other rows: the caller makes its own call
    assert ahead.take(("a", "b")) is MISSING  # the mismatch dropped it
    ahead.start(("a", "b"), lambda xs: [x.upper() for x in xs], ["a", "b"])
    assert ahead.take(("a", "b")) == ["A", "B"]
    assert ahead.take(("a", "b")) is MISSING  # taken once


def test_a_failure_is_raised_where_the_answer_is_taken():
    ahead = Ahead()

    def boom(_):
        raise TimeoutError("model service timed out")

    ahead.start(("x",), boom, None)
    with pytest.raises(TimeoutError, match="timed out"):
        ahead.take(("x",))
