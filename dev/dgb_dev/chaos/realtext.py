"""Real gov.br news as the text of a chaos run's load (:mod:`dgb_dev.chaos.load`): whole articles of
``<repo>/../shared/data/classifier-dev`` (``archive.jsonl``, ``real.jsonl``), else the repo's own
corpus, cleaned so the local site renders them as faithfully as its journal hashes them."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dgb.scraper.article import FOOTER_MAX_CHARS, footer_starts, is_share_text

REPO = Path(__file__).resolve().parents[3]
SHARED_DATA = REPO.parent / "shared" / "data" / "classifier-dev"
FALLBACK_CORPUS = REPO / "include" / "dgb" / "data" / "corpus" / "articles.jsonl"
TEXT_FILES = ("archive.jsonl", "real.jsonl")

_TARGET = r"\((?:[^()\s]|\([^()\s]*\))*(?:\s+\"[^\"]*\")?\)"  # (url) or (url "title"), url may hold (..)
_IMAGE = re.compile(r"!\[[^\]]*\]" + _TARGET)
_LINK = re.compile(r"\[([^\]]*)\]" + _TARGET)
# the page chrome of archive.jsonl's whole-page exports: the byline ends the head (title, lead,
# share links), and the tags, the category or related content start the tail
_BYLINE = re.compile(
    r"Publicado em\s+\d\d/\d\d/\d{4} \d\dh\d\d(?:\s+Atualizado em\s+\d\d/\d\d/\d{4} \d\dh\d\d)?"
)
_CREDIT = re.compile(r"^\W*fotos?\b", re.I)  # a photo credit: the scraper drops it as a caption
# the site renders every <ol> from 1 (the journal hashes the source's numbers): bullets keep the words
_NUMBERED = re.compile(r"^(\s*)\d{1,3}\\?[.)]\s+", re.M)
_TAIL = re.compile(r"^(?:Tags:|Categoria\s*$|Conteúdo relacionado|Compartilhar:|Compartilhe:)", re.M)
_AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")


@dataclass(frozen=True)
class RealText:
    title: str
    content: str  # Markdown-ish paragraphs separated by blank lines
    subtitle: str = ""
    agency: str = ""
    source: str = ""  # the file it came from


def clean_markdown(text: str) -> str:
    """The article's own text, as the site renders it faithfully: an exported page's head and tail,
    Markdown images and photo credits dropped, links reduced to their words (``<url>`` to the URL),
    bold marks dropped, numbered items made bullets, each plain paragraph on one line. (The site
    renders an image as a link, or as literal text when its alt is empty, and every list from 1,
    while its journal hashes the source text: kept, they would make a faithful copy look stale.)"""
    text = text or ""
    head = _BYLINE.search(text)
    if head:
        text = text[head.end() :]
    tail = _TAIL.search(text)
    if tail:
        text = text[: tail.start()]
    # bold inside a word ("**C**om"): Plone's plain text joins the word, the HTML page does not
    text = _AUTOLINK.sub(r"\1", _LINK.sub(r"\1", _IMAGE.sub("", text))).replace("**", "")
    text = _NUMBERED.sub(r"\1- ", text)
    paras = [p.strip() if is_block(p) else " ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
    paras = [p for p in paras if p and not _CREDIT.match(p) and not is_share_text(p)]
    # a press-office contact footer: page chrome the scraper leaves out, not the article's text
    for start in range(len(paras) - 1, -1, -1):
        if footer_starts(paras[start]):
            if sum(len(p) for p in paras[start:]) <= FOOTER_MAX_CHARS:
                paras = paras[:start]
            break
    return "\n\n".join(paras)


def is_block(para: str) -> bool:
    """A list, heading or table paragraph: its line breaks carry meaning."""
    return any(line.lstrip().startswith(("-", "*", "#", "|", "•")) for line in para.splitlines())


def load_texts(path: str | Path | None = None, *, min_chars: int = 300) -> list[RealText]:
    """Whole real articles: ``archive.jsonl`` and ``real.jsonl`` of ``path`` (a folder, default
    ``<repo>/../shared/data/classifier-dev``, or one JSONL file; excerpts, short texts and repeated
    titles left out), else ``include/dgb/data/corpus/articles.jsonl`` when there is none."""
    folder = Path(path) if path else SHARED_DATA
    files = [folder / n for n in TEXT_FILES if (folder / n).is_file()] if folder.is_dir() else []
    if not files and folder.is_file():
        files = [folder]
    if not files:
        files = [FALLBACK_CORPUS]
    out: list[RealText] = []
    seen: set[str] = set()
    for f in files:
        for line in f.read_text(encoding="utf-8").split("\n"):  # not splitlines: U+2028 in text
            if not line.strip():
                continue
            row = json.loads(line)
            title = " ".join(str(row.get("title") or "").split())
            content = clean_markdown(str(row.get("content") or ""))
            if row.get("excerpt") or len(title) < 10 or len(content) < min_chars or title in seen:
                continue
            seen.add(title)
            subtitle = " ".join(str(row.get("subtitle") or "").split())
            out.append(RealText(title, content, subtitle, str(row.get("agency") or ""), f.name))
    if not out:
        raise ValueError(f"no usable article text in {[str(f) for f in files]}")
    return out


def paragraphs(texts: Sequence[RealText], min_chars: int = 80) -> list[str]:
    """The texts' plain paragraphs (no list, heading or table): what an edit puts in."""
    out = [p for t in texts for p in t.content.split("\n\n") if len(p) >= min_chars and not is_block(p)]
    return out or [t.content for t in texts]
