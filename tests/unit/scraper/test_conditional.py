"""Which conditional headers a listing poll sends (dgb.scraper.conditional.request_headers) and the
settings that drive it."""

from __future__ import annotations

import pytest

from dgb.scraper.conditional import ConditionalPolicy, Validators, request_headers

POLICY = ConditionalPolicy(max_age_s=3600, max_hits=20)
LM = "Tue, 01 Dec 2026 10:00:00 GMT"


def test_the_etag_is_sent_and_last_modified_only_without_one():
    both = Validators('"abc"', LM, stored_at=1000.0)
    assert request_headers(both, 1060.0, POLICY) == {"If-None-Match": '"abc"'}
    only_date = Validators(None, LM, stored_at=1000.0)
    assert request_headers(only_date, 1060.0, POLICY) == {"If-Modified-Since": LM}
    assert request_headers(Validators(None, None, stored_at=1000.0), 1060.0, POLICY) == {}
    assert request_headers(None, 1060.0, POLICY) == {}
    assert request_headers(Validators('"abc"', None, stored_at=None), 1060.0, POLICY) == {}


def test_old_or_worn_validators_are_not_sent():
    v = Validators('"abc"', None, stored_at=1000.0, streak=19)
    assert request_headers(v, 1000.0 + 3599, POLICY) == {"If-None-Match": '"abc"'}
    assert request_headers(v, 1000.0 + 3600, POLICY) == {}  # max age reached: a whole listing
    worn = Validators('"abc"', None, stored_at=1000.0, streak=20)
    assert request_headers(worn, 1001.0, POLICY) == {}  # max_hits 304s in a row: a whole listing
    assert request_headers(v, 1001.0, ConditionalPolicy(enabled=False)) == {}


def test_the_settings(monkeypatch):
    assert ConditionalPolicy.from_env() == ConditionalPolicy(enabled=True, max_age_s=3600.0, max_hits=20)
    monkeypatch.setenv("DGB_SCRAPE_CONDITIONAL", "0")
    monkeypatch.setenv("DGB_SCRAPE_VALIDATOR_MAX_AGE", "900")
    monkeypatch.setenv("DGB_SCRAPE_VALIDATOR_MAX_HITS", "5")
    assert ConditionalPolicy.from_env() == ConditionalPolicy(enabled=False, max_age_s=900.0, max_hits=5)
    monkeypatch.setenv("DGB_SCRAPE_VALIDATOR_MAX_HITS", "2.5")
    with pytest.raises(ValueError, match="DGB_SCRAPE_VALIDATOR_MAX_HITS"):
        ConditionalPolicy.from_env()
