"""dgb.pipeline.prefetch: the answer is taken only for the rows it was started for, a call starts
while the one before still runs (up to ``depth`` threads), at most ``depth`` are kept, and a failure
comes back as the same exception where the stage would have called the model itself."""

from __future__ import annotations

import threading

import pytest

from dgb.pipeline.prefetch import MISSING, Ahead


def upper(xs):
    return [x.upper() for x in xs]


def test_the_answer_goes_to_the_same_rows_only():
    ahead = Ahead()
    assert ahead.take(("a",)) is MISSING  # nothing started
    ahead.start(("a", "b"), upper, ["a", "b"])
    assert ahead.take(("a", "c")) is MISSING  # other rows: the caller makes its own call
    assert ahead.take(("a", "b")) == ["A", "B"]  # a miss (a bisected chunk) leaves the call pending
    assert ahead.take(("a", "b")) is MISSING  # taken once


def test_the_next_call_starts_while_the_current_one_runs_and_both_answers_are_kept():
    """The next chunk's request must reach the model service while the current call is still
    busy (with one thread it waited for the current call's Python work after the model's answer,
    and the model sat idle between chunks)."""
    gate, second_done, order = threading.Event(), threading.Event(), []

    def slow(xs):
        gate.wait(5)
        order.append(tuple(xs))
        return upper(xs)

    def fast(xs):
        order.append(tuple(xs))
        second_done.set()
        return upper(xs)

    ahead = Ahead(depth=2)
    ahead.start(("k",), slow, ["k"])
    ahead.start(("k1",), fast, ["k1"])
    ahead.start(("k1",), fast, ["k1"])  # already pending: not started twice
    assert ahead.pending() == 2
    assert second_done.wait(5), "the second call waited for the first one to end"
    gate.set()
    assert ahead.take(("k",)) == ["K"]
    assert ahead.take(("k1",)) == ["K1"]
    assert order == [("k1",), ("k",)]  # the second ran while the first was still running


def test_only_depth_calls_are_kept_the_oldest_is_dropped():
    gate = threading.Event()
    ran = []

    def call(xs):
        gate.wait(5)
        ran.append(tuple(xs))
        return upper(xs)

    ahead = Ahead(depth=2)
    for key in ("a", "b", "c"):
        ahead.start((key,), call, [key])
    assert ahead.pending() == 2
    assert ahead.take(("a",)) is MISSING  # dropped when "c" started
    gate.set()
    assert ahead.take(("b",)) == ["B"] and ahead.take(("c",)) == ["C"]
    # "a" was already running in the thread (it could not be cancelled); its answer was never used
    assert set(ran) <= {("a",), ("b",), ("c",)} and ("b",) in ran and ("c",) in ran
    with pytest.raises(ValueError, match="depth"):
        Ahead(depth=0)


def test_a_failure_is_raised_where_the_answer_is_taken():
    ahead = Ahead()

    def boom(_):
        raise TimeoutError("model service timed out")

    ahead.start(("x",), boom, None)
    with pytest.raises(TimeoutError, match="timed out"):
        ahead.take(("x",))


def test_clear_forgets_every_call_and_one_not_started_never_runs():
    started, gate, ran = threading.Event(), threading.Event(), []

    def call(xs):
        started.set()
        gate.wait(5)
        ran.append(tuple(xs))
        return upper(xs)

    ahead = Ahead(depth=1)  # one thread
    ahead.start(("a",), call, ["a"])
    assert started.wait(5)
    ahead.start(("b",), call, ["b"])  # drops "a" (running); "b" waits behind it in the thread
    assert ahead.pending() == 1
    ahead.clear()
    assert ahead.pending() == 0 and ahead.take(("b",)) is MISSING
    gate.set()
    ahead._pool.shutdown(wait=True)
    assert ran == [("a",)]  # "a" ended unused; "b" never ran
