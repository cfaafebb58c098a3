"""FAST: the fetch policy of the tests that talk to loopback sites (no waits, short timeouts)."""

from __future__ import annotations

from dgb.fetch import FetchPolicy

FAST = FetchPolicy(
    min_interval=0.0,
    retries=2,
    backoff_base=0.05,
    backoff_max=0.2,
    read_timeout=3.0,
    total_timeout=2.0,
    connect_timeout=2.0,
)
