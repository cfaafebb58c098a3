"""Synthetic articles at production scale, with edits at known times (issue 14).

``SyntheticCorpus(n=300_000, years=5)`` spreads ``n`` articles over the ``years`` before ``end``
for every agency of the catalogue (~160 gov.br agencies), and keeps publishing at the final rate
for ``extra_days`` after it (a simulation runs into that period). ``recent=(since, times, agency)``
replaces the articles of those agencies published from ``since`` on by the caller's (the
benchmark's publication model: office hours, bursts), so edits follow those publications;
``office=N`` does so itself for the extra days, for every agency the catalogue marks active: at
least N new articles in any 60 minutes of them
(:meth:`dgb_dev.mirror.publication.PublicationModel.office_hours`, ``bench_realtime.py --profile
office``). The site
serves them (``Site(synthetic=...)``, ``dgb mirror serve --synthetic N``) at
``B/www.gov.br/<agency>/<listing>/sintetica-<i>``, each page as it stands at the site's clock:
its version (title, text, image) reflects the edits made up to then, its ``dateModified`` the
last of them. ``scripts/bench_scale.py`` reads the same arrays to know when every edit happened.

The edit model (all draws from one seeded generator, so a corpus is reproducible):

* volume: articles per day grow as ``e^(g t)`` with ``g = 0.575``/year, so 300k over 5 years ends
  at ~500 a day (production's rate); agency ``k`` (catalogue order after a seeded shuffle)
  publishes a share proportional to ``1 / (k + 5)`` (a few big agencies, a long tail);
* who edits: each agency has an ``edited share`` drawn log-uniformly in [2%, 40%] (the share of
  its articles edited at least once: the per-agency modification rate); an edited article gets
  ``1 + Poisson(0.6)`` edits;
* when: each edit's delay after publication comes from a mixture: 55% exponential with mean
  45 min, 25% exponential with mean 10 h, 15% log-uniform in [2, 30] days, 5% log-uniform in
  [30 days, 3 years];
* what: 75% text, 15% title, 10% image (a new image URL); 90% of articles have an image.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

SLUG_PREFIX = "sintetica-"
KINDS = ("content", "title", "image")
DAY = 86400.0


@dataclass(frozen=True)
class EditModel:
    """The documented per-agency edit model (see the module docstring)."""

    growth_per_year: float = 0.575
    edited_share_min: float = 0.02
    edited_share_max: float = 0.40
    extra_edits_mean: float = 0.6
    # (weight, kind, a, b): "exp" with mean a seconds; "log" log-uniform in [a, b] seconds
    timing: tuple = (
        (0.55, "exp", 45 * 60.0, 0.0),
        (0.25, "exp", 10 * 3600.0, 0.0),
        (0.15, "log", 2 * DAY, 30 * DAY),
        (0.05, "log", 30 * DAY, 3 * 365 * DAY),
    )
    kind_weights: tuple = (0.75, 0.15, 0.10)
    image_share: float = 0.9


def _agency_keys() -> list[str]:
    try:
        from dgb.agencies import load_agencies

        keys = [k for k, a in load_agencies().items() if "ebc.com.br" not in (getattr(a, "url", "") or "")]
    except Exception:
        keys = []
    return keys or [f"orgao{i:03d}" for i in range(160)]


def _inactive_keys() -> set[str]:
    try:
        from dgb.agencies import load_agencies

        return {k for k, a in load_agencies().items() if not a.active}
    except Exception:
        return set()


class SyntheticCorpus:
    """``n`` articles over ``years`` up to ``end`` (+ ``extra_days`` at the final rate), with edits.

    Arrays (numpy, times in epoch seconds): ``published``, ``agency`` (index into ``agencies``),
    ``has_image``; edits sorted by article then time: ``edit_article``, ``edit_time``,
    ``edit_kind`` (index into :data:`KINDS`), with ``edit_start[i]:edit_start[i+1]`` the edits of
    article ``i``. ``edited_share[k]`` is agency ``k``'s true share of edited articles.
    """

    def __init__(
        self,
        n: int = 300_000,
        years: float = 5.0,
        *,
        end: datetime | None = None,
        extra_days: float = 0.0,
        seed: int = 14,
        model: EditModel | None = None,
        agencies: list[str] | None = None,
        recent: tuple[float, np.ndarray, np.ndarray] | None = None,
        office: int = 0,
    ) -> None:
        self.model = m = model or EditModel()
        self.end = (end or datetime.now(UTC)).astimezone(UTC)
        self.years, self.extra_days = years, extra_days
        rng = np.random.default_rng(seed)
        keys = list(agencies or _agency_keys())
        rng.shuffle(keys)
        self.agencies = keys
        end_s, span = self.end.timestamp(), years * 365.0 * DAY
        g = m.growth_per_year / (365.0 * DAY)
        # published: density ∝ e^(g t) on [0, span]; then the final rate for extra_days
        u = rng.random(n)
        t = np.log1p(u * math.expm1(g * span)) / g
        final_rate = n * g * math.exp(g * span) / math.expm1(g * span)  # articles per second at `end`
        n_extra = round(final_rate * extra_days * DAY)
        extra = rng.random(n_extra) * extra_days * DAY
        published = np.concatenate([end_s - span + t, end_s + extra])
        order = np.argsort(published, kind="stable")
        self.published = published[order]
        weights = 1.0 / (np.arange(len(keys)) + 5.0)
        self.agency = rng.choice(len(keys), size=len(self.published), p=weights / weights.sum())
        self.office = office
        if office and extra_days > 0:
            if recent is not None:
                raise ValueError("SyntheticCorpus: office and recent both replace the new articles")
            recent = self._office(end_s, extra_days, office, seed)
        if recent is not None:  # the caller's publications of its agencies from `since` on
            since, times, who = recent
            drop = (self.published >= since) & np.isin(self.agency, np.unique(who))
            published = np.concatenate([self.published[~drop], times])
            agency = np.concatenate([self.agency[~drop], who])
            order = np.argsort(published, kind="stable")
            self.published, self.agency = published[order], agency[order]
        total = len(self.published)
        self.has_image = rng.random(total) < m.image_share
        lo, hi = math.log(m.edited_share_min), math.log(m.edited_share_max)
        self.edited_share = np.exp(rng.uniform(lo, hi, len(keys)))
        edited = rng.random(total) < self.edited_share[self.agency]
        counts = np.where(edited, 1 + rng.poisson(m.extra_edits_mean, total), 0)
        art = np.repeat(np.arange(total), counts)
        k = len(art)
        comp = rng.choice(len(m.timing), size=k, p=[w for w, *_ in m.timing])
        delay = np.empty(k)
        for j, (_, kind, a, b) in enumerate(m.timing):
            sel = comp == j
            if kind == "exp":
                delay[sel] = rng.exponential(a, int(sel.sum()))
            else:
                delay[sel] = np.exp(rng.uniform(math.log(a), math.log(b), int(sel.sum())))
        times = self.published[art] + np.maximum(delay, 1.0)
        kinds = rng.choice(len(KINDS), size=k, p=list(m.kind_weights))
        kinds = np.where((kinds == 2) & ~self.has_image[art], 0, kinds)  # no image: a text edit
        o = np.lexsort((times, art))
        self.edit_article, self.edit_time, self.edit_kind = art[o], times[o], kinds[o].astype(np.int8)
        self.edit_start = np.searchsorted(self.edit_article, np.arange(total + 1))

    def _office(self, since: float, days: float, at_least: int, seed: int) -> tuple:
        from dgb_dev.mirror.publication import PublicationModel

        inactive = _inactive_keys()
        active = np.array([k for k, key in enumerate(self.agencies) if key not in inactive])
        times, who = PublicationModel.load().office_hours(
            [self.agencies[k] for k in active], since, round(days * 24), at_least, seed
        )
        return since, times, active[who]

    def __len__(self) -> int:
        return len(self.published)

    # -- pages ---------------------------------------------------------------------------------
    def slug(self, i: int) -> str:
        return f"{SLUG_PREFIX}{i}"

    def index_of(self, agency: str, slug: str) -> int | None:
        """The article index behind ``agency``/``slug``, or None (not synthetic, other agency)."""
        if not slug.startswith(SLUG_PREFIX) or not slug[len(SLUG_PREFIX) :].isdigit():
            return None
        i = int(slug[len(SLUG_PREFIX) :])
        if i >= len(self) or self.agencies[int(self.agency[i])] != agency:
            return None
        return i

    def version(self, i: int, at: float) -> tuple[int, int, int, float]:
        """(text edits, title edits, image edits, last edit time or published) made by ``at``."""
        lo, hi = int(self.edit_start[i]), int(self.edit_start[i + 1])
        done = hi - lo if hi == lo else int(np.searchsorted(self.edit_time[lo:hi], at, side="right"))
        kinds = self.edit_kind[lo : lo + done]
        last = float(self.edit_time[lo + done - 1]) if done else float(self.published[i])
        return int((kinds == 0).sum()), int((kinds == 1).sum()), int((kinds == 2).sum()), last

    def article(self, i: int, at: datetime):
        """Article ``i`` as it stands at ``at`` (None before its publication)."""
        from dgb_dev.mirror.content import Article

        when = at.timestamp()
        if self.published[i] > when:
            return None
        text, title, image, last = self.version(i, when)
        agency = self.agencies[int(self.agency[i])]
        published = datetime.fromtimestamp(float(self.published[i]), UTC).replace(microsecond=0)
        modified = datetime.fromtimestamp(last, UTC).replace(microsecond=0)
        heading = f"Notícia sintética {i} do órgão {agency}" + (f" (revisão {title})" if title else "")
        body = (
            f"Texto da notícia sintética {i}, publicada pelo órgão {agency}. "
            "O conteúdo acompanha o modelo de edições documentado em dgb_dev.mirror.synthetic."
        ) + (f" Atualização número {text} do texto." if text else "")
        image_url = self.image_url(i, image) if self.has_image[i] else None
        return Article(
            agency=agency,
            slug=self.slug(i),
            title=heading,
            content=body,
            published_at=published,
            modified_at=max(published, modified),
            subtitle=f"Subtítulo da notícia sintética {i}",
            image_url=image_url,
            source="synthetic",
        )

    def image_url(self, i: int, version: int) -> str:
        agency = self.agencies[int(self.agency[i])]
        return f"/{agency}/imagens/sintetica-{i}-v{version}.jpg"

    def image_uids(self, agency: str) -> frozenset[str]:
        """The site's image ids (``resolveuid/<id>``) of every version of every image of
        ``agency``'s synthetic articles (an image edit gives a new one; old ones keep answering,
        as Plone keeps them), computed once per agency."""
        cache = self.__dict__.setdefault("_image_uids", {})
        if agency not in cache:
            k = self.agencies.index(agency) if agency in self.agencies else -1
            uids = set()
            for i in np.flatnonzero((self.agency == k) & self.has_image) if k >= 0 else ():
                lo, hi = int(self.edit_start[i]), int(self.edit_start[i + 1])
                versions = 1 + int((self.edit_kind[lo:hi] == 2).sum())
                for v in range(versions):
                    key = f"{agency}/{self.slug(int(i))}/{self.image_url(int(i), v)}"
                    uids.add(hashlib.md5(key.encode()).hexdigest())
            cache[agency] = frozenset(uids)
        return cache[agency]

    def newest(self, agency: str, at: datetime, limit: int = 300) -> list:
        """The agency's newest ``limit`` articles published by ``at`` (for its listing)."""
        k = self.agencies.index(agency) if agency in self.agencies else -1
        if k < 0:
            return []
        cut = int(np.searchsorted(self.published, at.timestamp(), side="right"))
        idx = np.flatnonzero(self.agency[:cut] == k)[-limit:][::-1]
        return [a for a in (self.article(int(i), at) for i in idx) if a is not None]

    def published_between(self, start: datetime, end: datetime) -> int:
        lo, hi = np.searchsorted(self.published, [start.timestamp(), end.timestamp()], side="right")
        return int(hi - lo)

    def summary(self) -> dict:
        return {
            "articles": len(self),
            "agencies": len(self.agencies),
            "edits": len(self.edit_time),
            "first_published": datetime.fromtimestamp(float(self.published[0]), UTC).isoformat(),
            "end": self.end.isoformat(),
            "extra_days": self.extra_days,
            "office": self.office,
            "per_day_last_30d": round(self.published_between(self.end - timedelta(days=30), self.end) / 30),
        }
