"""Text folded for matching, not for display: the accents of Portuguese taken away.

Two rules, both on the NFKD (compatibility) decomposition, where "ç" is "c" plus a combining
cedilla and "ﬁ" is "fi":

* :func:`strip_marks` drops the combining marks and keeps every other character (the offline
  classifier's word counts, the sentiment lexicon);
* :func:`ascii_fold` keeps ASCII only (slugs, ids and loose title keys, which must be ASCII).
"""

from __future__ import annotations

import unicodedata


def strip_marks(text: str) -> str:
    """``text`` in NFKD with every combining mark removed ("Ação" -> "Acao"; other characters
    kept, case unchanged). Removes each distinct mark the text holds with ``str.replace``: the
    same result as testing every character (tested over all code points), ~3x faster on news."""
    decomposed = unicodedata.normalize("NFKD", text)
    if decomposed.isascii():
        return decomposed
    for mark in {c for c in set(decomposed) if c > "\x7f" and unicodedata.combining(c)}:
        decomposed = decomposed.replace(mark, "")
    return decomposed


def ascii_fold(text: str) -> str:
    """``text`` in NFKD with everything outside ASCII dropped ("Ação – 1º" -> "Acao  1o")."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
