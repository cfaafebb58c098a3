"""Which scrape DAGs exist and when they run (no Airflow import; the DAG file builds them).

One DAG per active gov.br agency (``scrape_<key>``, the key verbatim: hyphens and underscores are
both valid in Airflow DAG ids, so two keys never map to one id) plus ``scrape_ebc_sources`` for the EBC
sources (a gov.br agency may be keyed ``ebc``),
each started by the ``scrape_dispatcher`` DAG (every minute), which polls an agency's listing when
its learnt cadence makes it due (:mod:`dgb.scraper.cadence`, :mod:`dgb.scraper.dispatch`) and, when
the listing shows news, emits the DAG's due asset (:func:`due_asset`), the asset the DAG is
scheduled on; manual runs and ``airflow dags trigger`` work as before. ``DGB_SCRAPE_CADENCE=fixed``
goes back to every 10 minutes at a minute offset derived from the key (runs spread over the cycle)
and no dispatcher.
In mirror mode (the offline default) only agencies the local site serves get a DAG; the
others would only collect 404s. ``DGB_SCRAPE_AGENCIES`` (comma-separated keys, or ``all``)
overrides the selection.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from dgb.config import Settings
from dgb.config import dev as config_dev
from dgb.config import scrape as config_scrape

EBC_DAG_ID = "scrape_ebc_sources"
RELAY_DAG_ID = "outbox_relay"
DISPATCHER_DAG_ID = "scrape_dispatcher"
DUE_ALIAS = "dgb_scrape_due"  # the dispatcher's outlet alias: it adds one due asset per due DAG
CYCLE_MINUTES = 10
CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus" / "articles.jsonl"


@dataclass(frozen=True)
class ScrapeSpec:
    dag_id: str
    agency_keys: tuple[str, ...]
    schedule: str | None  # a cron under DGB_SCRAPE_CADENCE=fixed; None: the due asset (dispatcher)

    @property
    def agency_key(self) -> str:
        return self.agency_keys[0]

    @property
    def due_asset(self) -> tuple[str, str]:
        return due_asset(self.dag_id)


def due_asset(dag_id: str) -> tuple[str, str]:
    """``(name, uri)`` of the asset the dispatcher emits when ``dag_id`` is due."""
    return f"{dag_id}_due", f"x-dgb://scrape/due/{dag_id}"


def learnt_cadence() -> bool:
    return config_scrape.scrape_cadence_mode() == "learnt"


def dag_id_for(key: str) -> str:
    """``scrape_<key>``: catalogue keys are ``[a-z0-9]`` runs joined by single ``-``/``_``."""
    return "scrape_" + key


def stagger(key: str) -> str:
    minute = zlib.crc32(key.encode()) % CYCLE_MINUTES
    return f"{minute}/{CYCLE_MINUTES} * * * *"


def _keys_in(path: Path) -> set[str]:
    keys = set()
    try:
        lines = (
            path.read_text(encoding="utf-8").splitlines()
            if path.suffix == ".jsonl"
            else [path.read_text("utf-8")]
        )
    except OSError:
        return keys
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("agency"), str) and obj["agency"].strip():
            keys.add(obj["agency"].strip().lower())
    return keys


@lru_cache(maxsize=8)
def _mirror_keys_cached(corpus_mtime: float, extra: str, extra_state: tuple) -> frozenset[str]:
    keys = _keys_in(CORPUS)
    if extra:
        for path in sorted(Path(extra).glob("*.json*")):
            keys |= _keys_in(path)
    return frozenset(keys)


def mirror_agency_keys() -> frozenset[str]:
    """Agencies the local site serves: the corpus's plus those of DGB_MIRROR_EXTRA files."""
    extra = config_dev.mirror_extra_dir()
    state: tuple = ()
    if extra and Path(extra).is_dir():
        state = tuple((p.name, p.stat().st_mtime) for p in sorted(Path(extra).glob("*.json*")))
    mtime = CORPUS.stat().st_mtime if CORPUS.exists() else 0.0
    return _mirror_keys_cached(mtime, extra, state)


def selected_agencies(settings: Settings | None = None) -> list:
    """The Agency objects to scrape, URLs rewritten to the mirror in mirror mode."""
    from dgb import agencies as catalogue

    settings = settings or Settings.from_env()
    found = catalogue.agencies_for_settings(settings)
    wanted = config_scrape.scrape_agencies()
    if settings.source_mode == "mirror":
        keys = {k for k in mirror_agency_keys() if catalogue.KEY_RE.match(k)}
        base = settings.mirror_url
        found = catalogue.merge_extra_agencies(found, sorted(keys - set(found)), base_url=base)
        if not wanted:
            found = {k: a for k, a in found.items() if k in keys or a.site_kind == "ebc"}
    if wanted and wanted != "all":
        keys = {k.strip() for k in wanted.split(",") if k.strip()}
        unknown = keys - set(found)
        if unknown:
            raise ValueError(f"DGB_SCRAPE_AGENCIES names unknown agencies: {sorted(unknown)}")
        found = {k: a for k, a in found.items() if k in keys}
    return [a for a in found.values() if a.active]


def scrape_specs(settings: Settings | None = None) -> list[ScrapeSpec]:
    chosen = selected_agencies(settings)
    fixed = not learnt_cadence()

    def schedule(key: str) -> str | None:
        return stagger(key) if fixed else None

    specs = [ScrapeSpec(dag_id_for(a.key), (a.key,), schedule(a.key)) for a in chosen if a.site_kind != "ebc"]
    ebc = tuple(a.key for a in chosen if a.site_kind == "ebc")
    if ebc:
        specs.append(ScrapeSpec(EBC_DAG_ID, ebc, schedule("ebc")))
    seen: dict[str, tuple[str, ...]] = {}
    for spec in specs:
        if spec.dag_id in seen:
            raise ValueError(
                f"scrape DAG id {spec.dag_id!r} would serve both {seen[spec.dag_id]} and "
                f"{spec.agency_keys}: rename one of these agency keys"
            )
        seen[spec.dag_id] = spec.agency_keys
    return specs


def agency_by_key(key: str, settings: Settings | None = None):
    for agency in selected_agencies(settings):
        if agency.key == key:
            return agency
    raise KeyError(
        f"agency {key!r} is not configured for scraping (inactive, unknown, or not served "
        "by the local mirror)"
    )


def dag_ids(settings: Settings | None = None) -> list[str]:
    dispatcher = [DISPATCHER_DAG_ID] if learnt_cadence() else []
    return [s.dag_id for s in scrape_specs(settings)] + [RELAY_DAG_ID] + dispatcher
