"""`dgb parse-article` / `dgb parse-listing` through dgb.cli.main and one real subprocess."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dgb.cli import main
from dgb.scraper.models import ARTICLE_FIELDS

REPO = Path(__file__).resolve().parents[3]
PAGES = REPO / "tests" / "fixtures" / "pages"
MEC_URL = "https://www.gov.br/mec/pt-br/assuntos/noticias/2026/fevereiro/governo-anuncia-r-1-2-bilhao-para-escolas-em-tempo-integral"
PI_URL = "https://www.gov.br/povosindigenas/pt-br/assuntos/noticias/2026/04/brasil-sedia-encontro"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_parse_article_prints_exactly_the_article_fields(capsys):
    code, out, err = run(
        capsys, "parse-article", "--agency", "mec", "--url", MEC_URL, str(PAGES / "article_jsonld.html")
    )
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert list(data) == list(ARTICLE_FIELDS)
    assert set(data) == {
        "title",
        "subtitle",
        "editorial_lead",
        "category",
        "tags",
        "published_at",
        "updated_at",
        "image_url",
        "video_url",
        "content",
        "unique_id",
        "content_hash",
    }
    assert data["title"] == "Governo anuncia R$ 1,2 bilhão para escolas em tempo integral"
    assert data["published_at"] == "2026-02-10T17:05:07-03:00"
    assert data["updated_at"] == "2026-02-11T09:12:44-03:00"
    assert data["tags"] == [] and data["video_url"] is None
    assert data["unique_id"].startswith("governo-anuncia-r-1-2-bilhao-para-escolas-em-tempo-integral_")
    assert len(data["content_hash"]) == 16


def test_parse_article_rich_page(capsys):
    code, out, _ = run(
        capsys,
        "parse-article",
        "--agency",
        "povosindigenas",
        "--url",
        PI_URL,
        str(PAGES / "article_rich.html"),
    )
    data = json.loads(out)
    assert code == 0
    assert data["tags"] == ["Saúde", "Povos Indígenas", "Cooperação Internacional"]
    assert (
        data["image_url"]
        == "https://www.gov.br/povosindigenas/resolveuid/3f2a9c1be4d34e6f8a0b1c2d3e4f5a6b/@@images/image/large"
    )
    assert data["video_url"] == "https://www.youtube.com/embed/dQw4w9WgXcQ"
    assert "Compartilhe" not in data["content"] and "Assessoria" not in data["content"]


def test_parse_article_agency_defaults_from_url(capsys):
    _, with_agency, _ = run(
        capsys, "parse-article", "--agency", "mec", "--url", MEC_URL, str(PAGES / "article_jsonld.html")
    )
    _, without, _ = run(capsys, "parse-article", "--url", MEC_URL, str(PAGES / "article_jsonld.html"))
    assert json.loads(with_agency)["unique_id"] == json.loads(without)["unique_id"]


@pytest.mark.parametrize(
    "fixture,category",
    [
        ("anti_bot_cloudflare.html", "anti_bot"),
        ("article_empty.html", "empty_content"),
        ("listing_tileitem.html", "empty_content"),
        ("binary_blob.bin", "html_changed"),
    ],
)
def test_parse_article_errors_exit_2_with_one_category_line(capsys, fixture, category):
    code, out, err = run(capsys, "parse-article", "--agency", "mec", "--url", MEC_URL, str(PAGES / fixture))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{category}: ")


def test_parse_article_missing_file(capsys):
    code, _, err = run(capsys, "parse-article", "--url", MEC_URL, str(PAGES / "nope.html"))
    assert code == 2 and err.startswith("unknown: cannot read")


def test_parse_article_cp1252_and_ebc(capsys):
    _, out, _ = run(
        capsys,
        "parse-article",
        "--agency",
        "mec",
        "--url",
        "https://www.gov.br/mec/pt-br/pronatec",
        str(PAGES / "article_cp1252.html"),
    )
    assert json.loads(out)["title"] == "Inscrições para o Pronatec estão abertas até sexta-feira"
    url = "https://agenciabrasil.ebc.com.br/economia/noticia/2026-11/ipca-15-desacelera-em-novembro"
    code, out, _ = run(
        capsys,
        "parse-article",
        "--agency",
        "agenciabrasil",
        "--url",
        url,
        str(PAGES / "ebc_article_agenciabrasil.html"),
    )
    data = json.loads(out)
    assert code == 0 and data["title"] == "IPCA-15 desacelera para 0,25% em novembro"
    assert data["published_at"] == "2026-11-27T14:30:12-03:00"


def test_parse_listing_classic(capsys):
    code, out, _ = run(
        capsys,
        "parse-listing",
        "--agency",
        "mec",
        "--url",
        "https://www.gov.br/mec/pt-br/assuntos/noticias?b_start:int=30",
        str(PAGES / "listing_tileitem.html"),
    )
    data = json.loads(out)
    assert code == 0 and len(data) == 3
    assert data[0] == {
        "title": "Enem 2026 tem inscrições abertas a partir desta segunda-feira",
        "url": "https://www.gov.br/mec/pt-br/assuntos/noticias/2026/fevereiro/enem-2026-tem-inscricoes-abertas",
        "published_at": "2026-02-10T16:40:00-03:00",
    }
    assert data[2]["published_at"] == "2026-02-06T00:00:00-03:00"


def test_parse_listing_plone6_from_stdin(capsys, monkeypatch):
    raw = (PAGES / "plone6_search_page1.json").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8"))
    code, out, _ = run(
        capsys,
        "parse-listing",
        "--agency",
        "cultura",
        "--url",
        "https://www.gov.br/cultura/++api++/pt-br/assuntos/noticias/@search",
        "-",
    )
    data = json.loads(out)
    assert code == 0 and [d["title"] for d in data] == [
        "Lei Rouanet bate recorde de projetos aprovados em 2025",
        "Inscrições abertas para o Prêmio Funarte de Artes Visuais",
    ]
    assert set(data[0]) == {"title", "url", "published_at", "updated_at", "tags", "image_url", "content"}
    assert data[0]["published_at"] == "2026-03-10T14:05:07-03:00"
    assert data[0]["tags"] == ["Lei Rouanet", "Fomento", "Economia criativa"]
    assert data[0]["content"].startswith("O Ministério da Cultura aprovou **14 mil projetos**")


def test_parse_listing_ebc_and_errors(capsys):
    code, out, _ = run(
        capsys,
        "parse-listing",
        "--url",
        "https://agenciabrasil.ebc.com.br/ultimas",
        str(PAGES / "ebc_listing_agenciabrasil.html"),
    )
    assert code == 0 and [d["published_at"] for d in json.loads(out)] == [
        "2026-11-27T14:30:00-03:00",
        "2026-11-27T13:05:00-03:00",
    ]
    code, out, _ = run(
        capsys,
        "parse-listing",
        "--url",
        "https://www.gov.br/turismo/pt-br/noticias",
        str(PAGES / "listing_empty.html"),
    )
    assert (code, json.loads(out)) == (0, [])
    for fixture, category in (
        ("listing_unknown.html", "html_changed"),
        ("anti_bot_cloudflare.html", "anti_bot"),
        ("plone6_malformed.json", "html_changed"),
    ):
        code, out, err = run(
            capsys, "parse-listing", "--url", "https://www.gov.br/x/pt-br/noticias", str(PAGES / fixture)
        )
        assert code == 2 and out == "" and err.startswith(f"{category}: ") and err.count("\n") == 1


def test_console_script_subprocess():
    script = REPO / ".venv" / "bin" / "dgb"
    env = dict(os.environ, PYTHONPATH=str(REPO / "include"))
    base = [str(script)] if script.exists() else [sys.executable, "-m", "dgb.cli"]
    ok = subprocess.run(
        base + ["parse-article", "--agency", "mec", "--url", MEC_URL, str(PAGES / "article_jsonld.html")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=REPO,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["published_at"] == "2026-02-10T17:05:07-03:00"
    blocked = subprocess.run(
        base
        + ["parse-article", "--agency", "mec", "--url", MEC_URL, str(PAGES / "anti_bot_cloudflare.html")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=REPO,
    )
    assert blocked.returncode == 2 and blocked.stdout == ""
    assert blocked.stderr.startswith("anti_bot: ") and blocked.stderr.count("\n") == 1
