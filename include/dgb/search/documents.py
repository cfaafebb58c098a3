"""Index documents: each article's Typesense document, built WHOLE from PostgreSQL.

Upsert replaces a document, so a partial document would erase fields: :func:`fetch_documents`
reads every field (theme labels joined in) of each requested article. Removed articles and
unknown ids map to ``None`` (= must not be in the index). :func:`jsonl_line` writes a document as
a line of the import body.

The read runs inside a ``conn.transaction()`` block (its own transaction on an idle connection, a
savepoint inside the caller's); see :mod:`dgb.search.sync` for the writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dgb.features.fields import document_fields

CONTENT_CAP = 20_000


@dataclass
class Documents(Mapping):
    """What :func:`fetch_documents` found. Also a read-only mapping ``unique_id -> doc | None``
    over every requested id (``None`` = removed or unknown: must not be in the index)."""

    docs: dict[str, dict] = field(default_factory=dict)  # to upsert, built whole
    to_delete: list[str] = field(default_factory=list)  # removed articles (removed_at set)
    missing: list[str] = field(default_factory=list)  # not in PostgreSQL at all
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
       CASE WHEN n.embedding_dim = %(dim)s::int THEN n.content_embedding::text END,
       nf.features
  FROM news n
  LEFT JOIN news_features nf ON nf.unique_id = n.unique_id
  LEFT JOIN agencies a ON a.key = n.agency_key
  LEFT JOIN themes t1 ON t1.id = n.theme_l1_id
  LEFT JOIN themes t2 ON t2.id = n.theme_l2_id
  LEFT JOIN themes t3 ON t3.id = n.theme_l3_id
  LEFT JOIN themes tm ON tm.id = n.most_specific_theme_id
 WHERE n.unique_id = ANY(%(ids)s::text[])
"""


def _epoch(ts: datetime | None) -> int | None:
    """Unix seconds rounded to the nearest second, half away from zero: what production's
    ``EXTRACT(EPOCH FROM ...)::bigint`` gives for the same timestamp."""
    if ts is None:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    delta = ts - datetime(1970, 1, 1, tzinfo=UTC)
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    seconds, rest = divmod(abs(micros), 1_000_000)
    seconds += rest >= 500_000
    return seconds if micros >= 0 else -seconds


class _RawVector(str):
    """An embedding still in PostgreSQL's text form ``{0.1,-0.25,...}``. :func:`jsonl_line` splices
    it into the JSONL it sends (PostgreSQL prints float4 with the shortest exact digits, valid
    JSON numbers), skipping a float parse + print of every component: on 512-d vectors that is
    most of the client-side serialisation cost."""

    def as_list(self) -> list[float]:
        return json.loads("[" + self[1:-1] + "]")


def engagement_fields(features: dict | None) -> dict[str, Any]:
    """The figures the engagement jobs keep in ``news_features`` (:mod:`dgb.engagement`), as
    index fields: a whole upsert carries the current ``trending_score`` and ``view_count``."""
    f = features or {}
    out: dict[str, Any] = {}
    if f.get("trending_score") is not None:
        out["trending_score"] = float(f["trending_score"])
    if f.get("view_count") is not None:
        out["view_count"] = int(f["view_count"])
    return out


def _row_to_document(row: Sequence[Any], raw_vector: bool = False) -> dict:
    (
        uid,
        title,
        subtitle,
        lead,
        summary,
        content,
        url,
        image,
        video,
        agency,
        agency_name,
        category,
        tags,
        published,
        updated,
        content_hash,
        image_broken,
        version,
        _removed,
        extracted,
        l1c,
        l1l,
        l2c,
        l2l,
        l3c,
        l3l,
        msc,
        msl,
        embedding,
        features,
    ) = row
    # production's calendar facets: year and month of published_at and its ISO week as YYYYWW,
    # all on the UTC calendar (an article published at 22:00 on 31/12 in Brasília counts in January)
    utc = published.astimezone(UTC) if published.tzinfo else published
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
        "theme_1_level_1_code": l1c,
        "theme_1_level_1_label": l1l,
        "theme_1_level_2_code": l2c,
        "theme_1_level_2_label": l2l,
        "theme_1_level_3_code": l3c,
        "theme_1_level_3_label": l3l,
        "most_specific_theme_code": msc,
        "most_specific_theme_label": msl,
        **engagement_fields(features),
        **document_fields(features),
    }
    if embedding is not None:
        # real[] read as PostgreSQL's text ("{0.1,-0.25}", shortest exact float4 digits): the JSON
        # sent to Typesense keeps the stored precision (a binary float4 widened to a Python float
        # would print 17 digits: ~50% more payload)
        vec = _RawVector(embedding)
        doc["content_embedding"] = vec if raw_vector else vec.as_list()
    # optional fields: omit rather than send null
    return {k: v for k, v in doc.items() if v is not None}


def fetch_documents(
    conn, unique_ids: Iterable[str], dim: int | None = None, *, raw_vectors: bool = False
) -> Documents:
    """Build the Typesense documents of ``unique_ids`` whole from PostgreSQL.

    ``content_embedding`` (a list of floats) is included only when the row's ``embedding_dim``
    equals ``dim`` (the collection's dimension; ``None`` = never). Removed articles go to
    ``to_delete``, unknown ids to ``missing``; both map to ``None``. ``raw_vectors``: keep each
    embedding in PostgreSQL's text form, for :func:`jsonl_line` (what :func:`dgb.search.sync.sync`
    sends)."""
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


def jsonl_line(doc: dict) -> str:
    """One document as a JSON line of an import body (a raw embedding spliced in as it is)."""
    vec = doc.get("content_embedding")
    if not isinstance(vec, _RawVector):
        return json.dumps(doc, ensure_ascii=False)
    rest = json.dumps({k: v for k, v in doc.items() if k != "content_embedding"}, ensure_ascii=False)
    return f'{rest[:-1]},"content_embedding":[{vec[1:-1]}]}}'
