"""Index sync: bring the index entries of a set of articles in line with PostgreSQL.

:func:`sync` upserts whole documents (:mod:`dgb.search.documents`) in batches, checks EVERY
per-document result of the import endpoint (it answers HTTP 200 even when documents fail), retries
backpressure (503, timeouts) with exponential backoff + jitter, deletes removed articles, then
records ``indexed_at`` / ``indexed_version`` in ONE statement, only for rows still at the version it
read. No Airflow import: the index stage (DAG / TypesenseHook) passes a Typesense client and a
psycopg 3 connection in.

One writer at a time: a sync holds a PostgreSQL advisory lock (:data:`WRITER_LOCK`, on its
connection's session) from its first read to its marks. The version guard of the marks keeps
PostgreSQL right when two writers overlap, but not the index: Typesense keeps the LAST upsert, so a
writer that read an article before an edit (or before its vector) and imports after one that read
it since would leave the older document searchable while PostgreSQL counts the newer one as
indexed. Two writers happen: the index stage and reconciliation's repair or a rebuild, and a stage
task whose supervisor died (a scheduler killed with its workers: Airflow gives a task process its
own process group, so it outlives them) next to the run that replaces it. Seen in a chaos run:
an article searchable without its vector for 15 minutes. A writer waits at most
:data:`WRITER_LOCK_WAIT_S` for the lock, then fails with ``LockNotAvailable`` (a conflict: the
work stays pending, nothing is an outage).

Transactions: reads and writes of PostgreSQL run inside ``conn.transaction()`` blocks. On a
connection that is idle (no transaction open: the normal case for a task's connection) each block is
its own transaction, so the marks written by :func:`sync` are COMMITTED when it
returns; the caller need not commit. If the caller has a transaction open,
psycopg turns the blocks into savepoints and the caller's commit decides.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dgb.db import lock_articles
from dgb.search.documents import fetch_documents, jsonl_line

WRITER_LOCK = 0x64676269  # "dgbi": one writer of the index at a time (module doc)
WRITER_LOCK_WAIT_S = 30.0  # the longest a sync waits for it


class IndexUnavailable(RuntimeError):
    """Typesense stayed unavailable (503 / timeouts / unreachable) after the bounded retries.

    ``result`` is the partial :class:`SyncResult`; its successes were already recorded in
    PostgreSQL, so a retry of the whole call is safe (upserts are idempotent)."""

    def __init__(self, message: str, result: SyncResult | None = None):
        super().__init__(message)
        self.result = result


@dataclass
class SyncResult:
    indexed: list[str] = field(default_factory=list)  # upserted (success true)
    deleted: list[str] = field(default_factory=list)  # removed articles, gone from the index
    failed: dict[str, str] = field(default_factory=dict)  # id -> error (per-document)
    missing: list[str] = field(default_factory=list)  # ids not in PostgreSQL
    stale: list[str] = field(default_factory=list)  # done, but the row changed meanwhile
    marked: int = 0  # rows marked in PostgreSQL
    versions: dict[str, int] = field(default_factory=dict)  # version written, indexed + deleted


def transient_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that mean Typesense is unavailable for now (503, timeouts, unreachable)."""
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
    return min(cap, base * (2**attempt)) * random.uniform(0.5, 1.0)


def _call_with_retry(fn: Callable[[], Any], what: str, max_retries: int, sleep: Callable) -> Any:
    transient = transient_errors()
    for attempt in range(max_retries + 1):
        try:
            return fn()
        except transient as exc:
            if attempt >= max_retries:
                raise IndexUnavailable(
                    f"typesense {what}: still unavailable after {max_retries} retries: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            sleep(_backoff(attempt))
    raise AssertionError("unreachable")  # pragma: no cover


def _import_batch(
    documents, docs: list[dict], max_retries: int, sleep: Callable, result: SyncResult
) -> list[str]:
    """Upsert ``docs`` (sent as one JSONL body); check every per-document line. Lines failing
    with 503/429 are retried (bounded); other failures are permanent and go to
    ``result.failed``. Returns the ids that succeeded."""
    ok: list[str] = []
    pending = [(doc["id"], jsonl_line(doc)) for doc in docs]
    for attempt in range(max_retries + 1):
        body = "\n".join(line for _, line in pending)
        lines = _call_with_retry(
            lambda body=body: documents.import_(body, {"action": "upsert"}), "import", max_retries, sleep
        )
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


def delete_document(documents, uid: str, max_retries: int, sleep: Callable) -> None:
    """Delete ``uid`` from ``documents`` (a collection's documents); absent already = done."""
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
        lock_articles(cur, ids)  # the stages' one lock order (no deadlock with a stage's commit)
        cur.execute(_MARK, (ids, [versions[i] for i in ids], [present[i] for i in ids]))
        return {r[0] for r in cur.fetchall()}


@contextmanager
def one_writer(conn, wait_s: float = WRITER_LOCK_WAIT_S):
    """Hold :data:`WRITER_LOCK` on ``conn``'s session for the block (module doc); waits at most
    ``wait_s`` for it (``psycopg.errors.LockNotAvailable`` after that). A lost connection releases
    it with the session."""
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("SELECT set_config('lock_timeout', %s, true)", (f"{max(1, int(wait_s * 1000))}ms",))
        cur.execute("SELECT pg_advisory_lock(%s)", (WRITER_LOCK,))
    try:
        yield
    finally:
        try:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute("SELECT pg_advisory_unlock(%s)", (WRITER_LOCK,))
        except Exception:  # the connection is gone, and the lock with it; the sync's error matters
            pass


def sync(
    ts,
    alias: str,
    conn,
    unique_ids: Iterable[str],
    dim: int | None,
    *,
    batch_size: int = 100,
    max_retries: int = 5,
    sleep: Callable[[float], None] = time.sleep,
    lock_wait_s: float = WRITER_LOCK_WAIT_S,
) -> SyncResult:
    """Bring the index entries of ``unique_ids`` in line with PostgreSQL, as the one writer of the
    index meanwhile (:func:`one_writer`, waiting at most ``lock_wait_s``).

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
    if not ids:
        return SyncResult()
    with one_writer(conn, lock_wait_s):
        return _sync(ts, alias, conn, ids, dim, batch_size, max_retries, sleep)


def _sync(ts, alias, conn, ids: list[str], dim, batch_size, max_retries, sleep) -> SyncResult:
    """:func:`sync` inside its writer lock."""
    result = SyncResult()
    documents = ts.collections[alias].documents
    done_versions: dict[str, int] = {}
    present: dict[str, bool] = {}
    size = max(1, batch_size)
    chunks = [ids[i : i + size] for i in range(0, len(ids), size)]
    error: BaseException | None = None
    # pipelined: batch k+1 is read from PostgreSQL while batch k is imported (the import waits
    # on Typesense, releasing the GIL); the connection is never used by two threads at once.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dgb-index-fetch") as pool:

        def read(chunk: list[str]):
            return pool.submit(fetch_documents, conn, chunk, dim, raw_vectors=True)

        nxt = read(chunks[0]) if chunks else None
        try:
            for k in range(len(chunks)):
                found = nxt.result()
                nxt = read(chunks[k + 1]) if k + 1 < len(chunks) else None
                result.missing.extend(found.missing)
                if found.docs:
                    ok = _import_batch(documents, list(found.docs.values()), max_retries, sleep, result)
                    for uid in ok:
                        result.indexed.append(uid)
                        done_versions[uid], present[uid] = found.versions[uid], True
                for uid in found.to_delete:
                    delete_document(documents, uid, max_retries, sleep)
                    result.deleted.append(uid)
                    done_versions[uid], present[uid] = found.versions[uid], False
        except Exception as exc:
            error = exc
        finally:
            if nxt is not None:  # let a pending read finish before the connection is reused
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
