"""dgb_dev.modellog: the model service's idle time read from its request log."""

from __future__ import annotations

from datetime import datetime

from dgb_dev.modellog import requests

LOG = """\
--- 2026-12-06T03:00:00 starting: python -m dgb.cli model serve
2026-12-06 03:00:00,100 INFO dgb.embed.service: model use-multilingual-v3 (512-d) loaded in 0.8s; ready
2026-12-06 03:00:09,000 INFO dgb.embed.service: POST /embed 200 count=7 ms=500.0 client=127.0.0.1
2026-12-06 03:00:11,000 INFO dgb.embed.service: POST /embed 200 count=200 ms=1000.0 client=127.0.0.1
2026-12-06 03:00:12,000 INFO dgb.embed.service: POST /embed 200 count=25 ms=1500.0 client=127.0.0.1
2026-12-06 03:00:12,100 INFO dgb.embed.service: POST /embed 503 count=- ms=0.4 client=127.0.0.1
2026-12-06 03:00:13,000 INFO dgb.embed.service: POST /embed 200 count=210 ms=600.0 client=127.0.0.1
2026-12-06 03:00:20,000 INFO dgb.embed.service: POST /embed 200 count=9 ms=100.0 client=127.0.0.1
"""


def test_idle_is_the_time_with_no_request_in_the_service():
    # in the window: 10.0-11.0 (200 texts), 10.5-12.0 queued behind it, then nothing until 12.4
    got = requests(LOG.splitlines(), datetime(2026, 12, 6, 3, 0, 10), datetime(2026, 12, 6, 3, 0, 15))
    # out: the request before the window, the refusal, the one after it
    assert (got.count, got.texts) == (3, 435)
    assert round(got.span_s, 3) == 3.0
    assert round(got.idle_s, 3) == 0.4
    assert [(at.second, round(gap, 3)) for at, gap in got.gaps] == [(12, 0.4)]
    assert "busy_s=2.6 idle_s=0.4" in got.line()


def test_no_request_in_the_window():
    got = requests(LOG.splitlines(), datetime(2026, 12, 6, 4, 0, 0))
    assert (got.count, got.span_s, got.idle_s, got.gaps) == (0, 0.0, 0.0, [])
