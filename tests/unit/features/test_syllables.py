"""Portuguese syllables (dgb.features.syllables) against 602 dictionary divisions of news words
written independently of the code (tests/fixtures/features/syllables_pt.tsv)."""

from __future__ import annotations

import csv
from pathlib import Path

import pyphen
import pytest

from dgb.features.syllables import count, count_word

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "features" / "syllables_pt.tsv"


def divisions() -> list[tuple[str, int]]:
    with open(FIXTURE, encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0][:3] == ["word", "division", "syllables"]
    return [(r[0], int(r[2])) for r in rows[1:]]


def test_agreement_with_the_dictionary_divisions():
    words = divisions()
    ours = sum(count_word(w) == n for w, n in words)
    hyphen = pyphen.Pyphen(lang="pt_BR")
    points = sum(sum(len(hyphen.positions(p)) + 1 for p in w.split("-") if p) == n for w, n in words)
    print(f"syllables: ours {ours}/{len(words)}, pyphen's points + 1 {points}/{len(words)}")
    assert len(words) >= 600
    assert ours >= 0.98 * len(words)  # 598 of 602 when written; the misses are prefix hiatus
    assert points < 0.85 * len(words)  # what the figure used before (480 of 602)


@pytest.mark.parametrize(
    ("word", "n"),
    [
        ("ação", 2),
        ("rua", 2),
        ("saúde", 3),
        ("país", 2),
        ("história", 3),
        ("água", 2),
        ("quando", 2),
        ("seguinte", 3),
        ("região", 3),
        ("ainda", 3),
        ("contribuir", 4),
        ("instituição", 5),
        ("voo", 2),
        ("ao", 1),
        ("caos", 2),
        ("bem-estar", 3),
    ],
)
def test_rules_of_the_orthographic_division(word, n):
    assert count_word(word) == n


def test_count_sums_the_words_of_a_text():
    assert count("A ação da rua, na saúde!") == 1 + 2 + 1 + 2 + 1 + 3
