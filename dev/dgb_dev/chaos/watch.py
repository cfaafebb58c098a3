"""What readers see during a chaos run, watched from outside the pipeline (scripts/bench_chaos.py).

* :class:`FirstSeen`: a reader polling the index every few seconds for the URLs it can find (the
  alias the portal reads, a cheap export of ``url`` only). The first time each URL shows up is
  that article's publication -> searchable, with the site's journal giving the publication time.
  It reads no pipeline table and no marker the pipeline wrote for itself.
* :class:`Recoveries`: each fault's recovery, by the oracle: from the fault's end until every
  article whose last change on the site came before that end reads right (present once, at its
  latest text, with a theme and a vector; removed ones gone). Articles the site changed after the
  end are left out: they are the next minutes' ordinary work, not the fault's.

Both poll; a poll that fails (Typesense is down: that is what the faults do) is counted and
retried at the next turn, never raised.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dgb_dev.chaos import oracle
from dgb_dev.mirror.journal import url_key


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


class FirstSeen(threading.Thread):
    """Polls ``alias`` every ``every_s`` seconds for documents published since ``since_epoch``
    (``published_at``, a day of margin for the site's time zone) and keeps the first time each
    URL (:func:`url_key`) was seen."""

    def __init__(self, ts, alias: str, since_epoch: float, every_s: float = 3.0):
        super().__init__(name="chaos-first-seen", daemon=True)
        self.ts, self.alias, self.every_s = ts, alias, every_s
        self.since = int(since_epoch - 86_400)
        self.first: dict[str, float] = {}
        self.polls = 0
        self.failed_polls = 0
        self._stop = threading.Event()

    def poll(self) -> int:
        """One look at the index; returns the URLs seen for the first time."""
        raw = self.ts.collections[self.alias].documents.export(
            {"include_fields": "url", "filter_by": f"published_at:>={self.since}"}
        )
        now = time.time()
        text = raw.decode() if isinstance(raw, bytes) else raw
        new = 0
        for line in text.splitlines():
            start = line.find('"url":"')
            if start < 0:
                continue
            end = line.find('"', start + 7)
            key = url_key(line[start + 7 : end])
            if key not in self.first:
                self.first[key] = now
                new += 1
        return new

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
                self.polls += 1
            except Exception:  # Typesense down or restarting: the next turn looks again
                self.failed_polls += 1
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self._stop.set()
        self.join(timeout=30)

    def freshness(self, entries: list[Mapping[str, Any]], since_epoch: float) -> dict[str, Any]:
        """Publication -> first seen of every article the journal says was published at or after
        ``since_epoch``; ``unseen``: published and never seen (judged by the oracle, not here)."""
        lags: list[float] = []
        unseen = 0
        for e in entries:
            if e["event"] != "publish":
                continue
            at = _epoch(e["at"])
            if at < since_epoch:
                continue
            seen = self.first.get(url_key(e["url"]))
            if seen is None:
                unseen += 1
            else:
                lags.append(max(0.0, seen - at))
        return {"lags": lags, "unseen": unseen, "resolution_s": self.every_s}


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
        """URL -> (the seq of its last journal entry, what a reader gets wrong), every category."""
        if self.agencies is not None:
            entries = [e for e in entries if e["event"] == "reset" or e["agency"] in self.agencies]
        truth = oracle.truth(entries)
        verdict = oracle.judge(truth, documents, self.dim)
        out: dict[str, tuple[int, str]] = {}
        for category in oracle.CATEGORIES:
            for url, why in getattr(verdict, category).items():
                if url in truth:
                    out[url] = (truth[url].seq, f"{category}: {why}")
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
