"""Syllables of Brazilian Portuguese words, by the rules of the orthographic syllable division.

Hyphenation patterns (pyphen's pt_BR, what the Portuguese Flesch figure used before) mark where a
line may break, not where syllables end: a break never leaves one letter alone, so "ação", "rua"
and "saúde" get no point and counted as one syllable. This module counts syllable nuclei instead:

* a run of vowel letters is one syllable per vowel, less the pairs that join into one syllable:
  falling diphthongs (a vowel + unaccented ``i``/``u``: "pai", "céu", "muito"), the nasal ones
  ("ão", "ãe", "õe"), and a word's final unstressed ``-ia``/``-io``/``-ie``/``-ua``/``-uo``/``-ea``/
  ``-eo`` after an accented syllable ("his-tó-ria", "sé-rie", "á-rea");
* ``u`` after ``q``/``g`` is a glide, never a syllable of its own ("quan-do", "á-gua", "se-guin-te");
* hiatus where the grammar has one: an accented ``í``/``ú`` ("pa-ís", "sa-ú-de"), an ``i``/``u``
  closed by ``l``/``m``/``n``/``r``/``z`` or before ``nh`` ("ca-ir", "ju-iz", "a-in-da", "ra-i-nha"),
  ``ui`` before ``ç`` or ``r`` ("ins-ti-tu-i-ção", "con-tri-bu-ir"), and two equal vowels ("vo-o",
  "le-em"); ``ao`` is one syllable only in the contraction "ao(s)" ("ca-os", "ca-o-lho").

Validated on 602 words of real gov.br news with dictionary divisions written independently of this
code (``tests/fixtures/features/syllables_pt.tsv``, its README): measured first at 595 of 602 right
(pyphen's points + 1: 480); the contraction "ao(s)" and ``ui`` before ``r`` were added after that
measurement (now 598 of 602; the rest are prefix hiatus: "re-u-ni-ão", "pro-i-bi-ção", "flu-i-dez").
``tests/unit/features/test_syllables.py`` bounds it.
"""

from __future__ import annotations

import re
from functools import lru_cache

VOWELS = frozenset("aeiouáéíóúâêôãõàüy")
ACCENTED = frozenset("áéíóúâêô")  # marks of the stressed syllable (the tilde marks nasality)
_GLIDES = frozenset("iu")
_FALLING_FIRST = frozenset("aeoáéóâêôiu")
_WORD = re.compile(r"[a-záéíóúâêôãõàüçy]+")


def _runs(word: str) -> list[tuple[str, str]]:
    """The vowel runs of a lowercase word with the letters that follow each one (up to the
    next vowel), the ``u`` of ``qu``/``gu`` (and ``ü``) left out as a glide."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(word)
    while i < n:
        if word[i] not in VOWELS:
            i += 1
            continue
        run = []
        while i < n and word[i] in VOWELS:
            ch = word[i]
            glide = ch == "ü" or (
                ch == "u"
                and not run
                and i > 0
                and word[i - 1] in "qg"
                and i + 1 < n
                and word[i + 1] in VOWELS
            )
            if not glide:
                run.append(ch)
            i += 1
        j = i
        while j < n and word[j] not in VOWELS:
            j += 1
        if run:
            out.append(("".join(run), word[i:j]))
    return out


def _closes(tail: str, is_last: bool) -> bool:
    """Whether the consonants after a run close its last vowel's syllable with l, m, n, r or z
    (the grammar's hiatus before them) or start an ``nh``."""
    if tail.startswith("nh"):
        return True
    if not tail or tail[0] not in "lmnrz":
        return False
    return len(tail) > 1 or is_last  # the consonant ends the word, or another consonant follows


def _joins(a: str, b: str, tail: str, is_last: bool, final_rising: bool, word_is_ao: bool = False) -> bool:
    """Whether vowels ``a`` + ``b`` (adjacent in a run) form one syllable."""
    if a == b:
        return False  # vo-o, le-em, xi-i-ta
    if (a, b) in (("ã", "o"), ("ã", "e"), ("õ", "e")):
        return True
    if b in _GLIDES and a in _FALLING_FIRST:
        # a falling diphthong unless the glide is closed by l/m/n/r/z, before nh, or ui before ç or
        # r (the -uir verbs: "con-tri-bu-ir", "dis-tri-bu-i-rá")
        if _closes(tail, is_last):
            return False
        return not (a == "u" and b == "i" and tail[:1] in ("ç", "r"))
    if (a, b) == ("a", "o"):
        return word_is_ao
    # his-tó-ria, sé-rie, á-gua, á-rea, ó-leo
    return final_rising and a in "iueo" and b in "aoe"


@lru_cache(maxsize=200_000)
def count_word(word: str) -> int:
    """Syllables of one word (at least 1 for a word with letters; hyphenated parts summed)."""
    word = word.lower()
    if "-" in word:
        return sum(count_word(part) for part in word.split("-") if part)
    runs = _runs(word)
    if not runs:
        return 1 if any(c.isalpha() for c in word) else 0
    accent_before = [False] * len(runs)
    seen = False
    for k, (run, _) in enumerate(runs):
        accent_before[k] = seen
        seen = seen or any(c in ACCENTED for c in run)
    total = 0
    for k, (run, tail) in enumerate(runs):
        is_last = k == len(runs) - 1
        # an unstressed final rising pair after an accented syllable joins (tail: s, m or nothing)
        final_rising = is_last and accent_before[k] and tail in ("", "s", "m")
        i, n = 0, len(run)
        while i < n:
            total += 1
            if i + 1 < n:
                inner_tail = tail if i + 2 == n else ""
                last_pair = is_last and i + 2 == n
                rising = final_rising and i + 2 == n
                if _joins(run[i], run[i + 1], inner_tail, last_pair, rising, word in ("ao", "aos")):
                    i += 2
                    continue
            i += 1
    return total


def count(text: str) -> int:
    """Syllables of every word of ``text``."""
    return sum(count_word(w) for w in _WORD.findall(text.lower()))
