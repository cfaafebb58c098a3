"""Typesense index: whole documents from PostgreSQL, checked batch imports, rebuild, search.

No Airflow import: the index stage (DAG / TypesenseHook) passes a Typesense client and a
psycopg 3 connection in.

* :func:`fetch_documents` builds each document WHOLE from PostgreSQL (upsert replaces a
  document, so a partial document would erase fields). Removed articles and unknown ids map
  to ``None`` (= must not be in the index).
* :func:`sync` upserts a set of articles in batches, checks EVERY per-document result of the
  import endpoint (it answers HTTP 200 even when documents fail), retries backpressure (503,
  timeouts) with exponential backoff + jitter, deletes removed articles, then records
  ``indexed_at`` / ``indexed_version`` in ONE statement, only for rows still at the version it
  read.
* :func:`rebuild` builds the collection of the current schema (``schema.collection_schema``)
  from PostgreSQL and swaps the alias atomically: how a schema or model-dimension change rolls
  out.
* :func:`search` keyword, vector or hybrid search (reciprocal-rank fusion in Python: the
  Typesense 0.24 server has no server-side hybrid; only parameters 0.24 and newer servers both
  accept are used).

Transactions: the functions here that read or write PostgreSQL do it inside
``conn.transaction()`` blocks. On a connection that is idle (no transaction open: the normal
case for a task's connection) each block is its own transaction and the marks written by
:func:`sync` are COMMITTED when it returns; the caller need not commit. If the caller has a
transaction open, psycopg turns the blocks into savepoints and the caller's commit decides.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator, Sequence

CONTENT_CAP = 20_000
QUERY_BY = "title,subtitle,summary,content"
QUERY_BY_WEIGHTS = "4,2,2,1"      # title first
RRF_K = 60                        # reciprocal-rank fusion constant
HYBRID_ALPHA = 0.8                # weight of the vector ranking in hybrid search (production's alpha)
_RESULT_FIELDS = ("unique_id,title,agency,content_hash,"
                  "most_specific_theme_code,most_specific_theme_label")


class IndexUnavailable(RuntimeError):
    """Typesense stayed unavailable (503 / timeouts / unreachable) after the bounded retries.

    ``result`` is the partial :class:`SyncResult`; its successes were already recorded in
    PostgreSQL, so a retry of the whole call is safe (upserts are idempotent)."""

    def __init__(self, message: str, result: "SyncResult | None" = None):
        super().__init__(message)
        self.result = result


class SearchError(RuntimeError):
    """A search could not run: server unreachable, alias/collection missing, bad request."""


# --------------------------------------------------------------------------- documents


@dataclass
class Documents(Mapping):
    """What :func:`fetch_documents` found. Also a read-only mapping ``unique_id -> doc | None``
    over every requested id (``None`` = removed or unknown: must not be in the index)."""

    docs: dict[str, dict] = field(default_factory=dict)     # to upsert, built whole
    to_delete: list[str] = field(default_factory=list)      # removed articles (removed_at set)
    missing: list[str] = field(default_factory=list)        # not in PostgreSQL at all
    versions: dict[str, int] = field(default_factory=dict)  # version read, docs and to_delete

    def __getitem__(self, key: str) -> dict | None:
        if key in self.docs:
            return self.docs[key]
        if key in self.to_delete or key in self.missing:
            return None
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        yield from self.docs
        yield from self.to_delete
        yield from self.missing

    def __len__(self) -> int:
        return len(self.docs) + len(self.to_delete) + len(self.missing)


_SELECT = """
SELECT n.unique_id, n.title, n.subtitle, n.editorial_lead, n.summary, left(n.content, %(cap)s::int),
       n.url, n.image_url, n.video_url, n.agency_key, coalesce(n.agency_name, a.name),
       n.category, n.tags, n.published_at, n.updated_datetime, n.content_hash, n.image_broken,
       n.version, n.removed_at IS NOT NULL, n.extracted_at,
       t1.code, t1.label, t2.code, t2.label, t3.code, t3.label, tm.code, tm.label,
       CASE WHEN n.embedding_dim = %(dim)s::int THEN n.content_embedding::text END
  FROM news n
  LEFT JOIN agencies a ON a.key = n.agency_key
  LEFT JOIN themes t1 ON t1.id = n.theme_l1_id
  LEFT JOIN themes t2 ON t2.id = n.theme_l2_id
  LEFT JOIN themes t3 ON t3.id = n.theme_l3_id
  LEFT JOIN themes tm ON tm.id = n.most_specific_theme_id
 WHERE n.unique_id = ANY(%(ids)s::text[])
"""


def _epoch(ts: datetime | None) -> int | None:
    if ts is None:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    return int(ts.timestamp())


class _RawVector(str):
    """An embedding still in PostgreSQL's text form ``{0.1,-0.25,...}``. :func:`sync` splices
    it into the JSONL it sends (PostgreSQL prints float4 with the shortest exact digits, valid
    JSON numbers), skipping a float parse + print of every component: on 512-d vectors that is
    most of the client-side serialisation cost."""

    def as_list(self) -> list[float]:
        return json.loads("[" + self[1:-1] + "]")


def _row_to_document(row: Sequence[Any], raw_vector: bool = False) -> dict:
    (uid, title, subtitle, lead, summary, content, url, image, video, agency, agency_name,
     category, tags, published, updated, content_hash, image_broken, version, _removed, extracted,
     l1c, l1l, l2c, l2l, l3c, l3l, msc, msl, embedding) = row
    # production's calendar facets: year and month of published_at and its ISO week as YYYYWW,
    # all on the UTC calendar (an article published at 22:00 on 31/12 in Brasília counts in January)
    utc = published.astimezone(timezone.utc) if published.tzinfo else published
    iso_year, iso_week, _ = utc.isocalendar()
    doc: dict[str, Any] = {
        "id": uid,
        "unique_id": uid,
        "title": title,
        "subtitle": subtitle,
        "editorial_lead": lead,
        "summary": summary,
        "content": content,
        "url": url,
        "image": image,
        "video_url": video,
        "agency": agency,
        "agency_name": agency_name,
        "category": category,
        "tags": list(tags or []),
        "published_at": _epoch(published),
        "updated_at": _epoch(updated),
        "extracted_at": _epoch(extracted),
        "published_year": utc.year,
        "published_month": utc.month,
        "published_week": iso_year * 100 + iso_week,
        "has_image": bool(image),
        "has_video": bool(video),
        # group_by content_hash hides republished duplicates; Typesense puts every document
        # WITHOUT the field into one group, so a row with no hash gets a key of its own.
        "content_hash": content_hash or f"id:{uid}",
        "image_broken": bool(image_broken),
        "version": int(version),
        "theme_1_level_1_code": l1c, "theme_1_level_1_label": l1l,
        "theme_1_level_2_code": l2c, "theme_1_level_2_label": l2l,
        "theme_1_level_3_code": l3c, "theme_1_level_3_label": l3l,
        "most_specific_theme_code": msc, "most_specific_theme_label": msl,
    }
    if embedding is not None:
        # real[] read as PostgreSQL's text ("{0.1,-0.25}", shortest exact float4 digits): the JSON
        # sent to Typesense keeps the stored precision (a binary float4 widened to a Python float
        # would print 17 digits: ~50% more payload)
        vec = _RawVector(embedding)
        doc["content_embedding"] = vec if raw_vector else vec.as_list()
    # optional fields: omit rather than send null
    return {k: v for k, v in doc.items() if v is not None}


def fetch_documents(conn, unique_ids: Iterable[str], dim: int | None = None) -> Documents:
    """Build the Typesense documents of ``unique_ids`` whole from PostgreSQL.

    ``content_embedding`` (a list of floats) is included only when the row's ``embedding_dim``
    equals ``dim`` (the collection's dimension; ``None`` = never). Removed articles go to
    ``to_delete``, unknown ids to ``missing``; both map to ``None``."""
    return _fetch(conn, unique_ids, dim, raw_vectors=False)


def _fetch(conn, unique_ids: Iterable[str], dim: int | None, raw_vectors: bool) -> Documents:
    ids = list(dict.fromkeys(unique_ids))
    out = Documents()
    if not ids:
        return out
    # binary protocol: faster decoding (the embedding comes as text, see _row_to_document)
    with conn.transaction(), conn.cursor(binary=True) as cur:
        cur.execute(_SELECT, {"ids": ids, "dim": dim if dim is not None else -1, "cap": CONTENT_CAP})
        rows = cur.fetchall()
    found = set()
    for row in rows:
        uid, version, removed = row[0], int(row[17]), row[18]
        found.add(uid)
        out.versions[uid] = version
        if removed:
            out.to_delete.append(uid)
        else:
            out.docs[uid] = _row_to_document(row, raw_vectors)
    out.missing = [i for i in ids if i not in found]
    return out


# --------------------------------------------------------------------------- sync


@dataclass
class SyncResult:
    indexed: list[str] = field(default_factory=list)       # upserted (success true)
    deleted: list[str] = field(default_factory=list)       # removed articles, gone from the index
    failed: dict[str, str] = field(default_factory=dict)   # id -> error (per-document)
    missing: list[str] = field(default_factory=list)       # ids not in PostgreSQL
    stale: list[str] = field(default_factory=list)         # done, but the row changed meanwhile
    marked: int = 0                                        # rows marked in PostgreSQL
    versions: dict[str, int] = field(default_factory=dict) # version written, indexed + deleted


def _transient_errors() -> tuple[type[BaseException], ...]:
    import typesense.exceptions as tse

    errors: list[type[BaseException]] = [tse.ServiceUnavailable, tse.Timeout, tse.HTTPStatus0Error]
    try:
        import httpx

        errors += [httpx.TimeoutException, httpx.ConnectError, httpx.RemoteProtocolError]
    except ImportError:  # pragma: no cover
        pass
    try:
        import requests

        errors += [requests.exceptions.Timeout, requests.exceptions.ConnectionError]
    except ImportError:
        pass
    return tuple(errors)


def _backoff(attempt: int, base: float = 0.5, cap: float = 30.0) -> float:
    """Exponential backoff with jitter: 0.5, 1, 2, 4 ... s (capped), each scaled by U(0.5, 1)."""
    return min(cap, base * (2 ** attempt)) * random.uniform(0.5, 1.0)


def _call_with_retry(fn: Callable[[], Any], what: str, max_retries: int, sleep: Callable) -> Any:
    transient = _transient_errors()
    for attempt in range(max_retries + 1):
        try:
            return fn()
        except transient as exc:
            if attempt >= max_retries:
                raise IndexUnavailable(
                    f"typesense {what}: still unavailable after {max_retries} retries: "
                    f"{type(exc).__name__}: {exc}") from exc
            sleep(_backoff(attempt))
    raise AssertionError("unreachable")  # pragma: no cover


def _jsonl_line(doc: dict) -> str:
    vec = doc.get("content_embedding")
    if not isinstance(vec, _RawVector):
        return json.dumps(doc, ensure_ascii=False)
    rest = json.dumps({k: v for k, v in doc.items() if k != "content_embedding"}, ensure_ascii=False)
    return f'{rest[:-1]},"content_embedding":[{vec[1:-1]}]}}'


def _import_batch(documents, docs: list[dict], max_retries: int, sleep: Callable,
                  result: SyncResult) -> list[str]:
    """Upsert ``docs`` (sent as one JSONL body); check every per-document line. Lines failing
    with 503/429 are retried (bounded); other failures are permanent and go to
    ``result.failed``. Returns the ids that succeeded."""
    ok: list[str] = []
    pending = [(doc["id"], _jsonl_line(doc)) for doc in docs]
    for attempt in range(max_retries + 1):
        body = "\n".join(line for _, line in pending)
        lines = _call_with_retry(lambda: documents.import_(body, {"action": "upsert"}),
                                 "import", max_retries, sleep)
        if isinstance(lines, (str, bytes)):  # the raw JSONL answer, one line per document
            text = lines.decode() if isinstance(lines, bytes) else lines
            lines = [json.loads(x) for x in text.splitlines() if x.strip()]
        if len(lines) != len(pending):
            raise RuntimeError(f"typesense import: {len(lines)} result lines for {len(pending)} documents")
        retry = []
        for item, line in zip(pending, lines):
            if line.get("success") is True:
                ok.append(item[0])
            elif line.get("code") in (429, 503) and attempt < max_retries:
                retry.append(item)
            else:
                result.failed[item[0]] = str(line.get("error") or line)
        if not retry:
            break
        pending = retry
        sleep(_backoff(attempt))
    return ok


def _delete(documents, uid: str, max_retries: int, sleep: Callable) -> None:
    import typesense.exceptions as tse

    def go():
        try:
            documents[uid].delete()
        except tse.ObjectNotFound:
            pass  # not in the index: already the state we want

    _call_with_retry(go, f"delete {uid}", max_retries, sleep)


_MARK = """
UPDATE news AS n
   SET indexed_at = CASE WHEN v.present THEN now() END,
       indexed_version = v.version
  FROM unnest(%s::text[], %s::int[], %s::bool[]) AS v(unique_id, version, present)
 WHERE n.unique_id = v.unique_id AND n.version = v.version
RETURNING n.unique_id
"""


def _mark(conn, versions: dict[str, int], present: dict[str, bool]) -> set[str]:
    """One statement: indexed_at = now() (NULL for removed articles, which are not in the index),
    indexed_version = the version that was read, only where the row is still at that version."""
    if not versions:
        return set()
    ids = list(versions)
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(_MARK, (ids, [versions[i] for i in ids], [present[i] for i in ids]))
        return {r[0] for r in cur.fetchall()}


def sync(ts, alias: str, conn, unique_ids: Iterable[str], dim: int | None, *,
         batch_size: int = 100, max_retries: int = 5, sleep: Callable[[float], None] = time.sleep
         ) -> SyncResult:
    """Bring the index entries of ``unique_ids`` in line with PostgreSQL.

    Non-removed articles are upserted whole in batches of ``batch_size`` into ``alias`` (an
    alias or a collection name); every per-document import result is checked, failures land in
    ``failed`` (id -> error) and are not marked. Removed articles are deleted (404 = fine).
    Backpressure (503, timeouts, connection errors) is retried with exponential backoff +
    jitter, at most ``max_retries`` times per call; after that :class:`IndexUnavailable` is
    raised, carrying the partial result whose successes are already recorded.

    Successes are recorded in ONE UPDATE, committed here (see the module docstring):
    ``indexed_at = now(), indexed_version = <version read>`` where the row is still at that
    version; rows that changed meanwhile are reported in ``stale`` and stay pending.
    """
    ids = list(dict.fromkeys(unique_ids))
    result = SyncResult()
    documents = ts.collections[alias].documents
    done_versions: dict[str, int] = {}
    present: dict[str, bool] = {}
    size = max(1, batch_size)
    chunks = [ids[i:i + size] for i in range(0, len(ids), size)]
    error: BaseException | None = None
    # pipelined: batch k+1 is read from PostgreSQL while batch k is imported (the import waits
    # on Typesense, releasing the GIL); the connection is never used by two threads at once.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dgb-index-fetch") as pool:
        nxt = pool.submit(_fetch, conn, chunks[0], dim, True) if chunks else None
        try:
            for k in range(len(chunks)):
                found = nxt.result()
                nxt = pool.submit(_fetch, conn, chunks[k + 1], dim, True) if k + 1 < len(chunks) else None
                result.missing.extend(found.missing)
                if found.docs:
                    ok = _import_batch(documents, list(found.docs.values()), max_retries, sleep, result)
                    for uid in ok:
                        result.indexed.append(uid)
                        done_versions[uid], present[uid] = found.versions[uid], True
                for uid in found.to_delete:
                    _delete(documents, uid, max_retries, sleep)
                    result.deleted.append(uid)
                    done_versions[uid], present[uid] = found.versions[uid], False
        except Exception as exc:  # noqa: BLE001 - record what succeeded first, then re-raise
            error = exc
        finally:
            if nxt is not None:   # let a pending read finish before the connection is reused
                nxt.cancel() or nxt.exception()
    result.versions = done_versions
    try:
        marked = _mark(conn, done_versions, present)
    except Exception:
        if error is None:
            raise
        marked = set()  # the original error matters more; the marks are redone on retry
    result.marked = len(marked)
    result.stale = [uid for uid in done_versions if uid not in marked]
    if error is not None:
        if isinstance(error, IndexUnavailable):
            error.result = result
        raise error
    return result


# --------------------------------------------------------------------------- rebuild


def _alias_target(ts, alias: str) -> str | None:
    import typesense.exceptions as tse

    try:
        return ts.aliases[alias].retrieve()["collection_name"]
    except tse.ObjectNotFound:
        return None


def _collection_exists(ts, name: str) -> bool:
    import typesense.exceptions as tse

    try:
        ts.collections[name].retrieve()
        return True
    except tse.ObjectNotFound:
        return False


def _index_ids(ts, collection: str) -> set[str]:
    raw = ts.collections[collection].documents.export({"include_fields": "id"})
    return {json.loads(line)["id"] for line in raw.splitlines() if line.strip()}


def _live_ids(conn, batch: int) -> Iterator[list[str]]:
    """Non-removed article ids in keyset-paginated batches."""
    last = 0
    while True:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SELECT id, unique_id FROM news WHERE removed_at IS NULL AND id > %s"
                        " ORDER BY id LIMIT %s", (last, batch))
            rows = cur.fetchall()
        if not rows:
            return
        last = rows[-1][0]
        yield [r[1] for r in rows]


def rebuild(ts, settings, conn, *, batch_size: int = 500, max_retries: int = 5,
            max_failed_ratio: float = 0.01, sleep: Callable[[float], None] = time.sleep) -> dict:
    """Build the collection of the current schema from PostgreSQL and point the alias at it.

    * alias on an older schema (or missing): the new versioned collection is (re)created empty
      (a half-built leftover is dropped: it is not live), every non-removed article is imported,
      the alias is swapped atomically (``aliases.upsert``), the old collection dropped, then the
      articles whose version changed (or that were added/removed) while building are synced
      again through the alias (catch-up: the live index stage kept writing to the old one);
    * alias already on the current schema: refreshed in place (every article upserted,
      documents of removed or vanished articles deleted).

    When more than ``max_failed_ratio`` of the documents fail, the alias is NOT swapped and
    RuntimeError is raised (the old index stays live). Idempotent; returns counts.
    """
    alias = settings.typesense_collection
    dim = settings.embedding_dim
    from dgb.search import schema as schema_mod

    spec = schema_mod.collection_schema(dim, alias)
    new = spec["name"]
    old = _alias_target(ts, alias)
    mode = "refresh" if old == new else "swap"
    if mode == "swap":
        if _collection_exists(ts, new):
            ts.collections[new].delete()
        ts.collections.create(spec)
    counts: dict[str, Any] = {"mode": mode, "collection": new, "previous": old, "indexed": 0,
                              "failed": 0, "deleted": 0, "stale": 0, "caught_up": 0, "dropped": None}
    failed: dict[str, str] = {}
    written: dict[str, int] = {}
    for ids in _live_ids(conn, batch_size):
        res = sync(ts, new, conn, ids, dim, batch_size=batch_size, max_retries=max_retries, sleep=sleep)
        counts["indexed"] += len(res.indexed)
        counts["stale"] += len(res.stale)
        failed.update(res.failed)
        written.update(res.versions)
    total = counts["indexed"] + len(failed)
    if mode == "swap" and total and len(failed) / total > max_failed_ratio:
        raise RuntimeError(
            f"rebuild of {new}: {len(failed)} of {total} documents failed (e.g. "
            f"{next(iter(failed.items()))}); alias {alias} left on {old}")
    if mode == "refresh":
        extra = sorted(_index_ids(ts, new) - set(written))
        res = sync(ts, new, conn, extra, dim, batch_size=batch_size, max_retries=max_retries, sleep=sleep)
        documents = ts.collections[new].documents
        for uid in res.missing:  # no longer in PostgreSQL at all
            _delete(documents, uid, max_retries, sleep)
        counts["deleted"] = len(res.deleted) + len(res.missing)
        failed.update(res.failed)
    else:
        ts.aliases.upsert(alias, {"collection_name": new})
        if old and _collection_exists(ts, old):
            ts.collections[old].delete()
            counts["dropped"] = old
        # catch up with what changed while we were building
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SELECT unique_id, version, removed_at IS NOT NULL FROM news")
            rows = cur.fetchall()
        touched = [uid for uid, version, removed in rows
                   if (uid in written and (written[uid] != version or removed))
                   or (uid not in written and not removed and uid not in failed)]
        if touched:
            res = sync(ts, alias, conn, touched, dim, batch_size=batch_size,
                       max_retries=max_retries, sleep=sleep)
            counts["caught_up"] = len(res.indexed) + len(res.deleted)
            failed.update(res.failed)
    counts["failed"] = len(failed)
    counts["failures"] = dict(list(failed.items())[:20])
    return counts


# --------------------------------------------------------------------------- search


@dataclass
class Hit:
    unique_id: str
    title: str
    agency: str
    theme: str | None   # most specific theme: "<code> <label>"
    score: float   # keyword: text_match (int); vector: 1 - vector_distance; hybrid: RRF score


def _theme(doc: dict) -> str | None:
    code, label = doc.get("most_specific_theme_code"), doc.get("most_specific_theme_label")
    if code and label:
        return f"{code} {label}"
    return code or label or None


def _hits(result: dict) -> list[dict]:
    if "grouped_hits" in result:
        return [g["hits"][0] for g in result["grouped_hits"] if g.get("hits")]
    return list(result.get("hits") or [])


def _to_hit(h: dict, score: float) -> Hit:
    d = h["document"]
    return Hit(unique_id=d.get("unique_id") or d["id"], title=d.get("title", ""),
               agency=d.get("agency", ""), theme=_theme(d), score=score)


def _vector_literal(vec: Sequence[float]) -> str:
    return ",".join(f"{float(x):.7g}" for x in vec)


def _multi_search(ts, alias: str, searches: list[dict]) -> list[dict]:
    import typesense.exceptions as tse

    try:
        resp = ts.multi_search.perform({"searches": searches})
    except tse.TypesenseClientError as exc:
        raise SearchError(f"typesense: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:  # httpx / requests connection errors
        if isinstance(exc, _transient_errors()):
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
    except Exception:  # noqa: BLE001 - an unknown version just means "use the portable path"
        version = (0,)
    try:
        ts._dgb_server_version = version
    except AttributeError:  # pragma: no cover - a client that refuses attributes: ask each time
        pass
    return version


#: First Typesense version with native hybrid search (keyword + vector fused by the server).
NATIVE_HYBRID = (0, 25)


def search(ts, alias: str, query: str, *, semantic: bool = False, embedder=None,
           limit: int = 10) -> list[Hit]:
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
    common = {"collection": alias, "group_by": "content_hash", "group_limit": 1,
              "include_fields": _RESULT_FIELDS}
    keyword = {**common, "q": query, "query_by": QUERY_BY, "query_by_weights": QUERY_BY_WEIGHTS}
    if not semantic:
        res = _multi_search(ts, alias, [{**keyword, "per_page": limit}])[0]
        return [_to_hit(h, int(h.get("text_match", 0))) for h in _hits(res)][:limit]

    if embedder is None:
        raise ValueError("semantic search needs an embedder")
    vec = embedder.encode([query])[0]
    if server_version(ts) >= NATIVE_HYBRID:
        # the server fuses keyword and vector ranks itself (alpha = weight of the vector side)
        hybrid = {**keyword, "per_page": limit, "drop_tokens_threshold": 0,
                  "vector_query": f"content_embedding:([{_vector_literal(vec)}], alpha: {HYBRID_ALPHA})"}
        res = _multi_search(ts, alias, [hybrid])[0]
        return [_to_hit(h, float((h.get("hybrid_search_info") or {}).get("rank_fusion_score", 0.0)))
                for h in _hits(res)][:limit]
    depth = min(250, max(limit * 3, 20))   # candidates per list for the fusion
    vector = {**common, "q": "*", "per_page": depth,
              "vector_query": f"content_embedding:([{_vector_literal(vec)}], k: {depth})"}
    kw_res, vec_res = _multi_search(ts, alias, [{**keyword, "per_page": depth, "drop_tokens_threshold": 0},
                                                vector])
    kw_hits, vec_hits = _hits(kw_res), _hits(vec_res)
    if not kw_hits:
        return [_to_hit(h, 1.0 - float(h.get("vector_distance", 1.0))) for h in vec_hits][:limit]

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
        out.append(_to_hit(h, fused[uid]))
        if len(out) >= limit:
            break
    return out
