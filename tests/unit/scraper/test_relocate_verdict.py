"""The scraper's decision on a stored article's old address when the listing shows its identity at
a new one (dgb.scraper.relocate.verdict): moved, twin or undecided, from the answer alone."""

from __future__ import annotations

import pytest

from dgb.scraper.relocate import verdict

OLD = "https://www.gov.br/mec/pt-br/noticias/a"
NEW = "https://www.gov.br/mec/pt-br/noticias/b"


@pytest.mark.parametrize(
    ("status", "final", "expected"),
    [
        (200, NEW, "moved"),  # a redirect to the new address
        (200, NEW + "/", "moved"),
        (404, None, "moved"),
        (410, OLD, "moved"),
        (200, OLD, "twin"),  # the old address answers itself: two articles
        (200, "https://www.gov.br/mec/pt-br/noticias/c", "undecided"),  # a third address
        (None, None, "undecided"),  # no answer (timeout, refused)
        (503, OLD, "undecided"),
        (301, None, "undecided"),  # a redirect loop left unfollowed
        (403, OLD, "undecided"),
    ],
)
def test_the_old_address_answer_decides(status, final, expected):
    assert verdict(OLD, NEW, status, final) == expected
