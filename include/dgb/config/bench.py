"""Settings the benchmark scripts read (scripts/bench_*.py); the fault suite (scripts/faults.py)
reads none of its own: it runs on the local stack's :class:`dgb.config.Settings`."""

from __future__ import annotations

from dgb.config import env_str


def test_pg_db() -> str:
    """``DGB_TEST_PG_DB``: the test suite's own database (default ``dgb_test``, as tests/conftest.py
    has it); ``bench_hostile.py`` scrapes into it, as the hostile-page tests do."""
    return env_str("DGB_TEST_PG_DB", "dgb_test")
