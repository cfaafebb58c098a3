"""Which scrape DAGs exist: mirror vs live mode, extra agencies, the selection override."""

import json

import pytest

from dgb.config import Settings
from dgb.scraper import dags


@pytest.fixture
def mirror_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("DGB_SOURCE_MODE", "mirror")
    monkeypatch.delenv("DGB_SCRAPE_AGENCIES", raising=False)
    monkeypatch.setenv("DGB_MIRROR_EXTRA", str(tmp_path))
    return tmp_path


def test_mirror_mode_scrapes_the_sites_agencies_and_ebc(mirror_settings):
    ids = {s.dag_id for s in dags.scrape_specs(Settings.from_env())}
    assert {"scrape_mec", "scrape_saude", "scrape_mj", dags.EBC_DAG_ID} <= ids
    assert "scrape_anatel" not in ids  # not served by the local site: no 404 noise
    ebc = next(s for s in dags.scrape_specs(Settings.from_env()) if s.dag_id == dags.EBC_DAG_ID)
    assert set(ebc.agency_keys) == {"agencia_brasil", "tvbrasil"}


def test_dag_ids_are_one_to_one_with_keys_and_never_clash_with_ebc(monkeypatch, mirror_settings):
    # "a-b" and "a_b" are different agencies (production has keys of both shapes), and a gov.br
    # agency keyed "ebc" is not the EBC sources' DAG.
    assert dags.dag_id_for("a-b") != dags.dag_id_for("a_b")
    assert dags.dag_id_for("ebc") != dags.EBC_DAG_ID
    for key in ("ebc", "a-b", "a_b"):
        (mirror_settings / f"{key}.json").write_text(
            json.dumps(
                {"agency": key, "title": "t", "content": "c", "published_at": "2026-11-20T10:00:00-03:00"}
            )
        )
    ids = [spec.dag_id for spec in dags.scrape_specs(Settings.from_env())]
    assert len(ids) == len(set(ids))
    assert {"scrape_ebc", "scrape_a-b", "scrape_a_b", dags.EBC_DAG_ID} <= set(ids)


def test_extra_folder_adds_agencies_and_ignores_bad_keys(mirror_settings):
    (mirror_settings / "a.json").write_text(
        json.dumps(
            {
                "agency": "novo-orgao",
                "title": "t",
                "content": "c",
                "published_at": "2026-11-20T10:00:00-03:00",
            }
        )
    )
    (mirror_settings / "b.jsonl").write_text(
        json.dumps({"agency": "Bad Key!", "title": "t"}) + "\nnot json\n"
    )
    s = Settings.from_env()
    ids = {spec.dag_id for spec in dags.scrape_specs(s)}
    assert "scrape_novo-orgao" in ids and not any("bad" in i for i in ids)
    agency = dags.agency_by_key("novo-orgao", s)
    assert agency.url == f"{s.mirror_url}/www.gov.br/novo-orgao/pt-br/assuntos/noticias"


def test_selection_override_and_live_mode(monkeypatch, mirror_settings):
    monkeypatch.setenv("DGB_SCRAPE_AGENCIES", "mec,saude")
    assert [s.dag_id for s in dags.scrape_specs(Settings.from_env())] == ["scrape_mec", "scrape_saude"]
    monkeypatch.setenv("DGB_SCRAPE_AGENCIES", "mec,nope")
    with pytest.raises(ValueError, match="nope"):
        dags.scrape_specs(Settings.from_env())
    monkeypatch.setenv("DGB_SOURCE_MODE", "live")
    monkeypatch.delenv("DGB_SCRAPE_AGENCIES")
    specs = dags.scrape_specs(Settings.from_env())
    # the learnt cadence (default): no cron, each DAG on its own due asset, and the dispatcher exists
    assert len(specs) >= 150 and all(s.schedule is None for s in specs)
    assert len({s.due_asset for s in specs}) == len(specs)
    assert dags.due_asset("scrape_mec") == ("scrape_mec_due", "x-dgb://scrape/due/scrape_mec")
    assert dags.DISPATCHER_DAG_ID in dags.dag_ids(Settings.from_env())
    assert dags.agency_by_key("mec", Settings.from_env()).url.startswith("https://www.gov.br/mec/")
    # DGB_SCRAPE_CADENCE=fixed: every 10 minutes, staggered over the cycle's minutes, no dispatcher
    monkeypatch.setenv("DGB_SCRAPE_CADENCE", "fixed")
    specs = dags.scrape_specs(Settings.from_env())
    assert all(s.schedule.endswith("/10 * * * *") for s in specs)
    assert len({s.schedule for s in specs}) == 10
    assert dags.DISPATCHER_DAG_ID not in dags.dag_ids(Settings.from_env())
    monkeypatch.setenv("DGB_SCRAPE_CADENCE", "sometimes")
    with pytest.raises(ValueError, match="DGB_SCRAPE_CADENCE"):
        dags.scrape_specs(Settings.from_env())
