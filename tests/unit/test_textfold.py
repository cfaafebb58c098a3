"""dgb.textfold: the two ways text is folded for matching."""

from __future__ import annotations

import sys
import unicodedata

from dgb.textfold import ascii_fold, strip_marks

EVERY = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF)


def test_strip_marks_drops_exactly_the_combining_marks_of_every_code_point():
    decomposed = unicodedata.normalize("NFKD", EVERY)
    one_by_one = "".join(c for c in decomposed if not unicodedata.combining(c))
    assert strip_marks(EVERY) == one_by_one
    assert strip_marks("Ação, Saúde, pão e ½ ﬁm") == "Acao, Saude, pao e 1⁄2 fim"
    assert strip_marks("Ministério da Educação — 1º lugar") == "Ministerio da Educacao — 1o lugar"
    assert strip_marks("plain ASCII") == "plain ASCII" and strip_marks("") == ""


def test_ascii_fold_keeps_ascii_only():
    assert ascii_fold("Ação, Saúde — 1º ½") == "Acao, Saude  1o 12"
    assert ascii_fold(EVERY).isascii() and ascii_fold("") == ""
    # what it keeps of any text is what strip_marks keeps, less the other non-ASCII characters
    sample = "Pará: São Luís, 3º Fórum — ﬁnal ½ 東京"
    assert ascii_fold(sample) == "".join(c for c in strip_marks(sample) if c.isascii())
