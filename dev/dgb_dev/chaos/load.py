"""The load of a chaos run (issue 39): the local gov.br site publishing, editing, moving and removing
real news at 10x production's rate, in bursts, while the pipeline is under faults.

* :class:`LoadPlan` (pure, seeded): every action with its offset in seconds from the start. New
  articles arrive as a compound Poisson process: bursts of several articles on one agency within a
  minute or two (the way a ministry's press office posts), bursts at uniformly random times, sizes
  ``1 + geometric`` (mean ``burst_mean``), the agency drawn by ``agencies``' weights
  (:func:`real_mix`: production's mix, estimated from real articles). The count is exact:
  ``round(rate_per_hour * minutes / 60)`` (default 5,000/h: production's ~500 a day in one hour).
  Of the run's articles, ~10% are edited (a quarter of those twice), ~2% removed, ~0.5% moved to a
  new address, each after its publication: delays mostly (85%) exponential with a 10-minute mean, the
  rest 1-6 h, squeezed into what is left of the run when they would fall after its end (dropped when
  less than ``MIN_GAP_S`` is left).
* :func:`~dgb_dev.chaos.realtext.load_texts`: real gov.br news (``<repo>/../shared/data/
  classifier-dev``, else the repo's corpus). Titles get a run tag and a counter (``"<real title>
  (<tag> n00042)"``) and slugs the same, so no two articles of any run collide (the pipeline's
  ``unique_id`` and ``content_hash`` hash the title) while the text stays real. An edit replaces a
  paragraph with, or appends, a real paragraph of another article; a third of edits also put
  another real title (same tag) in place.
* :class:`LoadDriver`: a thread that plays a plan against the site's loopback control API on time and
  records every call (see its docstring).

The site's control API is not touched by its injected faults (``/_control/`` is answered before
them), but a slow machine or a restarted site can still fail a call: the driver retries and records
what happened, and never double-publishes (an ambiguous failure is settled from the site's journal).
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import random
import re
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from dgb_dev.chaos.realtext import RealText, is_block, load_texts, paragraphs
from dgb_dev.mirror.content import slugify
from dgb_dev.mirror.journal import text_hash

__all__ = [
    "Action",
    "Done",
    "LoadDriver",
    "LoadPlan",
    "RealText",
    "load_texts",
    "loopback_base",
    "real_mix",
    "scraped_agencies",
]

KINDS = ("publish", "edit", "remove", "move")
# A removed article answers 410 Gone: an explicit withdrawal, which the pipeline hides after a
# second 410 a quarter of an hour later. A 404 is hidden only after 6 h of them (one 404 is not
# evidence: dgb.integrity.evidence), longer than any run's drain; the integration tests cover it.
REMOVED_STATUS = 410
MIN_GAP_S = 30.0  # an edit, removal or move at least this long after the article's previous action


def real_mix(agencies: Sequence[str]) -> dict[str, float]:
    """Each of ``agencies``' share of new articles as in production: its count among real articles
    of January-March 2026 plus a pseudo-count (:mod:`dgb_dev.mirror.publication`'s model)."""
    from dgb_dev.mirror.publication import PublicationModel

    keys = list(dict.fromkeys(agencies))
    return {k: float(s) for k, s in zip(keys, PublicationModel.load().shares(keys))}


def scraped_agencies(settings: Any = None) -> dict[str, str]:
    """The gov.br agencies the stack scrapes from the local site, key -> ``site_kind`` (``html`` or
    ``plone6_api``); EBC's portals are left out (their addresses carry the month and section)."""
    from dgb.scraper.dags import selected_agencies

    return {a.key: a.site_kind for a in selected_agencies(settings) if a.site_kind != "ebc"}


# -- the plan ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """One control call: ``at`` s from the start; ``article`` the run's article number; ``slug`` the
    article's address at that moment (a move's: before it); ``body`` the call's JSON beyond
    ``agency``/``slug``; ``hash`` what a reader should then see (:func:`text_hash`; None: removed)."""

    at: float
    kind: str
    article: int
    agency: str
    slug: str
    body: Mapping[str, Any] = field(hash=False)
    hash: str | None = None
    burst: int = -1  # publishes: the burst it belongs to


@dataclass(frozen=True)
class LoadPlan:
    minutes: float
    rate_per_hour: float
    seed: int
    tag: str
    actions: tuple[Action, ...]

    @classmethod
    def build(
        cls,
        texts: Sequence[RealText],
        agencies: Mapping[str, float] | Sequence[str],
        *,
        minutes: float,
        rate_per_hour: float = 5000.0,
        seed: int = 0,
        tag: str | None = None,
        burst_mean: float = 4.0,
        burst_span_s: tuple[float, float] = (20.0, 120.0),
        edit_share: float = 0.10,
        second_edit_share: float = 0.25,
        remove_share: float = 0.02,
        move_share: float = 0.005,
        image_share: float = 0.7,
    ) -> LoadPlan:
        """The plan (see the module doc); ``agencies``: keys (equal weights) or key -> weight;
        ``tag``: lowercase letters and digits marking this run's titles and slugs (default
        ``c<seed>``: pass a fresh one per run on a stack that keeps its index)."""
        if minutes <= 0 or rate_per_hour <= 0:
            raise ValueError("minutes and rate_per_hour must be positive")
        weights = dict(agencies) if isinstance(agencies, Mapping) else dict.fromkeys(agencies, 1.0)
        weights = {k: float(w) for k, w in weights.items() if w > 0}
        if not weights or not texts:
            raise ValueError("a plan needs at least one agency and one text")
        tag = tag or f"c{seed}"
        if not re.fullmatch(r"[a-z0-9]{1,12}", tag):
            raise ValueError(f"tag {tag!r}: 1-12 lowercase letters or digits")
        rng = random.Random(seed)
        end = minutes * 60.0
        n = round(rate_per_hour * minutes / 60.0)
        keys, cum = list(weights), list(weights.values())
        pool = paragraphs(texts)
        bursts: list[tuple[float, str, list[float]]] = []  # (start, agency, times)
        left = n
        while left > 0:
            size = min(left, _burst_size(rng, burst_mean))
            span = min(end, rng.uniform(*burst_span_s)) if size > 1 else 0.0
            start = rng.uniform(0.0, end - span)
            agency = rng.choices(keys, cum)[0]
            bursts.append((start, agency, sorted(start + rng.uniform(0.0, span) for _ in range(size))))
            left -= size
        bursts.sort(key=lambda b: b[0])
        arrivals = sorted((at, i, agency) for i, (_, agency, times) in enumerate(bursts) for at in times)
        actions: list[Action] = []
        for article, (at, burst, agency) in enumerate(arrivals):  # numbered in order of publication
            text = texts[rng.randrange(len(texts))]
            pub = _publish(rng, text, agency, article, tag, at, burst, image_share)
            actions.append(pub)
            actions += _life(
                rng, pub, texts, pool, end, tag, edit_share, second_edit_share, remove_share, move_share
            )
        actions.sort(key=lambda a: (a.at, a.article, KINDS.index(a.kind)))
        return cls(minutes, rate_per_hour, seed, tag, tuple(actions))

    def counts(self) -> dict[str, int]:
        c = Counter(a.kind for a in self.actions)
        return {k: c.get(k, 0) for k in KINDS}

    def bursts(self) -> list[tuple[str, int, float]]:
        """Each burst as (agency, articles, seconds from its first to its last article)."""
        by: dict[int, list[Action]] = {}
        for a in self.actions:
            if a.kind == "publish":
                by.setdefault(a.burst, []).append(a)
        return [(v[0].agency, len(v), v[-1].at - v[0].at) for _, v in sorted(by.items())]

    def max_in_window(self, window_s: float = 120.0, agency: str | None = None) -> int:
        """The most new articles (of ``agency``, or of any one agency) within ``window_s``."""
        by: dict[str, list[float]] = {}
        for a in self.actions:
            if a.kind == "publish" and agency in (None, a.agency):
                by.setdefault(a.agency, []).append(a.at)
        best = 0
        for times in by.values():
            lo = 0
            for hi, t in enumerate(times):
                while t - times[lo] > window_s:
                    lo += 1
                best = max(best, hi - lo + 1)
        return best

    def summary(self) -> str:
        """A few lines for a bench's log."""
        c = self.counts()
        bursts = self.bursts()
        agency, size, span = max(bursts, key=lambda b: b[1]) if bursts else ("-", 0, 0.0)
        per_agency = Counter(a.agency for a in self.actions if a.kind == "publish")
        top = ", ".join(f"{k} {v}" for k, v in per_agency.most_common(5))
        return (
            f"load plan {self.tag} (seed {self.seed}): {self.minutes:g} min at {self.rate_per_hour:g}/h: "
            + " ".join(f"{k}={v}" for k, v in c.items())
            + f"\n  {len(bursts)} bursts, mean {c['publish'] / max(1, len(bursts)):.1f} articles; biggest: "
            f"{size} on {agency} in {span:.0f} s; most on one agency within 2 min: {self.max_in_window()}"
            f"\n  {len(per_agency)} agencies; busiest: {top}"
        )


def _burst_size(rng: random.Random, mean: float, cap: int = 60) -> int:
    """``1 + geometric``: most bursts a few articles, now and then a press office's dozen."""
    p = 1.0 / max(1.0, mean)
    size = 1
    while size < cap and rng.random() > p:
        size += 1
    return size


def _publish(
    rng: random.Random,
    text: RealText,
    agency: str,
    n: int,
    tag: str,
    at: float,
    burst: int,
    image_share: float,
) -> Action:
    mark = f"{tag} n{n:05d}"
    slug = f"{slugify(text.title, 80)}-{tag}-n{n:05d}"
    title = f"{text.title} ({mark})"
    body: dict[str, Any] = {
        "url_slug": slug,
        "title": title,
        "subtitle": text.subtitle,
        "category": "Notícias",
        "tags": ["carga", tag],
        "content": text.content,
    }
    if rng.random() < image_share:
        body["image_url"] = f"imagens/{slug}.jpg"
    return Action(round(at, 3), "publish", n, agency, slug, body, text_hash(title, text.content), burst)


def _delay(rng: random.Random, after: float, end: float) -> float | None:
    """When the next change of an article comes, ``after`` its previous action; None: not in the run."""
    d = rng.expovariate(1 / 600.0) if rng.random() < 0.85 else rng.uniform(3600.0, 6 * 3600.0)
    d = max(MIN_GAP_S, d)
    if after + d < end:
        return after + d
    if end - after <= MIN_GAP_S:
        return None
    return rng.uniform(after + MIN_GAP_S, end)


def _life(
    rng: random.Random,
    pub: Action,
    texts: Sequence[RealText],
    pool: Sequence[str],
    end: float,
    tag: str,
    edit_share: float,
    second_edit_share: float,
    remove_share: float,
    move_share: float,
) -> list[Action]:
    """What happens to one article after its publication: edits, then a removal or a move."""
    out: list[Action] = []
    edits = 0
    if rng.random() < edit_share:
        edits = 2 if rng.random() < second_edit_share else 1
    fate = rng.random()
    final = "remove" if fate < remove_share else "move" if fate < remove_share + move_share else None
    title, content, last = pub.body["title"], pub.body["content"], pub.at
    mark = title[title.rindex(" (") :]
    for _ in range(edits):
        at = _delay(rng, last, end)
        if at is None:
            break
        body: dict[str, Any] = {"content": _edited(rng, content, pool)}
        if rng.random() < 1 / 3:
            other = texts[rng.randrange(len(texts))].title
            if other + mark != title:
                body["title"] = other + mark
        title, content, last = body.get("title", title), body["content"], at
        out.append(
            Action(round(at, 3), "edit", pub.article, pub.agency, pub.slug, body, text_hash(title, content))
        )
    at = _delay(rng, last, end) if final else None
    if at is not None and final == "remove":
        body = {"status": REMOVED_STATUS}
        out.append(Action(round(at, 3), "remove", pub.article, pub.agency, pub.slug, body, None))
    elif at is not None and final == "move":
        body = {"new_slug": f"{pub.slug}-nova", "redirect": rng.random() < 0.8}
        out.append(
            Action(round(at, 3), "move", pub.article, pub.agency, pub.slug, body, text_hash(title, content))
        )
    return out


def _edited(rng: random.Random, content: str, pool: Sequence[str]) -> str:
    """``content`` with one paragraph replaced by a real one of another article, or one appended."""
    paras = content.split("\n\n")
    new = pool[rng.randrange(len(pool))]
    plain = [i for i, p in enumerate(paras) if not is_block(p)]
    if plain and rng.random() < 0.5:
        i = rng.choice(plain)
        if paras[i] != new:
            paras[i] = new
            return "\n\n".join(paras)
    return content + "\n\n" + new


# -- the driver -------------------------------------------------------------------------------------


def loopback_base(base_url: str) -> str:
    """``base_url`` without a trailing slash when it is ``http://`` on a loopback host, else
    ValueError (the control API answers loopback clients only, and a run never leaves the machine)."""
    parts = urlsplit(base_url or "")
    host = parts.hostname or ""
    try:
        loop = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loop = host == "localhost"
    if parts.scheme != "http" or not loop:
        raise ValueError(
            f"the load drives a local site on loopback (http://127.0.0.1:PORT), not {base_url!r}"
        )
    return base_url.rstrip("/")


class _Ambiguous(Exception):
    """The call may or may not have reached the site (timeout, reset, 5xx)."""


@dataclass
class Done:
    """What became of one action: ``status`` ``done``, ``failed`` or ``skipped`` (an article whose
    publication failed, or already gone); ``at`` the wall-clock time (epoch s) the call started;
    ``lateness_s`` how long after its planned time; ``url`` the address the site gave."""

    action: Action
    status: str
    at: float
    lateness_s: float
    http_status: int | None = None
    url: str | None = None
    slug: str | None = None
    attempts: int = 0
    error: str | None = None
    elapsed_s: float = 0.0


class LoadDriver:
    """Plays a :class:`LoadPlan` against a local site's control API from a daemon thread.

    Each action waits for its offset (divided by ``speed``: a test plays an hour in seconds); a late
    one runs at once and its lateness is recorded. A call is tried ``retries`` more times, ``backoff``
    s apart doubling, when the site refused the connection, timed out, reset or answered 5xx; before
    a retry after a call the site may have done (all but a refused connection), the site's journal
    is read: a change it holds is done, not done again (a second publish would be a second article).
    A 4xx answer is final. Edits, removals and moves of an article that was never published (or is
    already gone) are skipped. One bad call never stops the thread.
    """

    def __init__(
        self,
        plan: LoadPlan,
        base_url: str,
        *,
        speed: float = 1.0,
        retries: int = 3,
        backoff: float = 0.5,
        timeout: float = 10.0,
    ) -> None:
        self.base = loopback_base(base_url)
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.plan, self.speed, self.timeout = plan, speed, timeout
        self.retries, self.backoff = retries, backoff
        # no proxy, whatever the environment says: the site is on this machine
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._done: list[Done] = []
        self._live: dict[int, tuple[str, str, str]] = {}  # article -> (agency, slug, url) while on the site
        self._gone: set[int] = set()
        self._journal_next = 0
        self._journal: dict[tuple, dict] = {}  # (event, agency, slug, hash) -> {"url", "slug"}
        self._thread = threading.Thread(target=self._run, name="dgb-chaos-load", daemon=True)
        self.started_at: float | None = None

    # -- control ------------------------------------------------------------------------------
    def start(self) -> LoadDriver:
        self.started_at = time.time()
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop before the next action (a call under way finishes) and wait for the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the plan's end; True when the thread has finished."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    # -- results ------------------------------------------------------------------------------
    def records(self) -> list[Done]:
        with self._lock:
            return list(self._done)

    def summary(self) -> dict[str, Any]:
        """Planned, done, failed and skipped actions by kind, retries, and the worst lateness."""
        records = self.records()
        out: dict[str, Any] = {"planned": self.plan.counts()}
        for status in ("done", "failed", "skipped"):
            c = Counter(r.action.kind for r in records if r.status == status)
            out[status] = {k: c.get(k, 0) for k in KINDS}
        out["not_run"] = len(self.plan.actions) - len(records)
        out["retried"] = sum(1 for r in records if r.attempts > 1)
        out["max_lateness_s"] = round(max((r.lateness_s for r in records), default=0.0), 3)
        out["late_over_1s"] = sum(1 for r in records if r.lateness_s > 1.0)
        return out

    def live_articles(self) -> dict[int, tuple[str, str, str]]:
        """Article number -> (agency, slug, url) of the run's articles the site should now serve."""
        with self._lock:
            return dict(self._live)

    # -- the thread ---------------------------------------------------------------------------
    def _run(self) -> None:
        t0 = time.monotonic()
        for action in self.plan.actions:
            due = t0 + action.at / self.speed
            if self._stop.wait(max(0.0, due - time.monotonic())):
                return
            started, wall = time.monotonic(), time.time()
            rec = Done(action, "failed", wall, round(max(0.0, started - due), 3))
            try:
                self._execute(action, rec)
            except Exception as exc:  # a bug here must not end the load: record it
                rec.status, rec.error = "failed", f"{type(exc).__name__}: {exc}"
            rec.elapsed_s = round(time.monotonic() - started, 3)
            with self._lock:
                self._done.append(rec)

    def _execute(self, action: Action, rec: Done) -> None:
        if action.kind == "publish":
            payload = {"agency": action.agency, **action.body}
            key = ("publish", action.agency, action.body["url_slug"], action.hash)
        else:
            with self._lock:
                where = self._live.get(action.article)
            if where is None:
                rec.status = "skipped"
                rec.error = "gone" if action.article in self._gone else "never published"
                return
            rec.slug, rec.url = where[1], where[2]
            payload = {"agency": where[0], "slug": where[1], **action.body}
            slug = action.body["new_slug"] if action.kind == "move" else where[1]
            key = (action.kind, where[0], slug, action.hash)
        answer = self._call(action.kind, payload, key, rec)
        if answer is None:
            return
        rec.status, rec.url = "done", answer.get("url") or rec.url
        rec.slug = answer.get("slug") or key[2]
        with self._lock:
            if action.kind == "remove":
                self._live.pop(action.article, None)
                self._gone.add(action.article)
            else:
                self._live[action.article] = (action.agency, rec.slug, rec.url or "")

    def _call(self, kind: str, payload: dict, key: tuple, rec: Done) -> dict | None:
        """The site's JSON answer, or None (``rec`` says why)."""
        unsure = False
        for attempt in range(1, self.retries + 2):
            rec.attempts = attempt
            if unsure:
                found = self._in_journal(key)
                if found is not None:
                    rec.http_status, rec.error = None, "settled from the journal after an ambiguous call"
                    return found
            try:
                status, answer = self._post(f"/_control/{kind}", payload)
            except _Ambiguous as exc:
                unsure, rec.error = True, str(exc)
            except OSError as exc:  # refused: nothing reached the site
                rec.error = f"{type(exc).__name__}: {exc}"
            else:
                rec.http_status = status
                if status < 300:
                    rec.error = None
                    return answer
                rec.error = f"HTTP {status}: {str(answer.get('error', answer))[:200]}"
                if status < 500:
                    found = self._in_journal(key) if unsure else None
                    return found
                unsure = True
            if attempt <= self.retries and self._stop.wait(self.backoff * 2 ** (attempt - 1)):
                break
        return None

    def _post(self, path: str, payload: dict) -> tuple[int, dict]:
        req = urllib.request.Request(
            self.base + path,
            data=json.dumps(payload, ensure_ascii=False).encode("utf-8"),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                return resp.status, _json(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _json(exc.read())
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ConnectionRefusedError):
                raise exc.reason from None
            raise _Ambiguous(f"{type(exc.reason).__name__}: {exc.reason}") from None
        except (TimeoutError, http.client.HTTPException, ConnectionError) as exc:
            raise _Ambiguous(f"{type(exc).__name__}: {exc}") from None

    def _in_journal(self, key: tuple) -> dict | None:
        """``{"url", "slug"}`` when the site's journal holds the change ``key`` (event, agency, slug,
        hash; a removal's hash is None), read on from where the last look stopped (from the start
        again when the journal got shorter: a restarted site)."""
        data = self._journal_since(self._journal_next)
        if data is None:
            return None
        if not data.get("entries") and self._journal_next:
            whole = self._journal_since(0)
            if whole is not None and int(whole.get("next", 0)) < self._journal_next:
                self._journal.clear()
                data = whole
        for e in data.get("entries", ()):
            url = e.get("url")
            found = {"url": self.base + url if url else None, "slug": e.get("slug")}
            self._journal[(e.get("event"), e.get("agency"), e.get("slug"), e.get("hash"))] = found
        self._journal_next = int(data.get("next", self._journal_next))
        return self._journal.get(key)

    def _journal_since(self, since: int) -> dict | None:
        try:
            req = urllib.request.Request(f"{self.base}/_control/journal?since={since}")
            with self._opener.open(req, timeout=self.timeout) as resp:
                return _json(resp.read())
        except (OSError, http.client.HTTPException):
            return None


def _json(raw: bytes) -> dict:
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        return {"error": raw[:200].decode("utf-8", "replace")}
    return data if isinstance(data, dict) else {"answer": data}
