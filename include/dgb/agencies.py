"""Agency catalogue: load and validate ``data/agencies.yaml``; map URLs to the offline mirror.

Every source the scraper reads is one :class:`Agency`. For gov.br sites the key is the first
path segment of the listing URL (``https://www.gov.br/<key>/...``); EBC portals live on their own
hosts. In mirror mode every URL ``https://HOST/PATH?Q`` is served as ``{base_url}/HOST/PATH?Q``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

DEFAULT_PATH = Path(__file__).parent / "data" / "agencies.yaml"

AGENCY_TYPES = frozenset(
    {
        "Ministério",
        "Secretaria",
        "Agência Reguladora",
        "Autarquia",
        "Fundação",
        "Empresa Pública",
        "Órgão",
        "Comunicação",
    }
)
SITE_KINDS = frozenset({"html", "plone6_api", "ebc"})
GOVBR_HOST = "www.gov.br"
EBC_HOST_SUFFIX = ".ebc.com.br"
DEFAULT_LISTING_PATH = "pt-br/assuntos/noticias"

REQUIRED_FIELDS = ("key", "name", "type", "url", "site_kind", "active")
OPTIONAL_FIELDS = ("parent", "disabled_reason")
KEY_RE = re.compile(r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$")


class AgencyConfigError(ValueError):
    """The agency catalogue is invalid; the message lists every problem, one per line."""


@dataclass(frozen=True)
class Agency:
    key: str
    name: str
    type: str
    parent: str | None
    url: str
    site_kind: str
    active: bool
    disabled_reason: str | None

    @property
    def host(self) -> str:
        """Network location of ``url`` (the mirror's when URLs were rewritten)."""
        return urlsplit(self.url).netloc


# -- URL mapping for the offline mirror ----------------------------------------------------


def rewrite_url(url: str, base_url: str) -> str:
    """``https://HOST/PATH?Q`` -> ``{base_url}/HOST/PATH?Q``; URLs already under base_url pass."""
    base = base_url.rstrip("/")
    if url.startswith(base + "/"):
        return url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"cannot rewrite {url!r}: not an absolute http(s) URL")
    out = f"{base}/{parts.netloc}{parts.path}"
    if parts.query:
        out += f"?{parts.query}"
    if parts.fragment:
        out += f"#{parts.fragment}"
    return out


def original_url(url: str, base_url: str) -> str:
    """Inverse of :func:`rewrite_url`; URLs not under ``base_url`` are returned unchanged."""
    prefix = base_url.rstrip("/") + "/"
    if not url.startswith(prefix):
        return url
    rest = url[len(prefix) :]
    if not rest or rest[0] in "/?#":
        raise ValueError(f"cannot map {url!r} back: no host after the mirror prefix")
    return f"https://{rest}"


# -- validation ------------------------------------------------------------------------------


def _label(index: int, raw: Any) -> str:
    key = raw.get("key") if isinstance(raw, Mapping) else None
    return f"agency #{index} ({key!r})" if isinstance(key, str) and key else f"agency #{index}"


def _check_url(key: str, url: str, site_kind: str) -> str | None:
    """Return a problem with ``url`` for this entry, or None."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.netloc:
        return f"url {url!r} must be an absolute https URL"
    host = parts.netloc.lower()
    if site_kind == "ebc":
        if not host.endswith(EBC_HOST_SUFFIX):
            return f"url host {host!r} is not an EBC host (*{EBC_HOST_SUFFIX})"
        return None
    if host != GOVBR_HOST:
        return f"url host {host!r} must be {GOVBR_HOST!r} for site_kind {site_kind!r}"
    first = parts.path.lstrip("/").split("/", 1)[0]
    if first != key:
        return f"url first path segment {first!r} must equal the key {key!r}"
    return None


def _validate_entry(index: int, raw: Any, errors: list[str]) -> Agency | None:
    """Check one raw entry, appending problems to ``errors``; return the Agency if it is sound."""
    if not isinstance(raw, Mapping):
        errors.append(f"agency #{index}: entry must be a mapping, got {type(raw).__name__}")
        return None
    label, before = _label(index, raw), len(errors)
    for field in raw:
        if field not in REQUIRED_FIELDS and field not in OPTIONAL_FIELDS:
            errors.append(f"{label}: unknown field {field!r}")
    missing = [f for f in REQUIRED_FIELDS if raw.get(f) is None]
    for field in missing:
        errors.append(f"{label}: missing required field {field!r}")
    strings = ("key", "name", "type", "url", "site_kind")
    for field in strings:
        value = raw.get(field)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            errors.append(f"{label}: field {field!r} must be a non-empty string")
    if len(errors) > before:
        return None

    key, url, kind = raw["key"], raw["url"], raw["site_kind"]
    parent, active, reason = raw.get("parent"), raw["active"], raw.get("disabled_reason")
    if not KEY_RE.match(key):
        errors.append(
            f"{label}: bad key format {key!r}"
            " (expected lowercase letters and digits, single '-' or '_' between them)"
        )
    if raw["type"] not in AGENCY_TYPES:
        errors.append(f"{label}: unknown type {raw['type']!r} (allowed: {sorted(AGENCY_TYPES)})")
    if kind not in SITE_KINDS:
        errors.append(f"{label}: unknown site_kind {kind!r} (allowed: {sorted(SITE_KINDS)})")
    elif problem := _check_url(key, url, kind):
        errors.append(f"{label}: {problem}")
    if parent is not None and not isinstance(parent, str):
        errors.append(f"{label}: parent must be a key string or null")
    if not isinstance(active, bool):
        errors.append(f"{label}: active must be true or false, got {active!r}")
    elif not active and not (isinstance(reason, str) and reason.strip()):
        errors.append(f"{label}: inactive agency needs a non-empty disabled_reason")
    elif active and reason is not None:
        errors.append(f"{label}: disabled_reason must be null for an active agency")
    if len(errors) > before:
        return None
    return Agency(key, raw["name"].strip(), raw["type"], parent, url, kind, active, reason)


def parse_agencies(data: Any, *, base_url: str | None = None) -> dict[str, Agency]:
    """Validate an already-parsed catalogue (``{"agencies": [...]}``) and build the agencies."""
    if not isinstance(data, Mapping) or not isinstance(data.get("agencies"), list):
        raise AgencyConfigError("catalogue must be a mapping with an 'agencies' list")
    extra = [k for k in data if k != "agencies"]
    if extra:
        raise AgencyConfigError(f"catalogue: unknown top-level field(s) {extra}")

    errors: list[str] = []
    agencies: dict[str, Agency] = {}
    seen: dict[str, int] = {}
    for index, raw in enumerate(data["agencies"]):
        key = raw.get("key") if isinstance(raw, Mapping) else None
        if isinstance(key, str) and key in seen:
            errors.append(f"agency #{index} ({key!r}): duplicate key (first at #{seen[key]})")
            continue
        if isinstance(key, str):
            seen[key] = index
        agency = _validate_entry(index, raw, errors)
        if agency is not None:
            agencies[agency.key] = agency
    for index, raw in enumerate(data["agencies"]):
        parent = raw.get("parent") if isinstance(raw, Mapping) else None
        if isinstance(parent, str) and parent not in seen:
            errors.append(f"{_label(index, raw)}: parent {parent!r} is not a known agency key")
        elif isinstance(parent, str) and parent == raw.get("key"):
            errors.append(f"{_label(index, raw)}: agency cannot be its own parent")
    if errors:
        raise AgencyConfigError("invalid agency catalogue:\n" + "\n".join(errors))
    if base_url:
        agencies = {k: _with_url(a, rewrite_url(a.url, base_url)) for k, a in agencies.items()}
    return agencies


def _with_url(agency: Agency, url: str) -> Agency:
    return Agency(**{**agency.__dict__, "url": url})


# -- public API -------------------------------------------------------------------------------


def load_agencies(path: str | Path | None = None, *, base_url: str | None = None) -> dict[str, Agency]:
    """Load and validate the catalogue (file order kept); rewrite URLs when ``base_url`` is set."""
    source = Path(path) if path is not None else DEFAULT_PATH
    try:
        data = yaml.load(
            source.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        )
    except yaml.YAMLError as exc:
        raise AgencyConfigError(f"{source}: not valid YAML: {exc}") from exc
    return parse_agencies(data, base_url=base_url)


def active_agencies(path: str | Path | None = None, *, base_url: str | None = None) -> dict[str, Agency]:
    """Like :func:`load_agencies`, keeping only active agencies."""
    return {k: a for k, a in load_agencies(path, base_url=base_url).items() if a.active}


def merge_extra_agencies(
    agencies: Mapping[str, Agency], keys: Iterable[str], base_url: str | None = None
) -> dict[str, Agency]:
    """Return a copy of ``agencies`` plus a minimal active html agency for each unknown key."""
    merged, keys = dict(agencies), list(keys)
    bad = [k for k in keys if not isinstance(k, str) or not KEY_RE.match(k)]
    if bad:
        raise AgencyConfigError("\n".join(f"extra agency {k!r}: bad key format" for k in bad))
    for key in keys:
        if key in merged:
            continue
        url = f"https://{GOVBR_HOST}/{key}/{DEFAULT_LISTING_PATH}"
        if base_url:
            url = rewrite_url(url, base_url)
        merged[key] = Agency(key, key, "Órgão", None, url, "html", True, None)
    return merged


def agencies_for_settings(settings: Any, path: str | Path | None = None) -> dict[str, Agency]:
    """Load the catalogue for a :class:`dgb.config.Settings` (mirror URLs in mirror mode)."""
    base_url = settings.mirror_url if settings.source_mode == "mirror" else None
    return load_agencies(path, base_url=base_url)
