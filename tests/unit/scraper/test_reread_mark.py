"""The mark a regular scrape run leaves where it skipped an article (dgb.scraper.run.next_mark)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dgb.scraper.run import next_mark

NOW = datetime(2026, 12, 5, 6, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def at(minutes_ago: float) -> datetime:
    return NOW - timedelta(minutes=minutes_ago)


def test_the_oldest_skipped_article_is_the_mark():
    assert next_mark(None, True, [at(5), at(30), at(10)], NOW, DAY) == (at(30), False)
    assert next_mark(None, True, [], NOW, DAY) == (None, False)


def test_a_run_that_read_past_the_mark_clears_it_or_leaves_its_own():
    assert next_mark(at(60), True, [], NOW, DAY) == (None, False)
    assert next_mark(at(60), True, [at(5)], NOW, DAY) == (at(5), False)


def test_a_run_that_stopped_above_the_mark_keeps_it():
    assert next_mark(at(60), False, [], NOW, DAY) == (at(60), False)
    assert next_mark(at(60), False, [at(90)], NOW, DAY) == (at(90), False)
    assert next_mark(at(60), False, [at(5)], NOW, DAY) == (at(60), False)


def test_a_mark_older_than_the_limit_is_given_up():
    assert next_mark(at(25 * 60), False, [], NOW, DAY) == (None, True)
    assert next_mark(None, True, [at(25 * 60)], NOW, DAY) == (None, True)
