"""The site's ground truth: an append-only journal of every article it published, edited, moved or
removed, kept outside the pipeline for an independent checker (:mod:`dgb_dev.chaos.oracle`).

Each entry is a small dict::

    {"seq": 7, "event": "edit", "at": "2026-12-04T13:20:01+00:00", "agency": "mec",
     "slug": "enem-tem-recorde", "url": "/www.gov.br/mec/pt-br/assuntos/noticias/enem-tem-recorde",
     "title": "...", "hash": "3f0c...", "from_url": null}

* ``event``: ``publish`` (a new article: control publish, a held-back article the tick released,
  an extra file's new article), ``edit`` (title, text, subtitle or image changed), ``move`` (now at
  ``url``, its old address ``from_url`` is gone), ``remove`` (taken down), ``base`` (an article of
  the preloaded corpus, recorded only when the site was asked to: ``Site(journal_base=True)``) and
  ``reset`` (the site went back to its corpus: everything before no longer holds);
* ``url``: the article's address on the site without scheme and host of the mirror,
  ``/<original host>/<original path>`` (``Site.article_url("", a)``): the same for the mirror
  at any port and for the original ``https://www.gov.br/...`` address (:func:`url_key`);
* ``hash``: :func:`text_hash` of what a reader should see, the title and the text, normalised
  (:func:`reader_text`) so that a faithful copy (the pipeline's Markdown of the page) hashes the
  same; ``None`` for a removal.

Cost: only changes are recorded (a few hundred bytes each); the 300k-article base is not, unless
asked. Synthetic articles (:mod:`dgb_dev.mirror.synthetic`) are not journaled: their history is
computed from the corpus's arrays. Readers: ``Site.journal(since)`` in process, ``GET
/_control/journal?since=N`` (loopback only) for a site running in another process.
"""

from __future__ import annotations

import hashlib
import html
import re
import threading
import unicodedata
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlsplit

EVENTS = ("base", "publish", "edit", "move", "remove", "reset")

_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_NOT_WORD = re.compile(r"[\W_]+")


def reader_text(text: str | None) -> str:
    """What a reader reads in ``text``, for comparison: Markdown images dropped, links reduced to
    their text, entities decoded, Unicode NFC, lowercase, every run of punctuation, Markdown marks
    and whitespace one space. The site's Markdown-ish text and the pipeline's Markdown of the
    rendered page give the same string."""
    t = html.unescape(text or "")
    t = _IMAGE.sub(" ", t)
    t = _LINK.sub(r"\1", t)
    t = unicodedata.normalize("NFC", t).lower()
    return _NOT_WORD.sub(" ", t).strip()


def text_hash(title: str | None, content: str | None) -> str:
    """First 16 hex digits of sha256 over the normalised title and text."""
    raw = reader_text(title) + "\n" + reader_text(content)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]


def url_key(url: str) -> str:
    """``/<host>/<path>`` of an article address: the mirror's ``http://127.0.0.1:P/www.gov.br/x``
    and the original ``https://www.gov.br/x`` both give ``/www.gov.br/x`` (a path is kept as it
    is, without a trailing slash)."""
    parts = urlsplit(url or "")
    path = unquote(parts.path).rstrip("/")
    if not parts.netloc:
        return path
    host = parts.hostname or ""
    if host in ("127.0.0.1", "localhost", "::1") or host.startswith("127."):
        return path  # the mirror: the original host is the first path segment
    return f"/{host}{path}"


class Journal:
    """Thread-safe append-only list of entries (see the module doc)."""

    def __init__(self, clock: Any = None, url_of: Any = None) -> None:
        """``url_of(article)``: the article's site address (``Site.article_url("", a)``)."""
        self._clock = clock or (lambda: datetime.now(UTC))
        self._url_of = url_of or (lambda a: f"/{a.agency}/{a.slug}")
        self._lock = threading.Lock()
        self._entries: list[dict[str, Any]] = []

    def record(self, event: str, article: Any, *, from_url: str | None = None) -> dict:
        """Append one entry for ``article`` (a :class:`~dgb_dev.mirror.content.Article`, or None
        for ``reset``); ``from_url``: a moved article's old address."""
        if event not in EVENTS:
            raise ValueError(f"unknown journal event {event!r}; known: {EVENTS}")
        entry: dict[str, Any] = {
            "event": event,
            "at": self._clock().astimezone(UTC).isoformat(timespec="microseconds"),
            "agency": getattr(article, "agency", None),
            "slug": getattr(article, "slug", None),
            "url": self._url_of(article) if article is not None else "",
            "title": getattr(article, "title", None),
            "hash": None
            if article is None or event == "remove"
            else text_hash(article.title, article.content),
            "from_url": from_url,
        }
        with self._lock:
            entry["seq"] = len(self._entries)
            self._entries.append(entry)
        return entry

    def restart(self, base: Any) -> None:
        """The site went back to its corpus (``Site.reset``): a ``reset`` entry (none for the first
        load), then a ``base`` entry for each article of ``base``, oldest first (``base`` is empty
        unless the site journals its corpus)."""
        if len(self):
            self.record("reset", None)
        for a in sorted(base, key=lambda a: (a.published_at, a.agency, a.slug)):
            self.record("base", a)

    def entries(self, since: int = 0) -> list[dict[str, Any]]:
        """Copies of the entries with ``seq >= since`` (in order)."""
        with self._lock:
            return [dict(e) for e in self._entries[max(0, since) :]]

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def journal_extra_changes(old: dict, new: dict, base: dict, removed: dict) -> list[tuple[str, Any]]:
    """The entries a rescan of the extra folder makes (``Site.refresh_extra``): (event, article) for
    each (agency, slug) whose visible article changed. ``old``/``new``: the extra articles before and
    after; ``base``: the corpus's (an extra article shadows it; once its file goes, the corpus's
    shows again); ``removed``: keys taken down (nothing visible changes for them)."""
    out: list[tuple[str, Any]] = []
    for key in sorted(set(old) | set(new)):
        if key in removed:
            continue
        before, after = old.get(key) or base.get(key), new.get(key) or base.get(key)
        if before == after:
            continue
        if after is None:
            out.append(("remove", before))
        else:
            out.append(("publish" if before is None else "edit", after))
    return out
