"""The offline classifier: level 1 by a small head trained on real labelled gov.br news plus
taxonomy-prototype similarity, levels 2-3 by prototype similarity; an EXTRACTIVE summary.

Reading the article
-------------------
The content is gov.br markdown: :func:`paragraphs` drops images, link targets, emphasis, photo
credits, rules and tables, and stops at "Conteúdo relacionado" / "Leia também" blocks. The
article is then embedded as units: the title, and the sentences of the subtitle, the editorial
lead and the content up to ~:data:`BODY_CHARS` characters. The whole batch is ONE ``encode``
call and the same sentence vectors serve the summary, so a batch costs about one pass over its
first ~1,300 characters per article (cost is linear in them: the tokenizer is pure Python).

Level 1
-------
Features per article (:class:`Features`): the title vector, the lead vector (units in the first
:data:`LEAD_CHARS`), the body vector; the article vector (body + :data:`HEAD_WEIGHT` x title)
scored against the taxonomy prototypes (below) gives one score per level-1 theme. The trained
:class:`Head` (``data/classifier/head.npz``, written by ``scripts/train_classifier.py``
from ``../shared/data/classifier-dev`` + our corpus, ``--archive``: plus an operator's own
production-labelled articles) adds a logistic regression over the
three vectors, an agency prior (when the article's agency is known), the prototype scores, and
the log-probabilities of its lexical part (:class:`Lexical`: a logistic regression over TF-IDF
counts of the article's words, :func:`lexical_text`); the prototype term carries the themes
with little training data. ``confidence`` is the
softmax probability of the chosen theme with one temperature fitted on out-of-fold
predictions of real news (calibrated: among articles at confidence ~0.8, ~80% agree with
production's label). Without a head trained for this embedder, level 1 falls back to
prototypes alone (softmax at :data:`CONFIDENCE_TEMPERATURE`).

Levels 2 and 3, prototypes
--------------------------
Every taxonomy node gets SEVERAL prototype texts (``"<label>. <description>"``, its keywords in
chunks of :data:`KEYWORD_CHUNK`, each example headline); a node scores the mean of the top-k
cosines over the prototypes of its whole subtree. Level 2 is chosen among the children of the
chosen level 1 (prototype score plus the head's level-2 part, a logistic regression trained on
production's level-2 labels of real news), level 3 among the children of level 2 by prototypes
alone (codes always nest). Nodes are reached only
through the :class:`~dgb.taxonomy.Taxonomy` API, so another tree drops in (retrain the head).
Prototype vectors are computed once per (texts hash, embedder, dimension), kept in memory and,
with a cache folder, on disk (``<state_dir>/cache/local-classifier/``).

The summary is EXTRACTIVE
-------------------------
1-:data:`SUMMARY_MAX_SENTENCES` leading sentences COPIED from the article (subtitle, lead, first
content sentences; whitespace normalised, a leading dateline such as "Brasília (DF) – " dropped),
skipping captions, unpunctuated lines, sentences that announce a list, and near-repeats, at most
:data:`SUMMARY_MAX_CHARS` characters. Nothing is generated or paraphrased; a single sentence over
the limit is cut at a word boundary and ends with "…". ``classifier_version`` says so:
``"local-emb-4 (head; extractive summary; <model>)"``.

Figures (``scripts/bench_classify.py``, grouped cross-validation, real.jsonl, production's
tree): level-1 agreement with production 0.68 (0.65 without the lexical part, as local-emb-2
was; prototypes alone 0.49); level-2 label agreement 0.40 (prototypes alone 0.32).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

import numpy as np

from dgb.enrich.contract import ArticleText, Classification, ClassificationFailure, now_utc
from dgb.taxonomy import Taxonomy

log = logging.getLogger(__name__)

NAME = "local"
VERSION = "local-emb-4"  # 4: summaries up to 600 characters (3: up to 500)
PROTOTYPE_VERSION = "proto-1"  # bump when prototype construction changes (invalidates caches)

KEYWORD_CHUNK = 5
TOP_K = {1: 10, 2: 4, 3: 3}  # top-k mean per level
BODY_CHARS = 1200  # text embedded per article after the title (subtitle, lead, content)
LEAD_CHARS = 300  # the first characters of it: the "lead" view of the head
HEAD_WEIGHT = 0.3  # weight of the title vector in the article vector
UNIT_MAX_CHARS = 500  # longer sentences are embedded in pieces
SUMMARY_MAX_CHARS = 600  # as Bedrock's; production's reference summaries: median 556 characters
SUMMARY_MAX_SENTENCES = 3
SUMMARY_MIN_CHARS = 40  # shorter candidates (captions, datelines) are not summaries
SUMMARY_CANDIDATES = 6  # first sentences (subtitle, lead, content) eligible for the summary
SUMMARY_REDUNDANCY = 0.85  # a sentence this similar to one already taken adds nothing
CONFIDENCE_TEMPERATURE = 0.03  # prototype-only mode (no head): softmax temperature
L2_PROTO_TEMPERATURE = 0.05  # level-2 prototype scores are divided by this (next to log-probabilities)
L2_UNSEEN_LOGPROB = float(np.log(1e-3))
HEAD_FILE = Path(__file__).resolve().parents[1] / "data" / "classifier" / "head.npz"
ENCODE_BATCH = 512

# ----------------------------------------------------------------------------- text splitting

_WS = re.compile(r"\s+")
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
    return _WS.sub(" ", text or "").strip()


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


def clean_line(line: str) -> str:
    """One markdown line as plain text: images dropped, links reduced to their text, emphasis
    markers and invisible characters removed, whitespace normalised."""
    line = _IMAGE.sub(" ", line)
    line = _LINK.sub(lambda m: m.group(1), line)
    line = _URL.sub(" ", line)
    line = _INVISIBLE.sub("", line.replace("\xa0", " "))
    line = _EMPHASIS.sub("", line)
    return normalize_ws(line.lstrip(">").strip())


def is_furniture(line: str) -> bool:
    """True for a cleaned line that is page furniture, not news (credits, bylines, rules)."""
    return bool(_RULE.match(line) or _CREDIT.match(line) or _BYLINE.match(line))


def paragraphs(content: str) -> list[tuple[str, str]]:
    """``(kind, text)`` for each paragraph: ``prose``, ``heading`` (``## ...``) or ``bullet``.

    The markdown is cleaned line by line (:func:`clean_line`); furniture lines (credits, rules)
    and table rows are dropped, and the text stops at a "Conteúdo relacionado" / "Leia também" /
    "Compartilhar" line (what follows it on gov.br pages is a list of other articles)."""
    out: list[tuple[str, str]] = []
    for block in re.split(r"\n\s*\n", content or ""):
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
                return out
            kinds.append((kind, line))
        if kinds:
            out.extend(_block(kinds))
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


def _pieces(sentence: str, limit: int = UNIT_MAX_CHARS) -> list[str]:
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


def _cut(sentence: str, limit: int = SUMMARY_MAX_CHARS) -> str:
    if len(sentence) <= limit:
        return sentence
    cut = sentence[: limit - 1]
    if " " in cut:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,;:") + "…"


@dataclass
class _Layout:
    """Where one article's units sit in the batch's encode call."""

    title: int | None
    body: list[int]  # subtitle, lead and content sentences up to BODY_CHARS
    head: list[int]  # the body units that start within the first LEAD_CHARS
    candidates: list[tuple[int, str]]  # summary candidates: (unit index, sentence), document order


_ENDS_SENTENCE = re.compile(r"[.!?…][\"”’)]*\s*$")
_DATELINE = re.compile(r"^[A-ZÀ-Ý][^.!?()]{1,60}\([A-Z]{2}\)\s*[–—-]+\s*")


def _layout(item: ArticleText, texts: list[str]) -> _Layout:
    def add(text: str) -> int:
        texts.append(text)
        return len(texts) - 1

    title = normalize_ws(item.title)
    t_idx = add(title) if title else None
    sequence: list[tuple[str, str]] = []  # (kind, sentence): subtitle, lead, then the content
    for kind, part in (("subtitle", item.subtitle), ("lead", item.editorial_lead)):
        sequence.extend((kind, sentence) for sentence in split_sentences(clean_line(part or "")))
    for kind, para in paragraphs(item.content):
        sentences = split_sentences(para) if kind == "prose" else [para]
        sequence.extend((kind, sentence) for sentence in sentences)
    body: list[int] = []
    head: list[int] = []
    candidates: list[tuple[int, str]] = []
    position = 0
    for kind, sentence in sequence:
        if position >= BODY_CHARS:
            break
        first = None
        offset = position
        for piece in _pieces(sentence):
            if offset >= BODY_CHARS:
                break  # a run-on "sentence" (2 MB without punctuation) is read up to BODY_CHARS only
            offset += len(piece) + 1
            idx = add(piece)
            body.append(idx)
            if position < LEAD_CHARS:
                head.append(idx)
            first = idx if first is None else first
        if kind != "heading" and kind != "bullet" and len(candidates) < SUMMARY_CANDIDATES:
            candidates.append((first, _DATELINE.sub("", sentence)))
        position += len(sentence) + 1
    return _Layout(t_idx, body, head, candidates)


# ----------------------------------------------------------------------------- prototypes


@dataclass
class _Prototypes:
    texts: list[str]
    owner: list[str]  # taxonomy code each prototype belongs to
    digest: str


def build_prototypes(taxonomy: Taxonomy) -> _Prototypes:
    texts: list[str] = []
    owner: list[str] = []

    def add(code: str, text: str) -> None:
        text = normalize_ws(text)
        if text:
            texts.append(text)
            owner.append(code)

    for theme in taxonomy:
        add(theme.code, f"{theme.label}. {theme.description}")
        kws = list(theme.keywords)
        for i in range(0, len(kws), KEYWORD_CHUNK):
            add(theme.code, ", ".join(kws[i : i + KEYWORD_CHUNK]))
        for example in theme.examples:
            add(theme.code, example)
    payload = json.dumps([PROTOTYPE_VERSION, owner, texts], ensure_ascii=False)
    return _Prototypes(texts, owner, hashlib.sha256(payload.encode("utf-8")).hexdigest())


_memory_cache: dict[tuple[str, str, int], np.ndarray] = {}
_cache_lock = threading.Lock()


def _cache_file(cache_dir: Path, model: str, dim: int, digest: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_") or "model"
    return Path(cache_dir) / "local-classifier" / f"{safe}-{dim}-{digest[:16]}.npy"


def prototype_vectors(protos: _Prototypes, embedder, cache_dir: Path | None = None) -> np.ndarray:
    """Prototype embeddings, computed once per (texts, model) and cached in memory / on disk."""
    key = (protos.digest, embedder.name, int(embedder.dim))
    with _cache_lock:
        cached = _memory_cache.get(key)
        if cached is not None:
            return cached
        path = _cache_file(cache_dir, embedder.name, embedder.dim, protos.digest) if cache_dir else None
        vectors = None
        if path is not None and path.is_file():
            try:
                loaded = np.load(path, allow_pickle=False)
                if loaded.shape == (len(protos.texts), embedder.dim):
                    vectors = loaded.astype(np.float32, copy=False)
            except (OSError, ValueError) as exc:
                log.warning("ignoring unreadable prototype cache %s: %s", path, exc)
        if vectors is None:
            vectors = np.asarray(embedder.encode(protos.texts, batch_size=ENCODE_BATCH), dtype=np.float32)
            if path is not None:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
                    with open(tmp, "wb") as fh:
                        np.save(fh, vectors, allow_pickle=False)
                    os.replace(tmp, path)
                except OSError as exc:
                    log.warning("cannot write prototype cache %s: %s", path, exc)
        _memory_cache[key] = vectors
        return vectors


def _topk_mean(sims: np.ndarray, k: int) -> np.ndarray:
    """Mean of the k largest values along the last axis."""
    n = sims.shape[-1]
    if n <= k:
        return sims.mean(axis=-1)
    return np.partition(sims, n - k, axis=-1)[..., n - k :].mean(axis=-1)


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
    :attr:`LocalClassifier.level1_codes`)."""

    layouts: list[_Layout]
    vectors: np.ndarray
    X: np.ndarray
    A: np.ndarray
    S: np.ndarray
    proto: np.ndarray


def _views(layouts: list[_Layout], vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def log_softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax of a 2-d array."""
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


# ----------------------------------------------------------------------------- lexical signal

LEX_BODY_CHARS = 3000  # how much of the body the word counts read
_LEX_TOKEN = re.compile(r"\b\w\w+\b")


def lexical_terms(text: str) -> list[str]:
    """The words the lexical part counts: accents removed (NFKD, combining marks dropped),
    lower case, runs of 2+ word characters."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return _LEX_TOKEN.findall(folded.lower())


def lexical_text(item: ArticleText) -> str:
    """What the lexical part reads of an article: the title twice (it weighs most), the
    subtitle, the lead and the first :data:`LEX_BODY_CHARS` characters of the body."""
    parts = [
        item.title,
        item.title,
        item.subtitle,
        item.editorial_lead,
        (item.content or "")[:LEX_BODY_CHARS],
    ]
    return " ".join(p for p in parts if p)


@dataclass(frozen=True)
class Lexical:
    """A logistic regression over TF-IDF word counts (sublinear tf, l2-normalised), one row of
    ``W`` per code of its :class:`Head`; ``terms`` the vocabulary, ``idf`` each term's weight."""

    terms: tuple[str, ...]
    idf: np.ndarray
    W: np.ndarray
    b: np.ndarray

    @cached_property
    def _index(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.terms)}

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """(n, len(terms)) TF-IDF rows, as scikit-learn's TfidfVectorizer(sublinear_tf=True) with
        :func:`lexical_terms` as its analyzer computes them."""
        index = self._index
        out = np.zeros((len(texts), len(self.terms)), dtype=np.float32)
        for n, text in enumerate(texts):
            counts: dict[int, int] = {}
            for term in lexical_terms(text):
                i = index.get(term)
                if i is not None:
                    counts[i] = counts.get(i, 0) + 1
            if counts:
                cols = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
                tf = 1.0 + np.log(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))
                row = tf * self.idf[cols]
                out[n, cols] = row / np.linalg.norm(row)
        return out

    def logprobs(self, texts: Sequence[str]) -> np.ndarray:
        return log_softmax(self.vectors(texts) @ self.W.T + self.b)


# ----------------------------------------------------------------------------- the trained head


@dataclass(frozen=True)
class Head:
    """The level-1 decision trained on real labelled news (``scripts/train_classifier.py``).

    logits = ``X @ W.T + b + Wa[:, agency] + alpha * proto / proto_temperature``; probabilities
    = softmax of ``scale * logits`` (``scale`` fitted on out-of-fold predictions: the
    calibration). ``codes`` are the level-1 codes of the rows of ``W``; ``agencies`` the agency
    keys of the columns of ``Wa`` (the agency prior; an unknown or missing agency adds nothing).
    ``embedder`` / ``dim``: the model the head was trained with; with any other embedder the
    vectors mean something else and the head is not used.

    The optional level-2 part (``l2_codes``, ``W2``, ``b2``; trained on production's level-2
    labels of real news) adds ``l2_weight`` x its log-probability to each level-2 candidate's
    prototype score (divided by :data:`L2_PROTO_TEMPERATURE`); a level-2 code it never saw gets
    the log-probability :data:`L2_UNSEEN_LOGPROB`.
    """

    codes: tuple[str, ...]
    W: np.ndarray
    b: np.ndarray
    alpha: float
    proto_temperature: float
    scale: float
    embedder: str
    dim: int
    meta: dict
    agencies: tuple[str, ...] = ()
    Wa: np.ndarray | None = None
    l2_codes: tuple[str, ...] = ()
    W2: np.ndarray | None = None
    b2: np.ndarray | None = None
    l2_weight: float = 1.0
    lexical: Lexical | None = None
    lex_weight: float = 1.0

    def level2_logprobs(self, X: np.ndarray) -> np.ndarray | None:
        """(n, len(l2_codes)) log-probabilities of the level-2 part (None when it has none)."""
        if not self.l2_codes or self.W2 is None:
            return None
        return log_softmax(X @ self.W2.T + self.b2)

    def logits(
        self,
        X: np.ndarray,
        proto: np.ndarray,
        agencies: Sequence[str | None] = (),
        texts: Sequence[str] = (),
    ) -> np.ndarray:
        """(n, codes) logits; ``agencies``: each row's agency key (or None), or empty for none;
        ``texts``: each row's :func:`lexical_text`, for the lexical part (empty: none)."""
        z = X @ self.W.T + self.b + self.alpha * proto / self.proto_temperature
        if self.lexical is not None and len(texts):
            z = z + self.lex_weight * self.lexical.logprobs(texts)
        if self.agencies and self.Wa is not None and len(agencies):
            index = {a: i for i, a in enumerate(self.agencies)}
            for n, agency in enumerate(agencies):
                i = index.get(agency_key(agency))
                if i is not None:
                    z[n] += self.Wa[:, i]
        return z

    def save(self, path: Path) -> None:
        """Write the head as one compressed ``.npz`` (the weight matrices as float16: half the
        size, and the decisions do not change at that precision)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            np.savez_compressed(
                fh,
                codes=np.array(self.codes),
                W=self.W.astype(np.float16),
                b=self.b.astype(np.float32),
                params=np.array([self.alpha, self.proto_temperature, self.scale], dtype=np.float64),
                agencies=np.array(self.agencies, dtype=str),
                Wa=(self.Wa if self.Wa is not None else np.zeros((len(self.codes), 0))).astype(np.float32),
                l2_codes=np.array(self.l2_codes, dtype=str),
                W2=(self.W2 if self.W2 is not None else np.zeros((0, self.W.shape[1]))).astype(np.float16),
                b2=(self.b2 if self.b2 is not None else np.zeros(0)).astype(np.float32),
                l2_weight=np.array(self.l2_weight),
                lex_terms=np.array(self.lexical.terms if self.lexical else (), dtype=str),
                lex_idf=(self.lexical.idf if self.lexical else np.zeros(0)).astype(np.float32),
                lex_W=(self.lexical.W if self.lexical else np.zeros((len(self.codes), 0))).astype(np.float16),
                lex_b=(self.lexical.b if self.lexical else np.zeros(len(self.codes))).astype(np.float32),
                lex_weight=np.array(self.lex_weight),
                embedder=np.array(self.embedder),
                dim=np.array(self.dim),
                meta=np.array(json.dumps(self.meta, ensure_ascii=False, sort_keys=True)),
            )
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> Head:
        """The head written by :meth:`save`; ValueError when its arrays do not fit together."""
        with np.load(Path(path), allow_pickle=False) as z:
            alpha, proto_temperature, scale = (float(v) for v in z["params"])
            lexical = None
            if "lex_terms" in z.files and len(z["lex_terms"]):
                lexical = Lexical(
                    tuple(str(t) for t in z["lex_terms"]),
                    z["lex_idf"].astype(np.float32),
                    z["lex_W"].astype(np.float32),
                    z["lex_b"].astype(np.float32),
                )
            head = cls(
                codes=tuple(str(c) for c in z["codes"]),
                W=z["W"].astype(np.float32),
                b=z["b"].astype(np.float32),
                alpha=alpha,
                proto_temperature=proto_temperature,
                scale=scale,
                embedder=str(z["embedder"]),
                dim=int(z["dim"]),
                meta=json.loads(str(z["meta"])),
                agencies=tuple(str(a) for a in z["agencies"]),
                Wa=z["Wa"].astype(np.float32),
                l2_codes=tuple(str(c) for c in z["l2_codes"]),
                W2=z["W2"].astype(np.float32),
                b2=z["b2"].astype(np.float32),
                l2_weight=float(z["l2_weight"]),
                lexical=lexical,
                lex_weight=float(z["lex_weight"]) if "lex_weight" in z.files else 1.0,
            )
        if head.W2.shape != (len(head.l2_codes), head.W.shape[1]) or head.b2.shape != (len(head.l2_codes),):
            raise ValueError(
                f"{path}: level-2 shapes W2{head.W2.shape} b2{head.b2.shape} do not match "
                f"{len(head.l2_codes)} codes"
            )
        if head.Wa.shape != (len(head.codes), len(head.agencies)):
            raise ValueError(
                f"{path}: agency prior shape {head.Wa.shape} does not match "
                f"{len(head.codes)} codes x {len(head.agencies)} agencies"
            )
        lex = head.lexical
        if lex is not None and (
            lex.idf.shape != (len(lex.terms),)
            or lex.W.shape != (len(head.codes), len(lex.terms))
            or lex.b.shape != (len(head.codes),)
        ):
            raise ValueError(
                f"{path}: lexical shapes W{lex.W.shape} b{lex.b.shape} idf{lex.idf.shape} do not match "
                f"{len(head.codes)} codes x {len(lex.terms)} terms"
            )
        if head.W.shape != (len(head.codes), 3 * head.dim) or head.b.shape != (len(head.codes),):
            raise ValueError(
                f"{path}: head shapes W{head.W.shape} b{head.b.shape} do not match "
                f"{len(head.codes)} codes x 3 x {head.dim}"
            )
        return head


def _is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` says the model is unreachable (the service down, overloaded or timing
    out) rather than that this input is bad."""
    from dgb.embed.client import ModelServiceUnavailable

    return isinstance(exc, (ModelServiceUnavailable, MemoryError))


def agency_key(agency: str | None) -> str:
    """An agency key compared loosely (``" Saude "`` -> ``"saude"``)."""
    return (agency or "").strip().lower()


def load_default_head() -> Head | None:
    """The shipped head (:data:`HEAD_FILE`), or None when it is absent (prototype-only mode)."""
    if not HEAD_FILE.is_file():
        return None
    return Head.load(HEAD_FILE)


# ----------------------------------------------------------------------------- classifier


class LocalClassifier:
    """Offline classifier over any :class:`dgb.embed.Embedder` (in-process model or the service).

    ``head``: the trained :class:`Head`; by default the shipped one (:data:`HEAD_FILE`) when it
    was trained with this embedder's model, else none (level 1 by prototypes alone). Pass
    ``head=False`` to force prototype-only mode (what the training script measures against).

    The summary is EXTRACTIVE: sentences copied from the article, never generated text.
    """

    name = NAME

    def __init__(
        self,
        embedder,
        taxonomy: Taxonomy | None = None,
        *,
        cache_dir: Path | None = None,
        head: Head | Literal[False] | None = None,
    ):
        if taxonomy is None:
            from dgb.taxonomy import load_taxonomy

            taxonomy = load_taxonomy()
        self.embedder = embedder
        self.taxonomy = taxonomy
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self._protos = build_prototypes(taxonomy)
        self._vectors: np.ndarray | None = None
        self._lock = threading.Lock()
        # subtree prototype indices per node
        subtree: dict[str, list[int]] = {}
        for i, code in enumerate(self._protos.owner):
            for theme in taxonomy.path(code):
                subtree.setdefault(theme.code, []).append(i)
        self._subtree = {code: np.asarray(idx, dtype=np.int64) for code, idx in subtree.items()}
        self.level1_codes = [t.code for t in taxonomy.level(1) if t.code in self._subtree]
        if head is None:
            head = load_default_head()
            if head is not None and (head.embedder != embedder.name or head.dim != int(embedder.dim)):
                log.info(
                    "shipped classifier head was trained with %s/%d, not %s/%d: prototypes only",
                    head.embedder,
                    head.dim,
                    embedder.name,
                    embedder.dim,
                )
                head = None
        self.head: Head | None = head or None
        self._head_cols = None
        if self.head is not None:
            unknown = sorted(set(self.head.codes) - set(self.level1_codes))
            if unknown:
                raise ValueError(f"classifier head has level-1 codes {unknown} that the taxonomy lacks")
            self._head_cols = np.array([self.level1_codes.index(c) for c in self.head.codes])
            trained_with = (self.head.meta or {}).get("taxonomy_prototypes")
            if trained_with and trained_with != self._protos.digest[:16]:
                log.warning(
                    "the classifier head was trained with other taxonomy prototypes (%s, now %s): "
                    "it still works, but retrain it (scripts/train_classifier.py)",
                    trained_with,
                    self._protos.digest[:16],
                )
        mode = "head" if self.head is not None else "prototypes"
        self.version = f"{VERSION} ({mode}; extractive summary; {embedder.name})"

    # -- prototypes -----------------------------------------------------------------
    def warm(self) -> LocalClassifier:
        """Compute (or load) the prototype vectors now."""
        self._prototype_matrix()
        return self

    def _prototype_matrix(self) -> np.ndarray:
        if self._vectors is None:
            with self._lock:
                if self._vectors is None:
                    self._vectors = prototype_vectors(self._protos, self.embedder, self.cache_dir)
        return self._vectors

    # -- scoring ----------------------------------------------------------------------
    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors = np.asarray(self.embedder.encode(texts, batch_size=ENCODE_BATCH), dtype=np.float32)
        if vectors.shape != (len(texts), self._prototype_matrix().shape[1]):
            raise RuntimeError(
                f"embedder {self.embedder.name} returned shape {vectors.shape} for {len(texts)} texts"
            )
        return vectors

    def _scores(self, sims: np.ndarray, codes: list[str], level: int) -> np.ndarray:
        """Top-k mean prototype similarity of each node in ``codes``; ``sims`` is (n, prototypes)."""
        return np.stack([_topk_mean(sims[..., self._subtree[c]], TOP_K[level]) for c in codes], axis=-1)

    def features(self, items: Sequence[ArticleText]) -> Features:
        """Embed ``items`` (ONE encode call) and compute everything the decision needs."""
        texts: list[str] = []
        layouts = [_layout(item, texts) for item in items]
        vectors = self._encode(texts)
        X, A = _views(layouts, vectors)
        S = A @ self._prototype_matrix().T
        return Features(layouts, vectors, X, A, S, self._scores(S, self.level1_codes, 1))

    def level1_probabilities(
        self, feats: Features, agencies: Sequence[str | None] = (), texts: Sequence[str] = ()
    ) -> np.ndarray:
        """(n, len(level1_codes)) probabilities: the head's calibrated softmax, or (no head) the
        softmax of the prototype scores at :data:`CONFIDENCE_TEMPERATURE`. ``texts``: each
        article's :func:`lexical_text` (the head's lexical part reads them)."""
        if self.head is None:
            return _softmax(feats.proto / CONFIDENCE_TEMPERATURE)
        z = np.full((len(feats.X), len(self.level1_codes)), -np.inf, dtype=np.float64)
        proto = feats.proto[:, self._head_cols]
        z[:, self._head_cols] = self.head.scale * self.head.logits(feats.X, proto, agencies, texts)
        return _softmax(z)

    def _summary(self, layout: _Layout, vectors: np.ndarray, title: str) -> str | None:
        """Up to :data:`SUMMARY_MAX_SENTENCES` leading sentences, at most :data:`SUMMARY_MAX_CHARS`
        characters in all, skipping captions (under :data:`SUMMARY_MIN_CHARS`), lines without final
        punctuation (a subtitle, a heading: copied as is they would run into the next sentence),
        sentences that announce a list (ending in ":") and near-repeats of the title or of a
        sentence already taken (measured on real.jsonl: ROUGE-L 0.35 -> 0.37; 600 characters instead
        of 500: 0.371 -> 0.384)."""
        cands = [
            (i, s) for i, s in layout.candidates if len(s) >= SUMMARY_MIN_CHARS and _ENDS_SENTENCE.search(s)
        ]
        cands = cands or [(i, s) for i, s in layout.candidates if s.strip()]
        if not cands:
            return None
        chosen: list[tuple[int, str]] = []
        total = 0
        for idx, sentence in cands:
            v = vectors[idx]
            if title and normalize_ws(sentence).lower() == title.lower():
                continue
            if any(float(v @ vectors[j]) >= SUMMARY_REDUNDANCY for j, _ in chosen):
                continue
            extra = len(sentence) + (1 if chosen else 0)
            if chosen and total + extra > SUMMARY_MAX_CHARS:
                break
            chosen.append((idx, sentence))
            total += extra
            if len(chosen) >= SUMMARY_MAX_SENTENCES:
                break
        if not chosen:
            chosen = [cands[0]]
        if len(chosen) == 1:
            return _cut(chosen[0][1])
        return " ".join(s for _, s in chosen)

    def classify_batch(self, items: list[ArticleText]) -> list[Classification | ClassificationFailure]:
        results: list[Classification | ClassificationFailure | None] = [None] * len(items)
        keep: list[int] = []
        for n, item in enumerate(items):
            if item.is_empty():
                results[n] = ClassificationFailure(
                    "empty_article", "the article has no title, subtitle, lead or content", retryable=False
                )
            else:
                keep.append(n)
        if not keep:
            return results  # type: ignore[return-value]

        for n, result in zip(keep, self._classify_isolating([items[n] for n in keep])):
            results[n] = result
        return results  # type: ignore[return-value]

    def _classify(self, items: list[ArticleText]) -> list[Classification]:
        feats = self.features(items)
        probs = self.level1_probabilities(
            feats, [item.agency for item in items], [lexical_text(item) for item in items]
        )
        return self.decide(items, feats, probs)

    def _classify_isolating(self, items: list[ArticleText]) -> list[Classification | ClassificationFailure]:
        """:meth:`_classify`, with a failing batch bisected so that an article the model cannot
        take fails alone (``classifier_error``, not retryable) and the others are classified.
        An unavailable model service is no article's fault: that error propagates (the whole
        batch is retried later), never turned into per-article failures."""
        try:
            return list(self._classify(items))
        except Exception as exc:
            if _is_outage(exc):
                raise
            if len(items) == 1:
                log.warning(
                    "article %s cannot be classified: %s: %s", items[0].unique_id, type(exc).__name__, exc
                )
                detail = f"{type(exc).__name__}: {exc}"[:500]
                return [ClassificationFailure("classifier_error", detail, retryable=False)]
            mid = len(items) // 2
            return self._classify_isolating(items[:mid]) + self._classify_isolating(items[mid:])

    def decide(
        self,
        items: Sequence[ArticleText],
        feats: Features,
        probs: np.ndarray,
        level2: tuple[tuple[str, ...], np.ndarray] | None = None,
    ) -> list[Classification]:
        """The classifications of ``items`` given their features and level-1 probabilities: level 1
        is the most probable theme (``confidence`` its probability); level 2 is chosen among the
        children of level 1 by prototype similarity plus, when the head has one, its level-2 part
        (``level2`` = (codes, log-probabilities) overrides it: the benchmark's per-fold heads);
        level 3 among the children of level 2 by prototype similarity (codes always nest)."""
        if level2 is None and self.head is not None:
            lp = self.head.level2_logprobs(feats.X)
            level2 = (self.head.l2_codes, lp) if lp is not None else None
        l2_index = {c: i for i, c in enumerate(level2[0])} if level2 is not None else {}
        l2_weight = self.head.l2_weight if self.head is not None else 1.0
        enriched_at = now_utc()
        out: list[Classification] = []
        for row, item in enumerate(items):
            sims = feats.S[row]
            best = int(probs[row].argmax())
            l1 = self.level1_codes[best]
            l2 = l3 = None
            kids = [t.code for t in self.taxonomy.children(l1) if t.code in self._subtree]
            if kids:
                score = self._scores(sims, kids, 2) / L2_PROTO_TEMPERATURE
                if level2 is not None:
                    lp = level2[1][row]
                    score = score + l2_weight * np.array(
                        [lp[l2_index[c]] if c in l2_index else L2_UNSEEN_LOGPROB for c in kids]
                    )
                l2 = kids[int(score.argmax())]
                kids = [t.code for t in self.taxonomy.children(l2) if t.code in self._subtree]
                if kids:
                    l3 = kids[int(self._scores(sims, kids, 3).argmax())]
            out.append(
                Classification(
                    theme_l1=l1,
                    theme_l2=l2,
                    theme_l3=l3,
                    most_specific=l3 or l2 or l1,
                    summary=self._summary(feats.layouts[row], feats.vectors, normalize_ws(item.title)),
                    confidence=round(float(probs[row, best]), 4),
                    classifier=NAME,
                    classifier_version=self.version,
                    enriched_at=enriched_at,
                    usage=None,
                )
            )
        return out

    def level1_scores(self, items: Sequence[ArticleText]) -> tuple[list[str], np.ndarray]:
        """(level-1 codes, prototype scores matrix) — for diagnostics."""
        return list(self.level1_codes), self.features(items).proto
