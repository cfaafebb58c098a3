"""dgb.enrich.text's shortcuts give the answers of the plain rules: whitespace collapsed without a
regular expression, a line's substitutions skipped only when they cannot match, and an article's
parts read one by one (each part's paragraphs kept for the other readers) as one joined text."""

from __future__ import annotations

import itertools
import re
import sys

from dgb.enrich import text
from dgb.enrich.text import clean_line, joined_paragraphs, normalize_ws, paragraphs

# pieces of gov.br markdown that meet the rules at a part's edges: a page header ("Compartilhe:"
# then "Publicado em" and its date, within 25 lines), a stop line, blank and whitespace lines,
# CR LF, U+2028, a line continued in lower case, a list, a heading, a table row
PIECES = [
    "",
    "   ",
    "Compartilhe:",
    "Compartilhe:\n[Facebook](https://f.com/a)",
    "Publicado em\n03/02/2026 10h00",
    "Leia também",
    "Primeira frase do subtítulo.\n",
    "linha em minúsculas que continua\r\n",
    "Texto com\u2028separador e **ênfase**.",
    "\n\n- item um\n- item dois\n",
    "## Destaques\n| a | b |",
    "Fim.\r",
]


def test_whitespace_is_collapsed_as_the_regular_expression_does():
    spaces = "".join(chr(c) for c in range(sys.maxunicode + 1) if re.match(r"\s", chr(c)))
    sample = f"{spaces}a{spaces}b c\u2028\u00a0d{spaces}"
    assert normalize_ws(sample) == re.sub(r"\s+", " ", sample).strip() == "a b c d"
    assert normalize_ws(None) == normalize_ws("") == ""


def test_a_line_is_cleaned_as_by_every_substitution():
    def every(line: str) -> str:
        line = text._IMAGE.sub(" ", line)
        line = text._LINK.sub(lambda m: m.group(1), line)
        line = text._URL.sub(" ", line)
        line = text._INVISIBLE.sub("", line.replace("\xa0", " "))
        line = text._EMPHASIS.sub("", line)
        return normalize_ws(line.lstrip(">").strip())

    lines = [
        "![foto](https://x/y.jpg) Legenda [link](https://a.b/c(d)) e https://gov.br/z <https://q>",
        "> citação **forte** e __sublinhado__ e *itálico*\u200b\u00a0fim",
        "texto simples sem nada",
        "snake_case e file__name e a*b",
        "[só colchetes] e (parênteses)",
        "\ufeffBOM e soft\u00adhyphen",
    ]
    for line in lines:
        assert clean_line(line) == every(line), line


def test_parts_read_one_by_one_give_the_joined_texts_paragraphs():
    checked = 0
    for parts in itertools.product(PIECES, repeat=3):
        want = paragraphs("\n\n".join(p for p in parts if p))
        assert joined_paragraphs(*parts) == want, parts
        checked += 1
    assert checked == len(PIECES) ** 3
    # the header that spans a subtitle and the content is still dropped whole
    assert joined_paragraphs("Compartilhe:", None, "Publicado em\n03/02/2026 10h00\n\nCorpo.") == [
        ("prose", "Corpo.")
    ]


def test_kept_paragraphs_are_not_shared_lists():
    first = paragraphs("Um parágrafo.\n\nOutro.")
    first.append(("prose", "mudado"))
    assert paragraphs("Um parágrafo.\n\nOutro.") == [("prose", "Um parágrafo."), ("prose", "Outro.")]
