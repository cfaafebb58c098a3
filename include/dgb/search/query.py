"""Index queries: keyword, vector or hybrid search over the alias.

:func:`search`: hybrid = reciprocal-rank fusion in Python (the Typesense 0.24 server has no
server-side hybrid; only parameters 0.24 and newer servers both accept are used), or the server's
own fusion where it has one (:data:`NATIVE_HYBRID`).

Each hit carries Typesense's own ``score`` (keyword: the 19-digit ``text_match`` bucket value;
vector: cosine similarity; hybrid: the fusion score) and a ``relevance`` in [0, 1] a reader can
read, the same for every mode of one query:

* keyword: the share of the query's words the hit matched (``text_match_info.tokens_matched``),
  times the weight of the best field it matched them in relative to the title's (title 1, subtitle
  or summary 0.75, content 0.625: ``0.5 + 0.5 x weight / 4``), and never above the hit ranked
  before it (Typesense's ranking also weighs typos and word proximity, which that share does not
  see: "pontes" for "ponte" is a typo match, ranked after an exact one);
* vector only: the cosine similarity of the query and the article, floored at 0;
* hybrid: the fusion score over the best a hit can get (first in both lists: 1 / 61 client-side;
  the server's own fusion score is already in [0, 1]).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from dgb.search.sync import transient_errors

QUERY_BY = "title,subtitle,summary,content"
QUERY_BY_WEIGHTS = "4,2,2,1"  # title first
RRF_K = 60  # reciprocal-rank fusion constant
HYBRID_ALPHA = 0.8  # weight of the vector ranking in hybrid search (production's alpha)
_RESULT_FIELDS = (
    "unique_id,title,agency,published_at,content_hash,most_specific_theme_code,most_specific_theme_label"
)
_WEIGHTS = [int(w) for w in QUERY_BY_WEIGHTS.split(",")]
_QUERY_WORD = re.compile(r"\w+")


class SearchError(RuntimeError):
    """A search could not run: server unreachable, alias/collection missing, bad request."""


@dataclass
class Hit:
    unique_id: str
    title: str
    agency: str
    theme: str | None  # most specific theme: "<code> <label>"
    score: float  # keyword: text_match (int); vector: 1 - vector_distance; hybrid: RRF score
    relevance: float = 0.0  # in [0, 1], see the module's docstring
    published_at: int | None = None  # epoch seconds


def _theme(doc: dict) -> str | None:
    code, label = doc.get("most_specific_theme_code"), doc.get("most_specific_theme_label")
    if code and label:
        return f"{code} {label}"
    return code or label or None


def _hits(result: dict) -> list[dict]:
    if "grouped_hits" in result:
        return [g["hits"][0] for g in result["grouped_hits"] if g.get("hits")]
    return list(result.get("hits") or [])


def _to_hit(h: dict, score: float, relevance: float) -> Hit:
    d = h["document"]
    return Hit(
        unique_id=d.get("unique_id") or d["id"],
        title=d.get("title", ""),
        agency=d.get("agency", ""),
        theme=_theme(d),
        score=score,
        relevance=round(max(0.0, min(1.0, relevance)), 4),
        published_at=d.get("published_at"),
    )


def keyword_relevance(hit: dict, query: str) -> float:
    """The share of ``query``'s words the hit matched, times its best field's weight relative to
    the title's (0.5 + 0.5 x weight / the highest weight)."""
    info = hit.get("text_match_info") or {}
    words = max(1, len(_QUERY_WORD.findall(query)))
    matched = min(int(info.get("tokens_matched") or 0), words)
    weight = int(info.get("best_field_weight") or max(_WEIGHTS))
    return matched / words * (0.5 + 0.5 * min(weight, max(_WEIGHTS)) / max(_WEIGHTS))


def _vector_literal(vec: Sequence[float]) -> str:
    return ",".join(f"{float(x):.7g}" for x in vec)


def _multi_search(ts, alias: str, searches: list[dict]) -> list[dict]:
    import typesense.exceptions as tse

    try:
        resp = ts.multi_search.perform({"searches": searches})
    except tse.TypesenseClientError as exc:
        raise SearchError(f"typesense: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:  # httpx / requests connection errors
        if isinstance(exc, transient_errors()):
            raise SearchError(f"typesense unreachable: {type(exc).__name__}: {exc}") from exc
        raise
    results = resp.get("results") or []
    for r in results:
        if "error" in r:
            if r.get("code") == 404:
                raise SearchError(f"typesense: collection or alias {alias!r} not found")
            raise SearchError(f"typesense: {r.get('code')}: {r['error']}")
    return results


def server_version(ts) -> tuple[int, ...]:
    """The Typesense server's version as a tuple (``(0, 24, 1)``, ``(27, 1)``); ``(0,)`` if unknown.

    Read once per client from ``/debug``: features differ between the 0.24 server shipped for
    local use and production's 27.x (native hybrid rank fusion, ``grouped_hits[].found``).
    """
    cached = getattr(ts, "_dgb_server_version", None)
    if cached is not None:
        return cached
    try:
        raw = str(ts.debug.retrieve().get("version", ""))
        version = tuple(int(part) for part in raw.lstrip("v").split(".") if part.isdigit()) or (0,)
    except Exception:
        version = (0,)
    try:
        ts._dgb_server_version = version
    except AttributeError:  # pragma: no cover - a client that refuses attributes: ask each time
        pass
    return version


#: First Typesense version with native hybrid search (keyword + vector fused by the server).
NATIVE_HYBRID = (0, 25)


def search(
    ts, alias: str, query: str, *, semantic: bool = False, embedder=None, limit: int = 10
) -> list[Hit]:
    """Top ``limit`` hits for ``query``, republished duplicates (same content_hash) hidden.

    Keyword: ``query_by`` title, subtitle, summary, content (title weighted highest); score =
    ``text_match``. Semantic: the query embedded with ``embedder`` and a nearest-neighbour
    ``vector_query`` (sent in a multi_search POST body: the vector is long); score =
    1 - vector_distance. When semantic AND the query also has keyword hits, both lists are
    combined by weighted reciprocal-rank fusion (score = sum of w / (60 + rank), w = 0.8 for the
    vector list and 0.2 for keywords, production's alpha). In that fusion keyword evidence
    counts only for documents matching every query word (``drop_tokens_threshold: 0``): a
    partial match ("vacinação" without "gripe") must not outrank the nearest meaning.
    On a server with native hybrid search (>= 0.25, production's 27.x) one hybrid query with
    ``alpha`` 0.8 replaces the two lists and the client-side fusion.
    """
    limit = max(1, int(limit))
    common = {
        "collection": alias,
        "group_by": "content_hash",
        "group_limit": 1,
        "include_fields": _RESULT_FIELDS,
    }
    keyword = {**common, "q": query, "query_by": QUERY_BY, "query_by_weights": QUERY_BY_WEIGHTS}
    if not semantic:
        res = _multi_search(ts, alias, [{**keyword, "per_page": limit}])[0]
        out, ceiling = [], 1.0
        for h in _hits(res)[:limit]:
            ceiling = min(ceiling, keyword_relevance(h, query))
            out.append(_to_hit(h, int(h.get("text_match", 0)), ceiling))
        return out

    if embedder is None:
        raise ValueError("semantic search needs an embedder")
    vec = embedder.encode([query])[0]
    if server_version(ts) >= NATIVE_HYBRID:
        # the server fuses keyword and vector ranks itself (alpha = weight of the vector side)
        hybrid = {
            **keyword,
            "per_page": limit,
            "drop_tokens_threshold": 0,
            "vector_query": f"content_embedding:([{_vector_literal(vec)}], alpha: {HYBRID_ALPHA})",
        }
        res = _multi_search(ts, alias, [hybrid])[0]
        out = []
        for h in _hits(res)[:limit]:
            fused = float((h.get("hybrid_search_info") or {}).get("rank_fusion_score", 0.0))
            out.append(_to_hit(h, fused, fused))
        return out
    depth = min(250, max(limit * 3, 20))  # candidates per list for the fusion
    vector = {
        **common,
        "q": "*",
        "per_page": depth,
        "vector_query": f"content_embedding:([{_vector_literal(vec)}], k: {depth})",
    }
    kw_res, vec_res = _multi_search(
        ts, alias, [{**keyword, "per_page": depth, "drop_tokens_threshold": 0}, vector]
    )
    kw_hits, vec_hits = _hits(kw_res), _hits(vec_res)
    if not kw_hits:
        out = []
        for h in vec_hits[:limit]:
            similarity = 1.0 - float(h.get("vector_distance", 1.0))
            out.append(_to_hit(h, similarity, similarity))
        return out

    fused: dict[str, float] = {}
    first: dict[str, dict] = {}
    for weight, ranked in ((1.0 - HYBRID_ALPHA, kw_hits), (HYBRID_ALPHA, vec_hits)):
        for rank, h in enumerate(ranked, start=1):
            uid = h["document"]["unique_id"]
            fused[uid] = fused.get(uid, 0.0) + weight / (RRF_K + rank)
            first.setdefault(uid, h)
    # one hit per content_hash across both lists
    seen_hash: set[str] = set()
    out: list[Hit] = []
    for uid in sorted(fused, key=lambda u: -fused[u]):
        h = first[uid]
        key = h["document"].get("content_hash") or uid
        if key in seen_hash:
            continue
        seen_hash.add(key)
        out.append(_to_hit(h, fused[uid], fused[uid] * (RRF_K + 1)))  # first in both lists: 1
        if len(out) >= limit:
            break
    return out
