"""What the offline classifier computes for a batch of articles before deciding: each article
as units of ONE ``encode`` call, and the vectors (views) built from them.

An article is embedded as units (:func:`article_layout`): the title, and the sentences of the
subtitle, the editorial lead and the content (:mod:`dgb.enrich.text`) up to ~:data:`BODY_CHARS`
characters, a sentence over :data:`UNIT_MAX_CHARS` in pieces. The whole batch is ONE ``encode``
call and the same sentence vectors serve the summary (:mod:`dgb.enrich.summary`), so a batch
costs about one pass over its first ~1,300 characters per article (cost is linear in them: the
tokenizer is pure Python). :class:`Features` says what is computed from the vectors.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from dgb.enrich.contract import ArticleText
from dgb.enrich.summary import SUMMARY_CANDIDATES, without_dateline
from dgb.enrich.text import clean_line, normalize_ws, paragraphs, pieces, split_sentences

BODY_CHARS = 1200  # text embedded per article after the title (subtitle, lead, content)
LEAD_CHARS = 300  # the first characters of it: the "lead" view of the head
HEAD_WEIGHT = 0.3  # weight of the title vector in the article vector
UNIT_MAX_CHARS = 500  # longer sentences are embedded in pieces


@dataclass
class Layout:
    """Where one article's units sit in the batch's encode call."""

    title: int | None
    body: list[int]  # subtitle, lead and content sentences up to BODY_CHARS
    head: list[int]  # the body units that start within the first LEAD_CHARS
    candidates: list[tuple[int, str]]  # summary candidates: (unit index, sentence), document order


def article_layout(item: ArticleText, texts: list[str]) -> Layout:
    """``item``'s units appended to ``texts`` (the batch's one encode call), and where they sit."""

    def add(text: str) -> int:
        texts.append(text)
        return len(texts) - 1

    title = normalize_ws(item.title)
    t_idx = add(title) if title else None
    body: list[int] = []
    head: list[int] = []
    candidates: list[tuple[int, str]] = []
    position = 0
    for kind, sentence in _sentences(item):
        if position >= BODY_CHARS:
            break
        first = None
        offset = position
        for piece in pieces(sentence, UNIT_MAX_CHARS):
            if offset >= BODY_CHARS:
                break  # a run-on "sentence" (2 MB without punctuation) is read up to BODY_CHARS only
            offset += len(piece) + 1
            idx = add(piece)
            body.append(idx)
            if position < LEAD_CHARS:
                head.append(idx)
            first = idx if first is None else first
        if kind != "heading" and kind != "bullet" and len(candidates) < SUMMARY_CANDIDATES:
            candidates.append((first, without_dateline(sentence)))
        position += len(sentence) + 1
    return Layout(t_idx, body, head, candidates)


def _sentences(item: ArticleText) -> Iterator[tuple[str, str]]:
    """(kind, sentence) of the subtitle, the lead, then the content, in order, split as they are
    read (the layout stops at :data:`BODY_CHARS`: the rest of a long article is never split)."""
    for kind, part in (("subtitle", item.subtitle), ("lead", item.editorial_lead)):
        for sentence in split_sentences(clean_line(part or "")):
            yield kind, sentence
    for kind, para in paragraphs(item.content):
        for sentence in split_sentences(para) if kind == "prose" else [para]:
            yield kind, sentence


def _normalise(v: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(norm == 0, 1.0, norm)


@dataclass
class Features:
    """What the classifier computes for a batch before deciding (also what the head is trained on).

    ``X``: per article the title vector, the lead vector (mean of the units in the first
    :data:`LEAD_CHARS`) and the body vector (mean of the units up to :data:`BODY_CHARS`),
    concatenated (3 x dim); ``A``: the article vector (body + :data:`HEAD_WEIGHT` x title,
    normalised) that the taxonomy prototypes and the summary are compared with; ``S``: cosine of
    ``A`` with every prototype; ``proto``: the level-1 prototype scores (one column per code of
    :attr:`dgb.enrich.local.LocalClassifier.level1_codes`)."""

    layouts: list[Layout]
    vectors: np.ndarray
    X: np.ndarray
    A: np.ndarray
    S: np.ndarray
    proto: np.ndarray


def article_views(layouts: list[Layout], vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(X, A) for each article, see :class:`Features`."""
    xs, arts = [], []
    for lay in layouts:
        title = vectors[lay.title] if lay.title is not None else None
        body = vectors[lay.body].mean(axis=0) if lay.body else title
        lead = vectors[lay.head].mean(axis=0) if lay.head else body
        title = body if title is None else title
        xs.append(np.concatenate([_normalise(title), _normalise(lead), _normalise(body)]))
        arts.append(body + HEAD_WEIGHT * title if lay.body else title)
    return np.stack(xs).astype(np.float32), _normalise(np.stack(arts).astype(np.float32))
