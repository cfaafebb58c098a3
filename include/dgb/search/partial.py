"""Partial updates: a few fields of documents already in the index, other fields untouched.

The index stage writes each document WHOLE (:mod:`dgb.search.sync`). Figures that change without
the article changing (the trending score, the view count) are written by their own jobs with
:func:`update_fields`: one JSONL import per batch with ``action=update``, which on Typesense 0.24
(and later) merges the given fields into the stored document and fails, for that line only, when
the document is not in the index (then the article is not indexed yet, or removed: its next whole
upsert reads the figures from ``news_features``, see :mod:`dgb.search.documents`).

Every per-line result is checked (the endpoint answers HTTP 200 when lines fail); lines failing
with 429/503 are retried, as are whole calls failing with backpressure (503, timeouts), through
the same bounded backoff as the index sync.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dgb.search.sync import _backoff, _call_with_retry

#: The answer of ``action=update`` for a document the index does not hold.
_NOT_FOUND = 404


@dataclass
class PartialResult:
    updated: list[str] = field(default_factory=list)  # the fields are in the index now
    not_indexed: list[str] = field(default_factory=list)  # no such document (not indexed yet, removed)
    failed: dict[str, str] = field(default_factory=dict)  # id -> error (a rejected value, ...)

    def as_dict(self) -> dict[str, int]:
        return {
            "updated": len(self.updated),
            "not_indexed": len(self.not_indexed),
            "failed": len(self.failed),
        }


def _lines(answer: Any) -> list[dict]:
    if isinstance(answer, (str, bytes)):
        text = answer.decode() if isinstance(answer, bytes) else answer
        return [json.loads(x) for x in text.splitlines() if x.strip()]
    return list(answer)


def update_fields(
    ts,
    alias: str,
    updates: Mapping[str, Mapping[str, Any]] | Iterable[tuple[str, Mapping[str, Any]]],
    *,
    batch_size: int = 500,
    max_retries: int = 5,
    sleep: Callable[[float], None] = time.sleep,
) -> PartialResult:
    """Set ``{unique_id: {field: value}}`` on the documents of ``alias`` (an alias or a collection),
    in batches of ``batch_size`` lines, leaving every other field of each document as it is.

    Raises :class:`dgb.search.sync.IndexUnavailable` when Typesense stays unavailable after the
    bounded retries; per-document outcomes are in the returned :class:`PartialResult`."""
    items = list(updates.items() if isinstance(updates, Mapping) else updates)
    result = PartialResult()
    documents = ts.collections[alias].documents
    size = max(1, batch_size)
    for start in range(0, len(items), size):
        pending = [
            (uid, json.dumps({**dict(values), "id": uid}, ensure_ascii=False))
            for uid, values in items[start : start + size]
            if values
        ]
        for attempt in range(max_retries + 1):
            if not pending:
                break
            body = "\n".join(line for _, line in pending)
            answer = _call_with_retry(
                lambda body=body: documents.import_(body, {"action": "update"}),
                "partial update",
                max_retries,
                sleep,
            )
            lines = _lines(answer)
            if len(lines) != len(pending):
                raise RuntimeError(
                    f"typesense import: {len(lines)} result lines for {len(pending)} documents"
                )
            retry = []
            for item, line in zip(pending, lines):
                code = line.get("code")
                if line.get("success") is True:
                    result.updated.append(item[0])
                elif code == _NOT_FOUND:
                    result.not_indexed.append(item[0])
                elif code in (429, 503) and attempt < max_retries:
                    retry.append(item)
                else:
                    result.failed[item[0]] = str(line.get("error") or line)
            pending = retry
            if pending:
                sleep(_backoff(attempt))
    return result
