"""The oracle: what readers should see, from the site's journal, against what Typesense gives them.

It decides from two sources and nothing else:

* **the truth**: the local site's journal (:mod:`dgb_dev.mirror.journal`), read in process
  (``Site.journal()``) or over loopback HTTP (``GET <site>/_control/journal``). Folded per
  address: the last entry of each URL says whether the article is live (published, edited, moved
  there, or in the journaled corpus) and the hash of the title and text a reader should see, or
  that it is gone (removed, or moved away);
* **what a reader gets**: the index documents, read through the alias the portal reads, with a
  full export (the portal's queries filter the same documents by ``unique_id``; a scan sees every
  one, those of no known article included).

It reads nothing of the pipeline's: no PostgreSQL table, no ``indexed_version`` marker, no outbox.

The verdict, each category a mapping URL -> why:

* ``lost``: a live article with no document;
* ``duplicated``: a live article with more than one document (matched by URL); and, when an
  :class:`~dgb_dev.chaos.event_counter.EventCounter` is given, an article one of whose events was
  published more than once (the counter's own subscriptions; key: the URL of its document, else
  ``unique_id:<id>``);
* ``wrong``: a live article whose document is stale (its title + content do not hash to the site's
  latest; a document whose content the index stage cut at ``CONTENT_CAP`` is judged on its title
  alone and counted in ``capped``), has no theme, no vector or a vector of another dimension;
* ``removed_still_visible``: an article the site removed (or moved away from that URL) that still
  has a document.

Documents of URLs the journal never named are counted (``untracked``), not judged: a site that
does not journal its corpus (``Site(journal_base=False)``) leaves its base out of the truth.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dgb.search.documents import CONTENT_CAP
from dgb.search.schema import THEME_FIELDS
from dgb_dev.mirror.journal import reader_text, text_hash, url_key

#: The document fields the oracle reads (the export asks for these alone).
FIELDS = ("id", "unique_id", "url", "title", "content", *THEME_FIELDS, "content_embedding")
CATEGORIES = ("lost", "duplicated", "wrong", "removed_still_visible")


@dataclass(frozen=True)
class Expected:
    """What a reader should find at ``url``, by the journal's last entry for it."""

    url: str  # url_key form: /<host>/<path>
    live: bool
    hash: str | None  # text_hash of the latest title + text (live only)
    title: str | None
    event: str  # the entry that decided: base, publish, edit, move, remove
    seq: int


def truth(entries: Iterable[Mapping[str, Any]]) -> dict[str, Expected]:
    """Fold journal entries (in ``seq`` order) into URL -> :class:`Expected`. A ``reset`` forgets
    everything before it (the site went back to its corpus)."""
    out: dict[str, Expected] = {}
    for e in sorted(entries, key=lambda e: e["seq"]):
        event = e["event"]
        if event == "reset":
            out.clear()
            continue
        url = url_key(e["url"])
        if event == "move" and e.get("from_url"):
            old = url_key(e["from_url"])
            out[old] = Expected(old, False, None, e.get("title"), "move", e["seq"])
        if event == "remove":
            out[url] = Expected(url, False, None, e.get("title"), event, e["seq"])
        else:
            out[url] = Expected(url, True, e["hash"], e.get("title"), event, e["seq"])
    return out


@dataclass
class Verdict:
    """The oracle's findings (see the module doc); ``ok`` when every category is empty."""

    lost: dict[str, str] = field(default_factory=dict)
    duplicated: dict[str, str] = field(default_factory=dict)
    wrong: dict[str, str] = field(default_factory=dict)
    removed_still_visible: dict[str, str] = field(default_factory=dict)
    live: int = 0  # live articles by the journal
    removed: int = 0  # addresses that must not be in the index
    documents: int = 0  # documents read
    untracked: int = 0  # documents of URLs the journal never named (not judged)
    capped: int = 0  # live documents judged on their title only (content cut at CONTENT_CAP)
    events: int = 0  # distinct events the counter saw (0 without one)

    @property
    def ok(self) -> bool:
        return not any(getattr(self, c) for c in CATEGORIES)

    def counts(self) -> dict[str, int]:
        return {c: len(getattr(self, c)) for c in CATEGORIES}

    def summary(self) -> str:
        """One line: ``oracle: lost=0 duplicated=0 wrong=0 removed_still_visible=0 live=.. ...``."""
        parts = [f"{c}={n}" for c, n in self.counts().items()]
        parts += [f"{k}={getattr(self, k)}" for k in ("live", "removed", "documents", "untracked", "capped")]
        return "oracle: " + " ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {c: dict(sorted(getattr(self, c).items())) for c in CATEGORIES}
        out["counts"] = self.counts()
        for k in ("live", "removed", "documents", "untracked", "capped", "events"):
            out[k] = getattr(self, k)
        return out


_SITE_EVENT = re.compile(r"site(?::|'s) (\w+)")


def causes(verdict: Mapping[str, Any]) -> dict[str, int]:
    """How many findings of each category follow which last change on the site (``lost/move``,
    ``wrong/edit``, ``removed_still_visible/remove`` ...) or, for a problem that names none, which
    problem (``wrong/no theme``): a :meth:`Verdict.as_dict` (the run's JSON ``verdict``) in."""
    out: dict[str, int] = {}
    for category in CATEGORIES:
        for why in (verdict.get(category) or {}).values():
            found = _SITE_EVENT.search(why)
            key = f"{category}/{found.group(1) if found else why.split(';')[0].split(':')[0].strip()}"
            out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def _doc_problems(doc: Mapping[str, Any], want: Expected, dim: int) -> tuple[list[str], bool]:
    """(what is wrong with a live article's document, whether it was judged on its title only)."""
    problems: list[str] = []
    capped = False
    if text_hash(doc.get("title"), doc.get("content")) != want.hash:
        capped = len(doc.get("content") or "") >= CONTENT_CAP
        if not capped or reader_text(doc.get("title")) != reader_text(want.title):
            problems.append(f"stale content (site: {want.event} #{want.seq})")
            capped = False
    if not (doc.get("most_specific_theme_code") or doc.get("theme_1_level_1_code")):
        problems.append("no theme")
    vector = doc.get("content_embedding")
    if not vector:
        problems.append("no vector")
    elif len(vector) != dim:
        problems.append(f"vector of {len(vector)} dimensions, not {dim}")
    return problems, capped


def judge(
    expected: Mapping[str, Expected],
    documents: Iterable[Mapping[str, Any]],
    dim: int,
    duplicate_events: Mapping[str, list[str]] | None = None,
) -> Verdict:
    """The verdict of ``documents`` (index documents, at least :data:`FIELDS`) against the truth.

    ``duplicate_events``: ``unique_id`` -> descriptions of events of it published more than once
    (:meth:`~dgb_dev.chaos.event_counter.EventCounter.duplicates`)."""
    v = Verdict()
    by_url: dict[str, list[Mapping[str, Any]]] = {}
    url_of_id: dict[str, str] = {}
    for doc in documents:
        v.documents += 1
        key = url_key(doc.get("url") or "")
        by_url.setdefault(key, []).append(doc)
        url_of_id[doc.get("unique_id") or doc.get("id")] = key
    for url, want in sorted(expected.items()):
        docs = by_url.get(url, [])
        ids = ", ".join(sorted(str(d.get("id")) for d in docs))
        if not want.live:
            v.removed += 1
            if docs:
                v.removed_still_visible[url] = f"{len(docs)} document(s) after the site's {want.event}: {ids}"
            continue
        v.live += 1
        if not docs:
            v.lost[url] = f"no document (site: {want.event} #{want.seq})"
            continue
        if len(docs) > 1:
            v.duplicated[url] = f"{len(docs)} documents: {ids}"
        problems: list[str] = []
        for doc in docs:
            found, capped = _doc_problems(doc, want, dim)
            problems += [p for p in found if p not in problems]
            v.capped += capped
        if problems:
            v.wrong[url] = "; ".join(problems)
    v.untracked = sum(len(d) for u, d in by_url.items() if u not in expected)
    for uid, what in sorted((duplicate_events or {}).items()):
        key = url_of_id.get(uid, f"unique_id:{uid}")
        note = "events published more than once: " + ", ".join(what)
        v.duplicated[key] = f"{v.duplicated[key]}; {note}" if key in v.duplicated else note
    return v


# ------------------------------------------------------------------------------------ the sources


def read_journal(source: Any, timeout: float = 30.0, since: int = 0) -> list[dict[str, Any]]:
    """The journal of ``source`` from entry ``since`` on: a ``Site`` (in process), a site's base
    URL (``http://127.0.0.1:P``, loopback only: its control API) or the entries themselves."""
    if hasattr(source, "journal"):
        return source.journal(since)
    if isinstance(source, str):
        import httpx

        with httpx.Client(timeout=timeout) as client:
            resp = client.get(source.rstrip("/") + "/_control/journal", params={"since": since})
        if resp.status_code != 200:
            raise RuntimeError(f"journal of {source}: HTTP {resp.status_code}: {resp.text[:300]}")
        return resp.json()["entries"]
    return [e for e in source if e["seq"] >= since]


def read_index(ts, alias: str) -> list[dict[str, Any]]:
    """Every document of ``alias`` (the alias the portal reads), :data:`FIELDS` only: one export
    (the whole answer is held in memory: fine for thousands of documents; a run over the 300k base
    would page it by a ``filter_by`` range)."""
    raw = ts.collections[alias].documents.export({"include_fields": ",".join(FIELDS)})
    text = raw.decode() if isinstance(raw, bytes) else raw
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def find_by_unique_id(ts, alias: str, unique_id: str) -> list[dict[str, Any]]:
    """The documents the portal's article page finds for ``unique_id`` (``q=<id>``,
    ``query_by=unique_id``), as it asks."""
    res = ts.collections[alias].documents.search(
        {"q": unique_id, "query_by": "unique_id", "include_fields": ",".join(FIELDS), "per_page": 10}
    )
    return [h["document"] for h in res.get("hits") or [] if h["document"].get("unique_id") == unique_id]


def check(
    source: Any, ts, alias: str, dim: int, events: Any = None, agencies: Collection[str] | None = None
) -> Verdict:
    """The verdict now: the journal of ``source`` (see :func:`read_journal`) against every document
    of ``alias``; ``events``: an open :class:`~dgb_dev.chaos.event_counter.EventCounter`, drained
    first (its duplicates join ``duplicated``); ``agencies``: judge only these agencies' articles
    (a run that scrapes some of the site's agencies; ``reset`` entries always count)."""
    duplicates = None
    seen = 0
    if events is not None:
        events.drain()
        duplicates, seen = events.duplicates(), events.distinct
    entries = read_journal(source)
    if agencies is not None:
        entries = [e for e in entries if e["event"] == "reset" or e["agency"] in agencies]
    verdict = judge(truth(entries), read_index(ts, alias), dim, duplicates)
    verdict.events = seen
    return verdict


def main(argv: list[str] | None = None) -> int:
    """``python -m dgb_dev.chaos.oracle [--site URL] [--alias A] [--agencies k1,k2] [--json]``: the
    verdict of the running stack (its site, Typesense, alias and dimension from ``dgb.config``),
    the summary line last; exit status 1 when a category is not empty."""
    import argparse

    from dgb.config import Settings
    from dgb.search.schema import client

    s = Settings.from_env()
    parser = argparse.ArgumentParser(prog="python -m dgb_dev.chaos.oracle", description=main.__doc__)
    parser.add_argument("--site", default=s.mirror_url, help="the local site's base URL (its journal)")
    parser.add_argument("--alias", default=s.typesense_collection, help="the alias readers read")
    parser.add_argument("--agencies", default=None, help="judge only these agencies (comma-separated)")
    parser.add_argument("--json", action="store_true", help="print the whole verdict as JSON first")
    args = parser.parse_args(argv)
    agencies = [a for a in args.agencies.split(",") if a] if args.agencies else None
    verdict = check(args.site, client(s), args.alias, s.embedding_dim, agencies=agencies)
    if args.json:
        print(json.dumps(verdict.as_dict(), ensure_ascii=False, indent=1))
    print(verdict.summary())
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
