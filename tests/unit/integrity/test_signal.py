"""The change signal's pure parts (dgb.integrity.signal): the search it reads, and the candidates it
leaves out of a budget run."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import numpy as np

from dgb.integrity.signal import folder_of, signal_url, without
from dgb.integrity.tiers import Candidates
from tests.support.articles import mirrored_agency


def test_the_signal_reads_the_listings_folder_sorted_by_modified_summaries_only():
    agency = mirrored_agency("http://127.0.0.1:9", "mulheres", "plone6_api")
    url = signal_url(agency)
    parts = urlsplit(url)
    assert parts.path == urlsplit(agency.url).path.replace("/mulheres/", "/mulheres/++api++/", 1) + "/@search"
    query = parse_qs(parts.query)
    assert query["sort_on"] == ["modified"] and query["sort_order"] == ["descending"]
    assert query["metadata_fields"] == ["modified"] and query["b_size"] == ["25"]
    assert query["portal_type"] == ["News Item"] and "fullobjects" not in query
    assert folder_of(agency) == agency.url.rstrip("/") + "/"


def _cands(n: int) -> Candidates:
    nan = np.full(n, np.nan)
    return Candidates(
        news_id=np.arange(1, n + 1, dtype=np.int64),
        published=nan.copy(),
        last_checked=nan.copy(),
        last_changed=nan.copy(),
        page_modified=nan.copy(),
        agency_rate=np.ones(n),
        cheap=np.zeros(n, dtype=bool),
        image_checked=nan.copy(),
        has_image=np.zeros(n, dtype=bool),
        urgent=np.zeros(n, dtype=bool),
    )


def test_without_drops_the_skipped_but_keeps_those_whose_image_is_due():
    c = _cands(5)
    image_due = np.array([False, True, False, False, False])
    left = without(c, {2, 3}, image_due)
    assert left.news_id.tolist() == [1, 2, 4, 5] and len(left.urgent) == 4
    assert without(c, set()) is c and without(c, {1, 5}).news_id.tolist() == [2, 3, 4]
