"""The mirror's site (a local gov.br-like web site): articles by agency, changes, URLs and routing.

URL map (``B`` = the request's base, e.g. ``http://127.0.0.1:8090``; every link in a page is an
absolute ``B/<host>/...`` URL, external hosts included, so nothing leaves the mirror):

====================================================================  ==============================
``B/health``                                                          ``{"status": "ok", ...}``
``B/robots.txt``, ``B/<host>/robots.txt``                             allow all but
                                                                      ``/www.gov.br/<agency>/privado``
``B/www.gov.br/<agency>[/pt-br]``                                     portal home (links to listing)
``B/www.gov.br/<agency>/<listing>?b_start:int=N``                     classic listing, 30 a page
``B/www.gov.br/<agency>/<listing>/<slug>``                            classic article
``B/www.gov.br/<agency>/++api++[/<listing>]/@search?...``             Plone 6 search JSON (``Title=``
                                                                      filters on title words)
``B/www.gov.br/<agency>/++api++/<listing>/<slug>``                    Plone 6 item JSON
``.../resolveuid/<uid>[/@@images/image]``, ``.../<slug>/@@images/..``  JPEG (unknown uid: 404)
``.../imagens/...``, any path ending .jpg/.jpeg/.png/.gif              JPEG / PNG
``B/agenciabrasil.ebc.com.br/ultimas?page=N`` (and tvbrasil)          EBC listing, 10 a page
``B/<ebc host>/<section>/noticia/<YYYY-MM>/<slug>``                   EBC article
====================================================================  ==============================

``<listing>`` is the agency's path from ``dgb.agencies.load_agencies()`` (the part of its
``url`` after ``/<key>/``), default ``pt-br/assuntos/noticias``.

Markup of each page: :mod:`dgb_dev.mirror.pages` (a module per page kind); images:
:mod:`dgb_dev.mirror.images`; articles, agencies and variants: :mod:`dgb_dev.mirror.content`.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from dgb.config import dev as dev_settings
from dgb_dev.mirror.content import (
    BRT,
    DEFAULT_LISTING_PATH,
    EBC_DEFAULTS,
    EBC_NAMES,
    EBC_REUSED,
    GOVBR,
    Article,
    MirrorAgency,
    article_from_dict,
    article_variant,
    int_param,
    is_image_path,
    md5_int,
    mirror_agencies,
    mirror_url,
    query_params,
    read_articles,
    recent_base,
    slugify,
)
from dgb_dev.mirror.images import make_jpeg, make_png
from dgb_dev.mirror.journal import Journal, journal_extra_changes
from dgb_dev.mirror.pages import ebc, plone_classic, plone_json, portal

log = logging.getLogger("dgb_dev.mirror")


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    last_modified: datetime | None = None

    @classmethod
    def html(cls, text: str, status: int = 200, **kw: Any) -> Response:
        return cls(status, text.encode("utf-8"), **kw)

    @classmethod
    def json(cls, obj: Any, status: int = 200) -> Response:
        return cls(
            status,
            json.dumps(obj, ensure_ascii=False, indent=1).encode("utf-8"),
            "application/json; charset=utf-8",
        )


@dataclass(frozen=True)
class Route:
    kind: str  # home | listing | article | api_search | api_item | image | robots | privado | index | missing
    agency: MirrorAgency | None = None
    slug: str = ""
    path: str = ""


# -- the site ----------------------------------------------------------------------------------

_UNSET: Any = object()


class Site:
    """Articles by agency, with publish/edit/remove, extra articles and page rendering.

    Thread-safe: public methods take an internal lock; rendering works on frozen Article
    snapshots.
    """

    def __init__(
        self,
        corpus_path: str | Path | None = None,
        *,
        extra_dir: str | Path | None = _UNSET,
        registry: Mapping[str, Any] | None = None,
        removed_status: int = 404,
        hold_back: float = 0.0,
        seed: int = 0,
        clock: Any = None,
        synthetic: Any = None,
        journal_base: bool = False,
        base_newest_age_s: float | None = None,
    ) -> None:
        self.corpus_path = Path(corpus_path) if corpus_path else None
        self._extra_dir_arg = extra_dir
        self.removed_status = removed_status
        self.hold_back = hold_back
        self.seed = seed
        self.clock = clock or (lambda: datetime.now(UTC))
        # a dgb_dev.mirror.synthetic.SyntheticCorpus: its articles served as they stand at the clock
        self.synthetic = synthetic
        self.journal_base = journal_base  # the ground truth of dgb_dev.mirror.journal: corpus too?
        # each agency's corpus moved in time so its newest article is this old at (re)start (None: as written)
        self.base_newest_age_s = base_newest_age_s
        self._journal = Journal(self.clock, lambda a: self.article_url("", a))
        self._lock = threading.RLock()
        self._registry = mirror_agencies(registry)
        self._ebc_key_by_host = {a.host: k for k, a in self._registry.items() if a.is_ebc}
        for host, key in EBC_DEFAULTS.items():
            if host not in self._ebc_key_by_host:
                self._ebc_key_by_host[host] = key
                self._registry[key] = MirrorAgency(key, host, "ultimas", EBC_NAMES[host], False)
        self._extra: dict[tuple[str, str], Article] = {}
        self._extra_sig: tuple = ()
        self.reset()

    # -- loading -------------------------------------------------------------------------------
    def reset(self) -> None:
        """Back to the corpus as loaded: drop publishes, edits, removals; re-hold held-back."""
        with self._lock:
            corpus = (
                read_articles(self.corpus_path, "corpus")
                if self.corpus_path and self.corpus_path.exists()
                else []
            )
            if self.corpus_path and not self.corpus_path.exists():
                log.warning("mirror: corpus %s not found; starting empty", self.corpus_path)
            if self.base_newest_age_s is not None:
                corpus = recent_base(corpus, self.clock(), self.base_newest_age_s)
            corpus.sort(key=lambda a: (a.published_at, a.slug))
            n_held = round(len(corpus) * self.hold_back) if self.hold_back > 0 else 0
            self._held = [replace(a, source="held") for a in corpus[len(corpus) - n_held :]] if n_held else []
            visible = corpus[: len(corpus) - n_held]
            self._base = {a.key: a for a in visible}
            self._add_ebc_reuse(visible)
            self._removed: dict[tuple[str, str], int] = {}
            self._moved: dict[tuple[str, str], str | None] = {}  # old key -> new slug (None: no redirect)
            self._rng = random.Random(self.seed)
            self._ticks = 0
            self._edited: set[tuple[str, str]] = set()
            self._extra_sig = ()
            self._dirty = True
            self._journal.restart(self._base.values() if self.journal_base else ())

    def journal(self, since: int = 0) -> list[dict[str, Any]]:
        """Entries from ``since`` on of the ground truth (:mod:`dgb_dev.mirror.journal`)."""
        return self._journal.entries(since)

    def _add_ebc_reuse(self, articles: list[Article]) -> None:
        govbr = [a for a in articles if not self.agency_for(a.agency).is_ebc]
        for host, key in self._ebc_key_by_host.items():
            picked = sorted(govbr, key=lambda a: md5_int(host, a.agency, a.slug))[:EBC_REUSED]
            for a in picked:
                if (key, a.slug) not in self._base:
                    self._base[(key, a.slug)] = replace(a, agency=key, source="ebc-reuse")

    def agency_for(self, key: str) -> MirrorAgency:
        """The agency record for ``key``: the catalogue's, else a gov.br default (no locking needed)."""
        return self._registry.get(key) or MirrorAgency(key, GOVBR, DEFAULT_LISTING_PATH, key.upper(), False)

    @property
    def extra_dir(self) -> Path | None:
        raw = dev_settings.mirror_extra_dir() if self._extra_dir_arg is _UNSET else self._extra_dir_arg
        return Path(raw) if raw else None

    def refresh_extra(self) -> None:
        """Rescan ``DGB_MIRROR_EXTRA`` when its listing or any file's mtime/size changed.

        An extra article with the (agency, slug) of a corpus article replaces it while its file
        exists; control-API edits of extra articles last until their folder changes.
        """
        folder = self.extra_dir
        sig: tuple = ()
        if folder and folder.is_dir():
            try:
                sig = (str(folder),) + tuple(
                    sorted(
                        (e.name, e.stat().st_mtime_ns, e.stat().st_size)
                        for e in os.scandir(folder)
                        if e.is_file() and e.name.endswith((".json", ".jsonl"))
                    )
                )
            except OSError as exc:
                log.warning("mirror: cannot scan %s: %s", folder, exc)
                return
        with self._lock:
            if sig == self._extra_sig:
                return
            self._extra_sig = sig
            extra: dict[tuple[str, str], Article] = {}
            for name, _, _ in sorted(sig[1:]):
                for a in read_articles(folder / name, "extra"):
                    extra[a.key] = a
            for event, a in journal_extra_changes(self._extra, extra, self._base, self._removed):
                self._journal.record(event, a)
            self._extra = extra
            self._dirty = True

    # -- index -------------------------------------------------------------------------------
    def _rebuild(self) -> None:
        if not self._dirty:
            return
        merged = {**self._base, **self._extra}
        by_agency: dict[str, list[Article]] = {k: [] for k in self._registry}
        images: dict[str, Article] = {}
        for key, a in merged.items():
            if key in self._removed:
                continue
            by_agency.setdefault(a.agency, []).append(a)
            if a.image_uid:
                images[a.image_uid] = a
        for items in by_agency.values():
            items.sort(key=lambda a: (a.published_at, a.slug), reverse=True)
        self._index, self._images, self._dirty = by_agency, images, False

    def articles(self, agency: str) -> list[Article]:
        """Visible articles of ``agency``, newest first (with its newest synthetic ones, if any)."""
        with self._lock:
            self._rebuild()
            items = list(self._index.get(agency, ()))
        if self.synthetic is not None:
            items = sorted(
                items + self.synthetic.newest(agency, self._now()),
                key=lambda a: (a.published_at, a.slug),
                reverse=True,
            )
        return items

    def get(self, agency: str, slug: str) -> Article | None:
        with self._lock:
            key = (agency, slug)
            if key in self._removed:
                return None
            found = self._extra.get(key) or self._base.get(key)
        if found is None and self.synthetic is not None:
            i = self.synthetic.index_of(agency, slug)
            if i is not None:
                return self.synthetic.article(i, self._now())
        return found

    def agency(self, key: str) -> MirrorAgency | None:
        with self._lock:
            self._rebuild()
            return self.agency_for(key) if key in self._index else None

    def agency_keys(self) -> list[str]:
        """Every agency key the mirror serves (catalogue, corpus, published and extra)."""
        with self._lock:
            self._rebuild()
            return sorted(self._index)

    def unknown_agency_keys(self) -> list[str]:
        """Served keys missing from the agency catalogue (add them to the local config)."""
        with self._lock:
            self._rebuild()
            return sorted(k for k in self._index if k not in self._registry)

    # -- changes -----------------------------------------------------------------------------
    def _now(self) -> datetime:
        return self.clock().astimezone(UTC).replace(microsecond=0)

    def publish(self, data: Mapping[str, Any]) -> Article:
        """Add an article (top of its agency's listing when newest); a taken slug gets ``-2``..."""
        with self._lock:
            a = article_from_dict(data, now=self._now(), source="control")
            slug, n = a.slug, 2
            while (a.agency, slug) in self._base or (a.agency, slug) in self._extra:
                slug, n = f"{a.slug}-{n}", n + 1
            a = replace(a, slug=slug)
            self._base[a.key] = a
            self._dirty = True
            self._journal.record("publish", a)
            return a

    def edit(
        self,
        agency: str,
        slug: str,
        *,
        title: str | None = None,
        content: str | None = None,
        image_url: Any = _UNSET,
        subtitle: str | None = None,
    ) -> Article:
        """Change an article in place; ``modified_at`` moves forward at least one second."""
        with self._lock:
            a = self.get(agency, slug)
            if a is None:
                raise KeyError(f"no article {agency}/{slug}")
            changes: dict[str, Any] = {"modified_at": max(self._now(), a.modified_at + timedelta(seconds=1))}
            if title is not None:
                changes["title"] = title
            if content is not None:
                changes["content"] = content
            if subtitle is not None:
                changes["subtitle"] = subtitle
            if image_url is not _UNSET:
                changes["image_url"] = image_url or None
            new = replace(a, **changes)
            (self._extra if a.key in self._extra else self._base)[a.key] = new
            self._edited.add(a.key)
            self._dirty = True
            self._journal.record("edit", new)
            return new

    def remove(self, agency: str, slug: str, status: int | None = None) -> None:
        """Take an article down; its URL then answers ``status`` (default ``removed_status``)."""
        with self._lock:
            a = self.get(agency, slug)
            if a is None:
                raise KeyError(f"no article {agency}/{slug}")
            self._removed[(agency, slug)] = int(status or self.removed_status)
            self._dirty = True
            self._journal.record("remove", a)

    def move(self, agency: str, slug: str, new_slug: str, *, redirect: bool = True) -> Article:
        """Move an article to ``new_slug`` (a URL migration): it is served there (same UID and
        image); its old URL answers 301 to the new one when ``redirect``, else 404."""
        with self._lock:
            a = self.get(agency, slug)
            if a is None:
                raise KeyError(f"no article {agency}/{slug}")
            if (
                not new_slug
                or "/" in new_slug
                or (agency, new_slug) in self._base
                or (agency, new_slug) in self._extra
            ):
                raise ValueError(f"cannot move {agency}/{slug} to {new_slug!r} (empty, nested or taken)")
            store = self._extra if a.key in self._extra else self._base
            del store[a.key]
            new = replace(a, slug=new_slug, origin_slug=a.origin_slug or a.slug)
            store[new.key] = new
            self._moved[(agency, slug)] = new_slug if redirect else None
            self._dirty = True
            self._journal.record("move", new, from_url=self.article_url("", a))
            return new

    def moved_to(self, agency: str, slug: str) -> str | None:
        """The slug an old URL redirects to (following chained moves), or None."""
        with self._lock:
            seen = set()
            target = None
            while (agency, slug) in self._moved and slug not in seen:
                seen.add(slug)
                slug = self._moved[(agency, slug)]
                if slug is None:
                    return None
                target = slug
            return target

    def tick(self) -> dict[str, Any]:
        """One step of a live site: publish the oldest held-back article, edit a random one."""
        with self._lock:
            self._ticks += 1
            out: dict[str, Any] = {"tick": self._ticks, "published": None, "edited": None}
            if self._held:
                a = replace(self._held.pop(0), source="corpus")
                self._base[a.key] = a
                self._dirty = True
                self._journal.record("publish", a)
                out["published"] = f"{a.agency}/{a.slug}"
            keys = sorted(
                k for k, a in self._base.items() if k not in self._removed and a.source != "ebc-reuse"
            )
            if keys:
                agency, slug = self._rng.choice(keys)
                a = self._base[(agency, slug)]
                if self._rng.random() < 0.8:  # production: 80% of edits were title edits
                    title = re.sub(r" \(atualizada \d+\)$", "", a.title) + f" (atualizada {self._ticks})"
                    self.edit(agency, slug, title=title)
                else:
                    note = f"Atualização {self._ticks}: texto complementado pela assessoria."
                    self.edit(agency, slug, content=a.content.rstrip() + "\n\n" + note)
                out["edited"] = f"{agency}/{slug}"
            return out

    def state(self) -> dict[str, Any]:
        with self._lock:
            self._rebuild()
            return {
                "articles": sum(len(v) for v in self._index.values()),
                "agencies": {k: len(v) for k, v in sorted(self._index.items())},
                "held_back": len(self._held),
                "ticks": self._ticks,
                "published": sorted(
                    f"{a.agency}/{a.slug}" for a in self._base.values() if a.source == "control"
                ),
                "edited": sorted(f"{k[0]}/{k[1]}" for k in self._edited),
                "removed": {f"{k[0]}/{k[1]}": s for k, s in sorted(self._removed.items())},
                "moved": {f"{k[0]}/{k[1]}": s for k, s in sorted(self._moved.items())},
                "extra_dir": str(self.extra_dir) if self.extra_dir else None,
                "extra_articles": len(self._extra),
                "unknown_agencies": sorted(k for k in self._index if k not in self._registry),
            }

    # -- URLs ----------------------------------------------------------------------------------
    def listing_url(self, base: str, ag: MirrorAgency) -> str:
        if ag.is_ebc:
            return f"{base}/{ag.host}/{ag.path}"
        return f"{base}/{GOVBR}/{ag.key}/{ag.path}"

    def article_url(self, base: str, a: Article) -> str:
        ag = self.agency_for(a.agency)
        if ag.is_ebc:
            section = slugify(a.category, 40) if a.category else "geral"
            return f"{base}/{ag.host}/{section}/noticia/{a.published_at.astimezone(BRT):%Y-%m}/{a.slug}"
        return f"{self.listing_url(base, ag)}/{a.slug}"

    def image_src(self, base: str, a: Article, relative: bool = False) -> str | None:
        if not a.image_uid:
            return None
        ag = self.agency_for(a.agency)
        if ag.is_ebc:
            return f"{base}/{ag.host}/sites/default/files/thumbnails/image/{a.slug}.jpg"
        rel = f"resolveuid/{a.image_uid}/@@images/image"
        return rel if relative else f"{base}/{GOVBR}/{a.agency}/{rel}"

    def thumb_src(self, base: str, a: Article) -> str | None:
        if not a.image_url:
            return None
        if self.agency_for(a.agency).is_ebc:
            return self.image_src(base, a)
        url = a.image_url
        if urlsplit(url).scheme:
            return mirror_url(base, url)
        if is_image_path(url):
            return f"{base}/{GOVBR}{url}" if url.startswith("/") else f"{base}/{GOVBR}/{a.agency}/{url}"
        return f"{self.article_url(base, a)}/@@images/image/thumb"

    # -- routing -------------------------------------------------------------------------------
    def route(self, path: str) -> Route:
        segs = [s for s in path.split("/") if s]
        if not segs:
            return Route("index")
        if segs[-1] == "robots.txt" and len(segs) <= 2:
            return Route("robots", path=segs[0] if len(segs) == 2 else "")
        host = segs[0]
        with self._lock:
            self._rebuild()
            if host == GOVBR and len(segs) >= 2 and segs[1] in self._index:
                return self._route_govbr(self.agency_for(segs[1]), segs[2:])
            key = self._ebc_key_by_host.get(host)
            if key and key in self._index:
                ag = self.agency_for(key)
                rest = segs[1:]
                if rest == [ag.path]:
                    return Route("listing", ag)
                if is_image_path("/".join(rest)):
                    return Route("image", ag, path="/".join(rest))
                if len(rest) >= 2:
                    return Route("article", ag, rest[-1])
        return Route("missing")

    def _route_govbr(self, ag: MirrorAgency, rest: list[str]) -> Route:
        # the request path arrives decoded (the server unquotes it); a catalogue path may hold
        # escapes (MRE's ".../alertas%20e%20noticias/noticias"): compare decoded with decoded
        listing = unquote(ag.path).split("/")
        if not rest or rest == ["pt-br"]:
            return Route("home", ag)
        if rest[0] == "privado":
            return Route("privado", ag)
        if rest[0] == "++api++":
            rest = rest[1:]
            if rest and rest[-1] == "@search":
                return Route("api_search", ag, path="/".join(rest[:-1]))
            if rest[: len(listing)] == listing and len(rest) == len(listing) + 1:
                return Route("api_item", ag, rest[-1])
            return Route("missing", ag)
        if is_image_path("/".join(rest)):
            return Route("image", ag, path="/".join(rest))
        if rest == listing:
            return Route("listing", ag)
        if rest[: len(listing)] == listing and len(rest) == len(listing) + 1:
            return Route("article", ag, rest[-1])
        return Route("missing", ag)

    # -- rendering -----------------------------------------------------------------------------
    def render(self, route: Route, base: str, query: str = "", *, malformed_jsonld: bool = False) -> Response:
        params = query_params(query)
        kind, ag = route.kind, route.agency
        if kind == "index":
            return Response.html(portal.index_page(self, base))
        if kind == "robots":
            return Response(200, self.robots().encode(), "text/plain; charset=utf-8")
        if kind == "home":
            return Response.html(portal.home_page(self, base, ag))
        if kind == "privado":
            restricted = portal.portal_page(base, ag, "Área restrita", "<p>Conteúdo de acesso restrito.</p>")
            return Response.html(restricted)
        if kind == "listing":
            if ag.is_ebc:
                return Response.html(ebc.ebc_listing(self, base, ag, int_param(params, "page")))
            start = int_param(params, "b_start:int", "b_start")
            return Response.html(plone_classic.listing(self, base, ag, start))
        if kind == "api_search":
            return Response.json(plone_json.plone_search(self, base, ag, route.path, params))
        if kind == "image":
            return self._image(route)
        if kind in ("article", "api_item"):
            with self._lock:
                status = self._removed.get((ag.key, route.slug))
            a = self.get(ag.key, route.slug)
            target = self.moved_to(ag.key, route.slug) if a is None and not status else None
            if target:
                moved = self.get(ag.key, target)
                if moved is not None:
                    url = self.article_url(base, moved)
                    if kind == "api_item":
                        url = f"{base}/{GOVBR}/{ag.key}/++api++/{ag.path}/{moved.slug}"
                    return Response(301, b"", "text/html; charset=utf-8", {"Location": url})
            if status or a is None:
                code = status or 404
                if kind == "api_item":
                    return Response.json({"type": "NotFound", "message": "Resource not found"}, code)
                return Response.html(portal.error_page(base, code), code)
            if kind == "api_item":
                return Response.json(plone_json.plone_item(self, base, a, full=True))
            variant = article_variant(a)
            if malformed_jsonld:
                variant = replace(variant, jsonld="malformed")
            render_article = ebc.ebc_article if ag.is_ebc else plone_classic.article
            page = render_article(self, base, ag, a, variant)
            return Response.html(page, last_modified=a.modified_at)
        return Response.html(portal.error_page(base, 404), 404)

    def robots(self) -> str:
        keys = [k for k in self.agency_keys() if not self.agency_for(k).is_ebc]
        lines = ["User-agent: *"] + [f"Disallow: /{GOVBR}/{k}/privado" for k in keys] + ["Allow: /", ""]
        return "\n".join(lines)

    def _image(self, route: Route) -> Response:
        segs = route.path.split("/")
        if "resolveuid" in segs:
            i = segs.index("resolveuid")
            uid = segs[i + 1] if i + 1 < len(segs) else ""
            with self._lock:
                self._rebuild()
                known = uid in self._images
            if not known and self.synthetic is not None and route.agency is not None:
                known = uid in self.synthetic.image_uids(route.agency.key)
            if not known:
                return Response(404, b"Not Found", "text/plain; charset=utf-8")
        elif "@@images" in segs and route.agency and not route.agency.is_ebc:
            slug = segs[segs.index("@@images") - 1] if segs.index("@@images") else ""
            if self.get(route.agency.key, slug) is None:
                return Response(404, b"Not Found", "text/plain; charset=utf-8")
        seed = md5_int(route.agency.key if route.agency else "", route.path)
        if segs[-1].lower().endswith(".png"):
            return Response(200, make_png((seed % 256, (seed >> 8) % 256, (seed >> 16) % 256)), "image/png")
        return Response(200, make_jpeg(40 + seed % 180), "image/jpeg")
