"""Article text as the offline classifier reads it: gov.br markdown cleaned into paragraphs,
paragraphs split into sentences, over-long sentences cut into pieces.

The content is gov.br markdown: :func:`paragraphs` drops images, link targets, emphasis, photo
credits, rules and tables, and stops at "Conteúdo relacionado" / "Leia também" blocks;
:func:`split_sentences` splits a paragraph at Portuguese sentence punctuation, keeping common
abbreviations whole.
"""

from __future__ import annotations

import re
from functools import lru_cache

_BOUNDARY = re.compile(r"[.!?…]+[\"”’)]?\s+(?=[\"“‘(]?[A-ZÀ-ÖØ-Þ0-9])")
_LAST_WORD = re.compile(r"(\S+)$")
_ABBREVIATIONS = frozenset(
    [
        "sr",
        "sra",
        "srs",
        "sras",
        "dr",
        "dra",
        "drs",
        "dras",
        "prof",
        "profa",
        "profs",
        "exmo",
        "exma",
        "av",
        "art",
        "arts",
        "inc",
        "cap",
        "min",
        "gov",
        "dep",
        "sen",
        "ver",
        "pres",
        "vol",
        "fls",
        "nº",
        "n",
        "no",
        "núm",
        "num",
        "tel",
        "cia",
        "ltda",
        "s.a",
        "jr",
        "gen",
        "cel",
        "maj",
        "ten",
        "sgto",
    ]
)


def normalize_ws(text: str | None) -> str:
    """Runs of whitespace as one space, none at the ends (``str.split`` and ``re``'s ``\\s`` share
    one definition of whitespace: the same as ``re.sub(r"\\s+", " ", text).strip()``, checked over
    every code point, without the regular expression)."""
    return " ".join(text.split()) if text else ""


def split_sentences(text: str) -> list[str]:
    """Sentences of one paragraph (Portuguese punctuation; common abbreviations kept whole)."""
    text = normalize_ws(text)
    if not text:
        return []
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        if text[m.start()] == ".":
            word = _LAST_WORD.search(text, start, m.start())
            if word:
                w = word.group(1).lower().strip('("“')
                if w in _ABBREVIATIONS or (len(w) == 1 and w.isalpha()):
                    continue
        sentence = text[start : m.end()].strip()
        if sentence:
            out.append(sentence)
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


# Markdown and gov.br page furniture that carries no news: images, link targets, emphasis, photo
# credits, share / related-content blocks (the rest of the article after those is link lists).
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\((?:[^()]|\([^)]*\))*\)")
_URL = re.compile(r"<?https?://\S+>?")
_EMPHASIS = re.compile(r"(\*{1,3}|_{2,3})(?=\S)|(?<=\S)(\*{1,3}|_{2,3})")
_INVISIBLE = re.compile(r"[\u200b\u200c\u200d\u2060\ufeff\u3164\u00ad]")
_CREDIT = re.compile(
    r"^(fotos?|foto e texto|imagens?|crédito|créditos|texto|textos|edição|edição de texto|reportagem|"
    r"fonte|com informações d[aoe]s?|por|vídeo|arte|ilustração|legenda)\b\s*[:|–-]",
    re.I,
)
_BYLINE = re.compile(r"^por [A-ZÀ-Ý][\w.]+( [\w.]+){0,5}$")
_STOP_BLOCK = re.compile(
    r"^(conteúdo relacionado|outras notícias|leia (também|mais)|veja também|confira também|"
    r"notícias relacionadas|compartilh(ar|e)( essa notícia| esta notícia)?|tags?|categorias?)\s*:?\s*$",
    re.I,
)
_RULE = re.compile(r"^[\s\-_*=|.>#ㅤ]*$")


# The header older Plone pages export before the body (archive rows of production's news table):
# "Compartilhe:", the share links, "Publicado em" / "Atualizado em" and their dates. As a header it
# is furniture; the same "Compartilhe" after the body starts the related-content footer.
_SHARE_HEAD = re.compile(r"^\s*compartilhe:?\s*$", re.I)
_SHARE_WORD = re.compile(r"compartilhe", re.I)  # anywhere: what a header line needs
_STAMP = re.compile(r"^\s*(publicado|atualizado) em\s*$", re.I)
_STAMP_DATE = re.compile(r"^\s*\d{2}/\d{2}/\d{4},? \d{1,2}h\d{2}\s*$")
_HEADER_SPAN = 25  # lines after "Compartilhe:" within which a "Publicado em" makes it a header


def strip_page_header(content: str) -> str:
    """``content`` without a page header block: a "Compartilhe:" line followed, within
    :data:`_HEADER_SPAN` lines, by "Publicado em" / "Atualizado em" is dropped with the share links,
    the stamps and their dates. Anything else (a footer "Compartilhe") stays."""
    lines = (content or "").splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        if _SHARE_HEAD.match(lines[i]):
            window = lines[i + 1 : i + 1 + _HEADER_SPAN]
            stamps = [k for k, line in enumerate(window) if _STAMP.match(line)]
            if stamps:
                j = i + 2 + stamps[-1]
                while j < len(lines) and (not lines[j].strip() or _STAMP_DATE.match(lines[j])):
                    j += 1
                i = j
                continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def clean_line(line: str) -> str:
    """One markdown line as plain text: images dropped, links reduced to their text, emphasis
    markers and invisible characters removed, whitespace normalised. Each substitution runs only
    when the line holds what its pattern cannot match without (``](``, ``://``, a non-ASCII
    character, ``*`` or ``__``): most lines of news hold none of them."""
    if "](" in line:
        line = _IMAGE.sub(" ", line)
        line = _LINK.sub(lambda m: m.group(1), line)
    if "://" in line:
        line = _URL.sub(" ", line)
    if not line.isascii():
        line = _INVISIBLE.sub("", line.replace("\xa0", " "))
    if "*" in line or "__" in line:
        line = _EMPHASIS.sub("", line)
    return normalize_ws(line.lstrip(">").strip())


def is_furniture(line: str) -> bool:
    """True for a cleaned line that is page furniture, not news (credits, bylines, rules)."""
    return bool(_RULE.match(line) or _CREDIT.match(line) or _BYLINE.match(line))


def paragraphs(content: str) -> list[tuple[str, str]]:
    """``(kind, text)`` for each paragraph: ``prose``, ``heading`` (``## ...``) or ``bullet``.

    The markdown is cleaned line by line (:func:`clean_line`); a page header before the body
    (:func:`strip_page_header`: the share block and "Publicado em" of older Plone exports) is
    dropped first, furniture lines (credits, rules) and table rows are dropped, and the text stops at
    a "Conteúdo relacionado" / "Leia também" / "Compartilhar" line (what follows it on gov.br pages
    is a list of other articles).

    A text is read by several parts of the enrich stage (the classifier's units, the sentiment
    head, the reading figures): the answers for the last :data:`_KEPT` texts of up to
    :data:`_KEPT_CHARS` characters are kept, so each is cleaned once."""
    return list(_read(content or "")[0])


_KEPT = 128  # texts whose paragraphs are kept (a stage chunk's and the next one's, prefetched)
_KEPT_CHARS = 50_000  # longer texts are cleaned each time they are read (memory stays bounded)


def _read(content: str) -> tuple[tuple[tuple[str, str], ...], bool]:
    """(the paragraphs of ``content``, whether a stop line ended them)."""
    return _read_kept(content) if len(content) <= _KEPT_CHARS else _clean(content)


@lru_cache(maxsize=_KEPT)
def _read_kept(content: str) -> tuple[tuple[tuple[str, str], ...], bool]:
    return _clean(content)


def _clean(content: str) -> tuple[tuple[tuple[str, str], ...], bool]:
    out: list[tuple[str, str]] = []
    for block in re.split(r"\n\s*\n", strip_page_header(content or "")):
        kinds: list[tuple[str, str]] = []
        for raw in block.strip().splitlines():
            raw = raw.strip()
            if raw.startswith("|"):
                continue  # a table row: figures without sentences
            kind = (
                "bullet"
                if raw.startswith(("- ", "* ", "• ", "+ "))
                else "heading"
                if raw.startswith("#")
                else "prose"
            )
            line = clean_line(raw[2:] if kind == "bullet" else raw.lstrip("#"))
            if not line or is_furniture(line):
                continue
            if _STOP_BLOCK.match(line):
                if kinds:
                    out.extend(_block(kinds))
                return tuple(out), True
            kinds.append((kind, line))
        if kinds:
            out.extend(_block(kinds))
    return tuple(out), False


def joined_paragraphs(*parts: str | None) -> list[tuple[str, str]]:
    """``paragraphs("\\n\\n".join(p for p in parts if p))``, read part by part so that each part's
    paragraphs are those :func:`paragraphs` keeps (the content's, read by the other parts of the
    stage too). The same answer: a blank line ends a block, so no block spans two parts; a stop
    line ends the whole text (the parts after it are not read); only a page header can span two
    parts, so when a part before the last holds "compartilhe" (as :data:`_SHARE_HEAD` reads it,
    case folded) the parts are read joined, as one text."""
    texts = [p for p in parts if p]
    if any(_SHARE_WORD.search(t) for t in texts[:-1]):
        return paragraphs("\n\n".join(texts))
    out: list[tuple[str, str]] = []
    for text in texts:
        found, stopped = _read(text)
        out.extend(found)
        if stopped:
            break
    return out


def _block(lines: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """One markdown block's cleaned lines as paragraphs: a bullet list is one per item; in prose
    each line is a paragraph (gov.br markdown keeps a paragraph on one line, and a line break
    separates e.g. the subtitle from the first paragraph) unless the next line starts in lower
    case (a wrapped line)."""
    if all(kind == "bullet" for kind, _ in lines):
        return list(lines)
    if len(lines) == 1 and lines[0][0] == "heading":
        return list(lines)
    out: list[tuple[str, str]] = []
    for _, text in lines:
        if out and text[:1].islower():
            out[-1] = ("prose", f"{out[-1][1]} {text}")
        else:
            out.append(("prose", text))
    return out


def pieces(sentence: str, limit: int) -> list[str]:
    """A very long sentence split at word boundaries into pieces of at most ``limit`` chars (a
    "word" longer than ``limit``, e.g. a run of text without spaces, is cut every ``limit``)."""
    if len(sentence) <= limit:
        return [sentence]
    out, cur = [], ""
    for word in sentence.split(" "):
        while len(word) > limit:
            if cur:
                out.append(cur)
                cur = ""
            out.append(word[:limit])
            word = word[limit:]
        if cur and len(cur) + 1 + len(word) > limit:
            out.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    if cur:
        out.append(cur)
    return out
