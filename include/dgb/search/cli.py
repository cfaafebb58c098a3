"""`dgb search` and `dgb search-rebuild`."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

HIT_KEYS = ("unique_id", "title", "agency", "theme", "score")  # the first --json keys (kept)
JSON_KEYS = (*HIT_KEYS, "rank", "relevance", "published_at")


def register(sub) -> None:
    p = sub.add_parser(
        "search",
        help="search the news index (keyword, semantic or hybrid)",
        description="Search the news index as the portal does and print the hits ranked: # (rank), "
        "relevance (0-1: keyword, the share of the query's words matched, weighted by the field they "
        "were found in, title highest; semantic, the cosine similarity; hybrid, the fusion score over "
        "the best possible), title, agency, theme, published date, unique_id. Republished duplicates "
        "(the same content hash) are shown once.",
    )
    p.add_argument("query", help="the search text")
    p.add_argument(
        "--semantic",
        action="store_true",
        help="also embed the query and search by vector (hybrid when keywords match too)",
    )
    p.add_argument("--limit", type=int, default=10, help="number of hits (default 10)")
    p.add_argument(
        "--json",
        action="store_true",
        help="print a JSON list of {unique_id, title, agency, theme, score, rank, relevance, published_at} "
        "(score: Typesense's own; relevance: 0-1; published_at: ISO 8601)",
    )
    p.set_defaults(func=_cmd_search)
    r = sub.add_parser(
        "search-rebuild",
        help="build the index collection of the current schema from PostgreSQL and swap the alias",
    )
    r.add_argument("--json", action="store_true", help="print the counts as JSON")
    r.set_defaults(func=_cmd_rebuild)


def _fail(msg: str) -> int:
    print(f"dgb search: {' '.join(str(msg).split())}", file=sys.stderr)
    return 2


def _cmd_search(args) -> int:
    from dgb.config import settings as current
    from dgb.search import query, schema

    if args.limit < 1:
        return _fail("--limit must be at least 1")
    settings = current()
    ts = schema.client(settings, timeout=5.0)
    embedder = None
    if args.semantic:
        from dgb.embed import get_embedder

        try:
            embedder = get_embedder(settings)
        except Exception as exc:
            return _fail(f"no embedder for --semantic: {type(exc).__name__}: {exc}")
    try:
        hits = query.search(
            ts,
            settings.typesense_collection,
            args.query,
            semantic=args.semantic,
            embedder=embedder,
            limit=args.limit,
        )
    except query.SearchError as exc:
        where = f"http://{settings.typesense_host}:{settings.typesense_port}"
        return _fail(f"{exc} ({where}, alias {settings.typesense_collection})")
    if args.json:
        out = []
        for rank, h in enumerate(hits, start=1):
            item = {k: asdict(h)[k] for k in HIT_KEYS}
            item.update(rank=rank, relevance=h.relevance, published_at=_iso(h.published_at))
            out.append(item)
        print(json.dumps(out, ensure_ascii=False))
        return 0
    if not hits:
        print("no hits")
        return 0
    rows = [
        (
            str(i),
            f"{h.relevance:.2f}",
            _clip(h.title, 60),
            h.agency,
            _clip(h.theme or "-", 40),
            (_iso(h.published_at) or "-")[:10],
            h.unique_id,
        )
        for i, h in enumerate(hits, start=1)
    ]
    head = ("#", "relevance", "title", "agency", "theme", "published", "unique_id")
    widths = [max(len(r[c]) for r in [head, *rows]) for c in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    return 0


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _iso(epoch: int | None) -> str | None:
    """An epoch (the index's ``published_at``) as ISO 8601 in UTC, or None."""
    if epoch is None:
        return None
    from datetime import UTC, datetime

    return datetime.fromtimestamp(int(epoch), UTC).isoformat()


def _cmd_rebuild(args) -> int:
    from dgb import db
    from dgb.config import settings as current
    from dgb.search import query, rebuild, schema, sync

    settings = current()
    ts = schema.client(settings, timeout=30.0)
    conn = db.connect(settings.pg_dsn())
    try:
        counts = rebuild.rebuild(ts, settings, conn)
    except (sync.IndexUnavailable, query.SearchError) as exc:
        print(f"dgb search-rebuild: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except Exception as exc:  # typesense client errors: one line
        import typesense.exceptions as tse

        if isinstance(exc, (tse.TypesenseClientError, *sync.transient_errors())):
            print(f"dgb search-rebuild: typesense: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        raise
    finally:
        conn.close()
    if args.json:
        print(json.dumps(counts, ensure_ascii=False, default=str))
    else:
        print(
            f"{counts['mode']}: alias {settings.typesense_collection} -> {counts['collection']}"
            f" (was {counts['previous']}); indexed {counts['indexed']}, failed {counts['failed']},"
            f" deleted {counts['deleted']}, caught up {counts['caught_up']}"
            + (f", dropped {counts['dropped']}" if counts["dropped"] else "")
        )
    return 0 if not counts["failed"] else 1
