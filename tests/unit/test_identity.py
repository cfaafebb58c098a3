"""Identity helpers: slug, unique_id, normalise_text, content_hash."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from dgb.scraper.identity import content_hash, normalise_text, slugify_title, unique_id

BRT = ZoneInfo("America/Sao_Paulo")
TITLE = "Governo anuncia R$ 1,2 bilhão para escolas em tempo integral"


def test_slugify_ascii_lowercase_hyphens():
    assert slugify_title(TITLE) == "governo-anuncia-r-1-2-bilhao-para-escolas-em-tempo-integral"
    assert slugify_title("  Ação “Pé-de-Meia” começa já!  ") == "acao-pe-de-meia-comeca-ja"
    assert slugify_title("???") == ""


def test_slugify_caps_at_100_chars_on_a_word_boundary():
    long_title = " ".join(["Ministério da Integração e do Desenvolvimento Regional"] * 5)
    slug = slugify_title(long_title)
    assert len(slug) <= 100
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", slug)
    assert slug.startswith("ministerio-da-integracao-e-do-desenvolvimento-regional-ministerio")
    assert not slug.endswith("-")
    assert len(slugify_title("a" * 150)) == 100


def test_unique_id_format_and_documented_hash_input():
    published = datetime(2026, 2, 10, 17, 5, 7, tzinfo=BRT)
    expected_suffix = hashlib.md5(f"mec_2026-02-10T17:05:07-03:00_{TITLE}".encode()).hexdigest()[:6]
    uid = unique_id("mec", published, TITLE)
    assert uid == f"governo-anuncia-r-1-2-bilhao-para-escolas-em-tempo-integral_{expected_suffix}"
    assert re.fullmatch(r"[a-z0-9-]{1,100}_[0-9a-f]{6}", uid)


def test_unique_id_same_instant_any_offset_and_naive_is_brasilia():
    brt = datetime(2026, 2, 10, 17, 5, 7, tzinfo=BRT)
    utc = datetime(2026, 2, 10, 20, 5, 7, tzinfo=timezone.utc)
    fixed = datetime(2026, 2, 10, 17, 5, 7, tzinfo=timezone(timedelta(hours=-3)))
    naive = datetime(2026, 2, 10, 17, 5, 7)
    assert unique_id("mec", brt, TITLE) == unique_id("mec", utc, TITLE) == unique_id("mec", fixed, TITLE)
    assert unique_id("mec", naive, TITLE) == unique_id("mec", brt, TITLE)


def test_unique_id_depends_on_agency_date_and_title():
    published = datetime(2026, 2, 10, 17, 5, tzinfo=BRT)
    base = unique_id("mec", published, TITLE)
    assert unique_id("saude", published, TITLE) != base
    assert unique_id("mec", published + timedelta(minutes=1), TITLE) != base
    assert unique_id("mec", published, "???").startswith("sem-titulo_")


def test_normalise_text():
    assert normalise_text("  Educação\n\n  em\ttempo   integral \u00a0") == "Educação em tempo integral"
    assert normalise_text("Educac\u0327a\u0303o") == "Educação"  # decomposed -> NFC
    assert normalise_text(None) == ""


def test_content_hash_is_16_hex_stable_and_whitespace_insensitive():
    h = content_hash(TITLE, "Primeiro parágrafo.\n\nSegundo parágrafo.")
    expected = hashlib.sha256(f"{TITLE}\nPrimeiro parágrafo. Segundo parágrafo.".encode()).hexdigest()[:16]
    assert h == expected
    assert re.fullmatch(r"[0-9a-f]{16}", h)
    assert content_hash(f"  {TITLE} ", "Primeiro   parágrafo.\nSegundo parágrafo.\n") == h
    assert content_hash(TITLE, "Primeiro parágrafo. Segundo parágrafo!") != h
    assert content_hash("Outro título", "Primeiro parágrafo.\n\nSegundo parágrafo.") != h
