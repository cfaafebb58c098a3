"""What readers see during a chaos run, watched from outside the pipeline (scripts/bench_chaos.py).

* :class:`FirstSeen`: a reader polling the index every few seconds (the alias the portal reads).
  The first time each URL's document is complete, with a theme and a vector of the model's size,
  is that article's publication -> searchable, with the site's journal giving the publication
  time. A document can show up before its vector (the index stage writes the enriched article,
  then adds its vector once embedded), so both times are kept. A cheap export of the run's
  documents (``id``, ``url`` and the theme) finds them; only a document that has a theme and no
  complete sighting yet is read whole, for its vector. It reads no pipeline table and no marker
  the pipeline wrote for itself.
* :class:`Recoveries`: each fault's recovery, judged on the index the way the oracle judges it:
  from the fault's end until every article the site published before that end, and has not taken
  down, is there for readers once, complete (a theme, a vector of the model's size) and at a text
  the site has had for it. Edits and removals are left out of recovery: they reach readers through
  integrity's checks on their own schedule (an edit of a young article within its age band's
  target, a removal after a second check a quarter of an hour later), whatever the faults. The run's
  final verdict judges them, with everything else, at the latest text.

* :class:`FirstSeen` also keeps the last time each URL had a document, so a removal's (or a
  move's old address's) **-> hidden** is the first sighting without it (:meth:`FirstSeen.gone`);
  :class:`EditsSeen` reads the journal's edits as they come and the edited documents' texts, for
  each edit's **-> a reader gets its text**. Neither decides anything: they time what the final
  verdict judges (integrity's checks bring edits and removals to readers, on its own schedule).

All poll; a poll that fails (Typesense is down: that is what the faults do) is counted and
retried at the next turn, never raised.
"""

from __future__ import annotations

import bisect
import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dgb.search.documents import CONTENT_CAP
from dgb_dev.chaos import oracle
from dgb_dev.mirror.journal import reader_text, text_hash, url_key


def _text_of(doc: Mapping[str, Any]) -> str:
    """The journal's hash of a document's title and text; a text the index stage cut
    (``CONTENT_CAP``) is known by its title alone, as the oracle judges it."""
    if len(doc.get("content") or "") >= CONTENT_CAP:
        return "title:" + reader_text(doc.get("title"))
    return text_hash(doc.get("title"), doc.get("content"))


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


class FirstSeen(threading.Thread):
    """Polls ``alias`` every ``every_s`` seconds for documents published since ``since_epoch``
    (``published_at``, a day of margin for the site's time zone) and keeps, per URL
    (:func:`url_key`), the first time it was seen at all (``shown``) and the first time complete,
    with a theme and a vector of ``dim`` values (``first``)."""

    def __init__(self, ts, alias: str, since_epoch: float, dim: int, every_s: float = 3.0):
        super().__init__(name="chaos-first-seen", daemon=True)
        self.ts, self.alias, self.dim, self.every_s = ts, alias, dim, every_s
        self.since = int(since_epoch - 86_400)
        self.first: dict[str, float] = {}
        self.shown: dict[str, float] = {}
        self.ids: dict[str, str] = {}  # URL -> its document's id (as last seen)
        self.last_seen: dict[str, float] = {}  # URL -> the last poll that found a document for it
        self.ok_polls: list[float] = []  # times of the polls that answered
        self.polls = 0
        self.failed_polls = 0
        self._halt = threading.Event()

    def poll(self) -> int:
        """One look at the index; returns the URLs seen complete for the first time."""
        docs = self.ts.collections[self.alias].documents
        raw = docs.export(
            {
                "include_fields": "id,url,theme_1_level_1_code,most_specific_theme_code",
                "filter_by": f"published_at:>={self.since}",
            }
        )
        now = time.time()
        text = raw.decode() if isinstance(raw, bytes) else raw
        new = 0
        for line in text.splitlines():
            if not line.strip():
                continue
            doc = json.loads(line)
            key = url_key(doc.get("url") or "")
            self.ids[key], self.last_seen[key] = doc["id"], now
            if key in self.first:
                continue
            self.shown.setdefault(key, now)
            if not (doc.get("theme_1_level_1_code") or doc.get("most_specific_theme_code")):
                continue
            vector = docs[doc["id"]].retrieve().get("content_embedding") or []
            if len(vector) == self.dim:
                self.first[key] = now
                new += 1
        self.ok_polls.append(now)
        return new

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self.poll()
                self.polls += 1
            except Exception:  # Typesense down or restarting: the next turn looks again
                self.failed_polls += 1
            self._halt.wait(self.every_s)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=30)

    def freshness(self, entries: list[Mapping[str, Any]], since_epoch: float) -> dict[str, Any]:
        """Publication -> first seen complete of every article the journal says was published at or
        after ``since_epoch`` (``lags``; ``shown_lags``: -> first seen in any form); ``unseen``:
        published and never seen complete (judged by the oracle, not here); ``by_agency``: the
        ``lags`` of each agency the journal names (a scheduling bias between agencies shows there)."""
        lags: list[float] = []
        shown: list[float] = []
        by_agency: dict[str, list[float]] = {}
        unseen = 0
        for e in entries:
            if e["event"] != "publish":
                continue
            at = _epoch(e["at"])
            if at < since_epoch:
                continue
            key = url_key(e["url"])
            if key in self.shown:
                shown.append(max(0.0, self.shown[key] - at))
            seen = self.first.get(key)
            if seen is None:
                unseen += 1
            else:
                lags.append(max(0.0, seen - at))
                by_agency.setdefault(str(e.get("agency") or "?"), []).append(lags[-1])
        return {
            "lags": lags,
            "shown_lags": shown,
            "unseen": unseen,
            "resolution_s": self.every_s,
            "by_agency": dict(sorted(by_agency.items())),
        }

    def gone(
        self, entries: list[Mapping[str, Any]], since_epoch: float, event: str = "remove"
    ) -> dict[str, Any]:
        """Taken down -> hidden from readers, for every ``remove`` (``event="move"``: every move's
        old address) the journal has at or after ``since_epoch``: from the site's change to the
        first answered poll after the last one that still found a document there (``lags``);
        ``visible``: still found by the last poll; ``never_shown``: no poll ever found a document
        there (taken down before it was indexed). Resolution: one poll (``every_s``)."""
        polls = sorted(self.ok_polls)
        lags: list[float] = []
        visible = never = 0
        for e in entries:
            if e["event"] == "reset":
                lags, visible, never = [], 0, 0
                continue
            if e["event"] != event or _epoch(e["at"]) < since_epoch:
                continue
            url = e.get("from_url") if event == "move" else e["url"]
            if not url:
                continue
            last = self.last_seen.get(url_key(url))
            if last is None:
                never += 1
                continue
            i = bisect.bisect_right(polls, last)
            if i == len(polls):
                visible += 1
            else:
                lags.append(max(0.0, polls[i] - _epoch(e["at"])))
        return {"lags": lags, "visible": visible, "never_shown": never, "resolution_s": self.every_s}


_DOC_ID = re.compile(r"^[\w.-]+$")  # an id the export's filter takes as it is


class EditsSeen:
    """Edit -> a reader gets its text: reads the journal's new entries on each :meth:`check` (the
    bench's watch turn) and the documents of the articles with an edit not yet seen, by id (the
    ids :class:`FirstSeen` found). An edit is seen at the first check whose document has its text
    or a later one of the same address (a second edit before integrity read the first counts for
    both). An edit whose address is taken down or moved away first is ``superseded``. It reads
    nothing of the pipeline's."""

    def __init__(self, ts, alias: str, read: Callable[[int], list[dict]], agencies=None, batch: int = 100):
        self.ts, self.alias, self.read, self.batch = ts, alias, read, batch
        self.agencies = set(agencies) if agencies is not None else None
        self.next_seq = 0
        self.open: dict[str, list[tuple[int, float]]] = {}  # URL -> its edits not seen yet: (seq, at)
        self.texts: dict[str, dict[str, int]] = {}  # URL -> a text it had -> the last entry giving it
        self.lags: list[float] = []
        self.superseded = 0
        self.checks = 0
        self.failed_checks = 0

    def take(self, e: Mapping[str, Any]) -> None:
        """One journal entry, in ``seq`` order."""
        self.next_seq = max(self.next_seq, int(e["seq"]) + 1)
        event = e["event"]
        if event == "reset":
            self.open.clear()
            self.texts.clear()
            return
        if self.agencies is not None and e.get("agency") not in self.agencies:
            return
        key = url_key(e["url"])
        if event == "move" and e.get("from_url"):
            self.superseded += len(self.open.pop(url_key(e["from_url"]), []))
        if event == "remove":
            self.superseded += len(self.open.pop(key, []))
            return
        if e.get("hash"):
            texts = self.texts.setdefault(key, {})
            texts[e["hash"]] = texts["title:" + reader_text(e.get("title"))] = int(e["seq"])
        if event == "edit":
            self.open.setdefault(key, []).append((int(e["seq"]), _epoch(e["at"])))

    def seen(self, doc: Mapping[str, Any], now: float) -> int:
        """A document read at ``now``: closes its address's edits up to the entry whose text it
        has; returns how many."""
        key = url_key(doc.get("url") or "")
        upto = self.texts.get(key, {}).get(_text_of(doc))
        pending = self.open.get(key)
        if upto is None or not pending:
            return 0
        done = [(seq, at) for seq, at in pending if seq <= upto]
        for _seq, at in done:
            self.lags.append(max(0.0, now - at))
        rest = [p for p in pending if p[0] > upto]
        if rest:
            self.open[key] = rest
        else:
            del self.open[key]
        return len(done)

    def check(self, ids: Mapping[str, str], now: float | None = None) -> int:
        """Read the journal's new entries, then the documents of the open edits' addresses that
        ``ids`` knows; returns the edits seen in this check."""
        try:
            for e in sorted(self.read(self.next_seq), key=lambda e: e["seq"]):
                self.take(e)
            want = [ids[k] for k in list(self.open) if k in ids and _DOC_ID.match(ids[k])]
            docs = self.ts.collections[self.alias].documents
            found: list[dict] = []
            for i in range(0, len(want), self.batch):
                raw = docs.export(
                    {
                        "include_fields": "id,url,title,content",
                        "filter_by": "id:[" + ",".join(want[i : i + self.batch]) + "]",
                    }
                )
                text = raw.decode() if isinstance(raw, bytes) else raw
                found += [json.loads(line) for line in text.splitlines() if line.strip()]
        except Exception:  # the site or Typesense is down: the next turn looks again
            self.failed_checks += 1
            return 0
        self.checks += 1
        now = time.time() if now is None else now
        return sum(self.seen(doc, now) for doc in found)

    def figures(self) -> dict[str, Any]:
        return {
            "lags": self.lags,
            "open": sum(len(v) for v in self.open.values()),
            "superseded": self.superseded,
            "checks": self.checks,
            "failed_checks": self.failed_checks,
        }


@dataclass
class Pending:
    """A fault waiting for readers to see the truth again."""

    name: str  # the fault's name in the run's record
    ended_epoch: float
    seq: int  # the journal's length at the fault's end: entries before it are the truth to see
    recovery_s: float | None = None
    last_problems: dict[str, str] = field(default_factory=dict)


class Recoveries:
    """Recovery of each fault by the oracle (see the module doc). :meth:`check` does one oracle
    pass for all open faults at once."""

    def __init__(self, journal: Callable[[], list[dict]], ts, alias: str, dim: int, agencies=None):
        self.journal, self.ts, self.alias, self.dim = journal, ts, alias, dim
        self.agencies = set(agencies) if agencies is not None else None
        self.open: list[Pending] = []
        self.done: list[Pending] = []
        self.checks = 0
        self.failed_checks = 0

    def add(self, name: str, ended_epoch: float) -> Pending:
        p = Pending(name, ended_epoch, len(self.journal()))
        self.open.append(p)
        return p

    def problems(self, entries: list[dict], documents: list[dict]) -> dict[str, tuple[int, str]]:
        """URL -> (the seq of its publication, what a reader misses), for every live article the
        site published (see the module doc)."""
        if self.agencies is not None:
            entries = [e for e in entries if e["event"] == "reset" or e["agency"] in self.agencies]
        latest = oracle.truth(entries)
        published: dict[str, int] = {}
        texts: dict[str, set[str]] = {}
        for e in sorted(entries, key=lambda e: e["seq"]):
            if e["event"] == "reset":
                published.clear()
                texts.clear()
                continue
            key = url_key(e["url"])
            if e["event"] in ("base", "publish"):
                published.setdefault(key, e["seq"])
            if e.get("hash"):
                texts.setdefault(key, set()).update((e["hash"], "title:" + reader_text(e.get("title"))))
        by_url: dict[str, list[dict]] = {}
        for doc in documents:
            by_url.setdefault(url_key(doc.get("url") or ""), []).append(doc)
        out: dict[str, tuple[int, str]] = {}
        for key, seq in published.items():
            want = latest.get(key)
            if want is None or not want.live:
                continue  # taken down or moved away: integrity's schedule, not recovery
            docs = by_url.get(key, [])
            if not docs:
                why = "no document"
            elif len(docs) > 1:
                why = f"{len(docs)} documents"
            elif _text_of(docs[0]) not in texts.get(key, ()):
                why = "a text the site never had"
            elif not (docs[0].get("most_specific_theme_code") or docs[0].get("theme_1_level_1_code")):
                why = "no theme"
            elif len(docs[0].get("content_embedding") or []) != self.dim:
                why = "no vector of the model's size"
            else:
                continue
            out[key] = (seq, why)
        return out

    def check(self, now: float | None = None) -> list[Pending]:
        """One oracle pass; returns the faults that recovered in it."""
        if not self.open:
            return []
        try:
            entries = self.journal()
            documents = oracle.read_index(self.ts, self.alias)
        except Exception:  # the site or Typesense is down: not recovered yet
            self.failed_checks += 1
            return []
        self.checks += 1
        now = time.time() if now is None else now
        found = self.problems(entries, documents)
        recovered = []
        for p in list(self.open):
            mine = {u: why for u, (seq, why) in found.items() if seq < p.seq}
            if mine:
                p.last_problems = dict(sorted(mine.items())[:20])
                continue
            p.recovery_s = round(max(0.0, now - p.ended_epoch), 1)
            p.last_problems = {}
            self.open.remove(p)
            self.done.append(p)
            recovered.append(p)
        return recovered
