"""Tests for the agency catalogue (dgb.agencies) and its shipped data file."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest
import yaml

from dgb.agencies import (
    AGENCY_TYPES,
    Agency,
    AgencyConfigError,
    active_agencies,
    agencies_for_settings,
    load_agencies,
    merge_extra_agencies,
    original_url,
    rewrite_url,
)

MIRROR = "http://127.0.0.1:8090"


def _entry(key: str = "mec", **overrides) -> dict:
    entry = {
        "key": key,
        "name": f"Agency {key}",
        "type": "Ministério",
        "parent": None,
        "url": f"https://www.gov.br/{key}/pt-br/assuntos/noticias",
        "site_kind": "html",
        "active": True,
        "disabled_reason": None,
    }
    entry.update(overrides)
    return entry


def _write(tmp_path: Path, *entries: dict) -> Path:
    path = tmp_path / "agencies.yaml"
    path.write_text(yaml.safe_dump({"agencies": list(entries)}, allow_unicode=True), "utf-8")
    return path


def _error(tmp_path: Path, *entries: dict) -> str:
    with pytest.raises(AgencyConfigError) as info:
        load_agencies(_write(tmp_path, *entries))
    return str(info.value)


# -- the shipped catalogue --------------------------------------------------------------------


def test_shipped_catalogue_loads_with_expected_coverage():
    agencies = load_agencies()
    govbr_active = [a for a in agencies.values() if a.active and a.host == "www.gov.br"]
    assert len(govbr_active) >= 150
    assert len(agencies) == len(set(agencies))
    for key in ("mec", "saude", "fazenda", "anvisa", "ibama", "inss", "pf", "agu", "cgu"):
        assert agencies[key].active, key
    assert agencies["anvisa"].parent == "saude"
    assert agencies["inep"].parent == "mec"

    ebc = {k: a for k, a in agencies.items() if a.site_kind == "ebc"}
    # production's keys (its rows and (agency, url) dedup keys use them)
    assert {k for k, a in ebc.items() if a.active} == {"agencia_brasil", "tvbrasil"}
    assert ebc["agencia_brasil"].url == "https://agenciabrasil.ebc.com.br/ultimas"
    assert ebc["tvbrasil"].url == "https://tvbrasil.ebc.com.br/ultimas"
    assert not ebc["memoria-ebc"].active
    assert all(a.type == "Comunicação" and a.parent is None for a in ebc.values())
    # listing URLs and reading method as production's scraper configuration has them
    assert agencies["anvisa"].url == "https://www.gov.br/anvisa/pt-br/assuntos/noticias-anvisa"
    assert agencies["anatel"].site_kind == "plone6_api" and agencies["mec"].site_kind == "html"


def test_shipped_catalogue_is_consistent_and_varied():
    agencies = load_agencies()
    for agency in agencies.values():
        assert agency.parent is None or agency.parent in agencies
        assert agency.type in AGENCY_TYPES
        assert agency.active == (agency.disabled_reason is None)
        if agency.site_kind != "ebc":
            assert urlsplit(agency.url).path.split("/")[1] == agency.key

    kinds = Counter(a.site_kind for a in agencies.values())
    assert 30 <= kinds["plone6_api"] <= 45  # production reads 38 agencies through the Plone 6 API
    assert kinds["html"] > 100
    assert 1 <= sum(not a.active for a in agencies.values()) <= 12

    paths = Counter(urlsplit(a.url).path.split("/", 2)[2] for a in agencies.values() if a.site_kind != "ebc")
    assert paths.most_common(1)[0][0] == "pt-br/assuntos/noticias"
    for listing in (
        "pt-br/noticias",
        "pt-br/centrais-de-conteudo/noticias",
        "pt-br/assuntos/noticias/ultimas-noticias",
        "pt-br/central-de-conteudos/noticias",
        "pt-br/comunicacao/noticias",
    ):
        assert paths[listing] > 0, listing


def test_active_agencies_and_file_order():
    everything = load_agencies()
    active = active_agencies()
    assert set(active) == {k for k, a in everything.items() if a.active}
    assert list(active) == [k for k in everything if k in active]


# -- validation errors ------------------------------------------------------------------------


def test_minimal_valid_file(tmp_path):
    path = _write(tmp_path, _entry("mec"), _entry("inep", type="Autarquia", parent="mec"))
    agencies = load_agencies(path)
    assert list(agencies) == ["mec", "inep"]
    assert agencies["inep"] == Agency(
        "inep",
        "Agency inep",
        "Autarquia",
        "mec",
        "https://www.gov.br/inep/pt-br/assuntos/noticias",
        "html",
        True,
        None,
    )


def test_unknown_field_names_field_and_entry(tmp_path):
    message = _error(tmp_path, _entry("mec"), _entry("inep", scraper_type="html"))
    assert "'inep'" in message and "unknown field 'scraper_type'" in message


def test_missing_required_field(tmp_path):
    entry = _entry("mec")
    del entry["url"]
    message = _error(tmp_path, entry)
    assert "'mec'" in message and "missing required field 'url'" in message


def test_duplicate_key(tmp_path):
    message = _error(tmp_path, _entry("mec"), _entry("saude"), _entry("mec"))
    assert "agency #2 ('mec'): duplicate key" in message


def test_bad_key_format(tmp_path):
    message = _error(tmp_path, _entry("MEC", url="https://www.gov.br/MEC/pt-br/noticias"))
    assert "'MEC'" in message and "bad key format" in message


@pytest.mark.parametrize(
    "url",
    ["http://www.gov.br/mec/pt-br/noticias", "www.gov.br/mec/pt-br/noticias", "https:///mec"],
)
def test_bad_url(tmp_path, url):
    message = _error(tmp_path, _entry("mec", url=url))
    assert "'mec'" in message and "https URL" in message


def test_host_and_path_mismatch(tmp_path):
    message = _error(
        tmp_path,
        _entry("mec", url="https://portal.mec.gov.br/pt-br/noticias"),
        _entry("saude", url="https://www.gov.br/ministerio-saude/pt-br/noticias"),
        _entry(
            "agencia_brasil",
            type="Comunicação",
            site_kind="ebc",
            url="https://agenciabrasil.example.com/ultimas",
        ),
    )
    lines = message.splitlines()
    assert any("'mec'" in line and "must be 'www.gov.br'" in line for line in lines)
    assert any("'saude'" in line and "must equal the key" in line for line in lines)
    assert any("'agencia_brasil'" in line and "not an EBC host" in line for line in lines)


def test_unknown_type_site_kind_and_parent(tmp_path):
    message = _error(
        tmp_path,
        _entry("mec", type="Agência"),
        _entry("inep", site_kind="rss"),
        _entry("fnde", parent="educacao"),
    )
    assert "'mec'): unknown type 'Agência'" in message
    assert "'inep'): unknown site_kind 'rss'" in message
    assert "'fnde'): parent 'educacao' is not a known agency key" in message


def test_active_and_disabled_reason_consistency(tmp_path):
    message = _error(
        tmp_path,
        _entry("mec", active=False),
        _entry("saude", active=False, disabled_reason="  "),
        _entry("fazenda", disabled_reason="anti-bot protection"),
        _entry("cgu", active=False, disabled_reason="site migrated, listing not found"),
    )
    assert "'mec'): inactive agency needs a non-empty disabled_reason" in message
    assert "'saude'): inactive agency needs" in message
    assert "'fazenda'): disabled_reason must be null" in message
    assert "'cgu'" not in message


def test_all_errors_reported_together(tmp_path):
    entries = _entry("mec", colour="blue"), _entry("mec"), _entry("x", active=False)
    message = _error(tmp_path, *entries)
    lines = message.splitlines()[1:]
    assert len(lines) == 3


def test_malformed_top_level(tmp_path):
    path = tmp_path / "agencies.yaml"
    path.write_text("- key: mec\n", "utf-8")
    with pytest.raises(AgencyConfigError, match="'agencies' list"):
        load_agencies(path)


# -- URL rewriting for the mirror -------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://www.gov.br/mec/pt-br/assuntos/noticias",
        "https://www.gov.br/mec/pt-br/assuntos/noticias?b_start:int=30",
        "https://agenciabrasil.ebc.com.br/ultimas?page=2",
        "https://www.gov.br",
    ],
)
def test_rewrite_round_trip(url):
    mirrored = rewrite_url(url, MIRROR)
    assert mirrored.startswith(MIRROR + "/" + urlsplit(url).netloc)
    assert original_url(mirrored, MIRROR) == url
    assert original_url(mirrored, MIRROR + "/") == url
    assert rewrite_url(mirrored, MIRROR) == mirrored  # idempotent


def test_rewrite_examples():
    assert (
        rewrite_url("https://www.gov.br/mec/pt-br/noticias?b_start:int=30", MIRROR + "/")
        == "http://127.0.0.1:8090/www.gov.br/mec/pt-br/noticias?b_start:int=30"
    )
    assert original_url("https://www.gov.br/mec/x", MIRROR) == "https://www.gov.br/mec/x"
    with pytest.raises(ValueError):
        rewrite_url("/relative/path", MIRROR)


def test_load_with_base_url_rewrites_after_validation():
    live = load_agencies()
    mirrored = load_agencies(base_url=MIRROR)
    assert list(mirrored) == list(live)
    assert mirrored["mec"].url == f"{MIRROR}/www.gov.br/mec/pt-br/assuntos/noticias"
    assert mirrored["mec"].host == "127.0.0.1:8090"
    for key, agency in mirrored.items():
        assert original_url(agency.url, MIRROR) == live[key].url


def test_agencies_for_settings():
    mirror = SimpleNamespace(source_mode="mirror", mirror_url=MIRROR)
    live = SimpleNamespace(source_mode="live", mirror_url=MIRROR)
    assert agencies_for_settings(mirror)["mec"].url.startswith(MIRROR + "/www.gov.br/mec/")
    assert agencies_for_settings(live)["mec"].url.startswith("https://www.gov.br/mec/")


# -- extra agencies ---------------------------------------------------------------------------


def test_merge_extra_agencies():
    base = load_agencies()
    merged = merge_extra_agencies(base, ["mec", "novo-orgao"])
    assert merged["mec"] is base["mec"]
    assert "novo-orgao" not in base
    extra = merged["novo-orgao"]
    assert (extra.name, extra.type, extra.site_kind, extra.active, extra.parent) == (
        "novo-orgao",
        "Órgão",
        "html",
        True,
        None,
    )
    assert extra.url == "https://www.gov.br/novo-orgao/pt-br/assuntos/noticias"
    assert list(merged)[-1] == "novo-orgao"

    mirrored = merge_extra_agencies({}, iter(["novo-orgao"]), base_url=MIRROR)
    assert mirrored["novo-orgao"].url == f"{MIRROR}/www.gov.br/novo-orgao/pt-br/assuntos/noticias"

    with pytest.raises(AgencyConfigError, match="'Bad Key'"):
        merge_extra_agencies(base, ["Bad Key"])
