"""Pure parsers on the HTML/JSON fixtures in tests/fixtures/pages."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from dgb.scrape_errors import CATEGORIES, AntiBotError, ScrapeError, detect_anti_bot, error_for_status
from dgb.scraper.dates import parse_br_datetime, parse_iso_datetime
from dgb.scraper.identity import content_hash, unique_id
from dgb.scraper.markup import absolute_url, decode_bytes
from dgb.scraper.parsers import (
    detect_source,
    parse_article_bytes,
    parse_article_html,
    parse_ebc_article,
    parse_ebc_listing,
    parse_listing_html,
    parse_listing_page,
    parse_plone6_article,
    parse_plone6_search,
)
from dgb.scraper.plone6 import parse_plone6_item

PAGES = Path(__file__).resolve().parents[2] / "fixtures" / "pages"
BRT = ZoneInfo("America/Sao_Paulo")
MEC_NEWS = "https://www.gov.br/mec/pt-br/assuntos/noticias"
CULTURA_API = "https://www.gov.br/cultura/++api++/pt-br/assuntos/noticias"


def page(name: str) -> str:
    return (PAGES / name).read_text(encoding="utf-8")


def brt(*args: int) -> datetime:
    return datetime(*args, tzinfo=BRT)


def assert_category(exc: pytest.ExceptionInfo, category: str) -> None:
    assert exc.value.category == category
    assert str(exc.value).startswith(f"{category}: ")


# --- errors -------------------------------------------------------------------------------


def test_scrape_error_categories():
    assert CATEGORIES == (
        "network_error",
        "anti_bot",
        "empty_content",
        "url_broken",
        "html_changed",
        "unknown",
    )
    err = ScrapeError("anti_bot", "page is a Cloudflare challenge")
    assert (err.category, str(err)) == ("anti_bot", "anti_bot: page is a Cloudflare challenge")
    assert AntiBotError("x").category == "anti_bot" and isinstance(AntiBotError("x"), ScrapeError)
    with pytest.raises(ValueError):
        ScrapeError("bogus", "x")
    assert error_for_status(404).category == "url_broken"
    assert error_for_status(410).category == "url_broken"
    assert error_for_status(503).category == "network_error"
    assert error_for_status(200) is None


def test_detect_anti_bot():
    assert detect_anti_bot(page("anti_bot_cloudflare.html"))
    assert detect_anti_bot("<html><head><title>Attention Required! | Cloudflare</title></head></html>")
    assert detect_anti_bot('<div class="cf-browser-verification">wait</div>')
    assert detect_anti_bot('<html><title>Verificação</title><div class="g-recaptcha"></div></html>')
    assert detect_anti_bot(b"<title>Just a moment...</title>")
    assert not detect_anti_bot(page("article_jsonld.html"))
    assert not detect_anti_bot(page("listing_tileitem.html"))
    # Cloudflare's script injected into a real page is not a challenge.
    real = page("article_jsonld.html").replace(
        "</body>", '<script src="/cdn-cgi/challenge-platform/scripts/jsd/main.js"></script></body>'
    )
    assert not detect_anti_bot(real)
    script = '<script src="/cdn-cgi/challenge-platform/scripts/jsd/main.js"></script></body>'
    for fixture in ("ebc_article_tvbrasil.html", "ebc_listing_agenciabrasil.html"):  # EBC's real markup
        assert not detect_anti_bot(page(fixture).replace("</body>", script))
    assert not detect_anti_bot("")


# --- dates --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("10/02/2026 17h05", brt(2026, 2, 10, 17, 5)),
        ("27/11/2026 - 14:30", brt(2026, 11, 27, 14, 30)),
        (" 02/03/2026  08h30  Notícia ", brt(2026, 3, 2, 8, 30)),
        ("06/02/2026", brt(2026, 2, 6, 0, 0)),
        ("sem data", None),
    ],
)
def test_parse_br_datetime(text, expected):
    result = parse_br_datetime(text)
    assert result == expected
    if result:
        assert result.isoformat().endswith("-03:00")


def test_parse_iso_datetime_converts_to_brasilia():
    assert parse_iso_datetime("2026-03-10T17:05:07+00:00").isoformat() == "2026-03-10T14:05:07-03:00"
    assert parse_iso_datetime("2026-02-10T17:05:07-03:00").isoformat() == "2026-02-10T17:05:07-03:00"
    assert parse_iso_datetime("None") is None and parse_iso_datetime(None) is None


# --- classic listing ----------------------------------------------------------------------


def test_tileitem_listing_items_and_next_page():
    result = parse_listing_page(page("listing_tileitem.html"), f"{MEC_NEWS}?b_start:int=30", "mec")
    assert [i.title for i in result.items] == [
        "Enem 2026 tem inscrições abertas a partir desta segunda-feira",
        "Sisu divulga resultado da chamada regular",
        "Pé-de-Meia: pagamento da parcela de fevereiro começa nesta segunda",
    ]
    first, second, third = result.items
    assert first.url == f"{MEC_NEWS}/2026/fevereiro/enem-2026-tem-inscricoes-abertas"
    assert first.published_at.isoformat() == "2026-02-10T16:40:00-03:00"
    assert first.category == "EDUCAÇÃO BÁSICA"
    assert (
        first.summary == "Participantes podem se inscrever até 21 de fevereiro pela Página do Participante."
    )
    assert first.image_url.endswith("/enem-2026-tem-inscricoes-abertas/@@images/image/thumb")
    assert (
        second.url == f"{MEC_NEWS}/2026/fevereiro/sisu-divulga-resultado-da-chamada-regular"
    )  # made absolute
    assert second.published_at == brt(2026, 2, 9, 9, 5)
    assert third.published_at.isoformat() == "2026-02-06T00:00:00-03:00"  # date only
    assert result.next_url == f"{MEC_NEWS}?b_start:int=60"
    urls = " ".join(i.url for i in result.items)
    assert "facebook" not in urls and "b_start" not in urls and "acesso-a-informacao" not in urls
    assert parse_listing_html(page("listing_tileitem.html"), MEC_NEWS, "mec") == result.items


def test_listing_with_icons_and_type_word_and_numbered_pagination():
    base = "https://www.gov.br/saude/pt-br/assuntos/noticias"
    result = parse_listing_page(page("listing_icons.html"), base, "saude")
    assert [(i.title, i.published_at) for i in result.items] == [
        ("Campanha de vacinação contra a gripe começa em todo o país", brt(2026, 3, 2, 8, 30)),
        ("Ministério da Saúde amplia envio de inseticidas aos estados", brt(2026, 2, 27, 0, 0)),
    ]
    assert result.items[0].category == "VACINAÇÃO"
    assert result.next_url == f"{base}?b_start:int=30"
    assert parse_listing_page(page("listing_icons.html"), f"{base}?b_start:int=60", "saude").next_url is None


@pytest.mark.parametrize(
    "fixture,base,expected",
    [
        (
            "listing_ul_noticias.html",
            "https://www.gov.br/fazenda/pt-br/assuntos/noticias",
            [
                (
                    "Receita abre consulta ao lote residual do Imposto de Renda",
                    "https://www.gov.br/fazenda/pt-br/assuntos/noticias/2026/fevereiro/receita-abre-consulta-ao-lote-residual",
                    "2026-02-12T00:00:00-03:00",
                ),
                (
                    "Arrecadação federal de janeiro bate recorde",
                    "https://www.gov.br/fazenda/pt-br/assuntos/noticias/2026/fevereiro/arrecadacao-federal-de-janeiro",
                    "2026-02-11T00:00:00-03:00",
                ),
            ],
        ),
        (
            "listing_entries.html",
            "https://www.gov.br/mma/pt-br/noticias",
            [
                (
                    "Brasil reduz desmatamento na Amazônia pelo terceiro ano seguido",
                    "https://www.gov.br/mma/pt-br/noticias/brasil-reduz-desmatamento-na-amazonia",
                    "2026-03-05T14:10:00-03:00",
                ),
                (
                    "Consulta pública do Plano Clima recebe contribuições até abril",
                    "https://www.gov.br/mma/pt-br/noticias/consulta-publica-plano-clima",
                    "2026-03-04T10:00:00-03:00",
                ),
            ],
        ),
        (
            "listing_div_item.html",
            "https://www.gov.br/defesa/pt-br/centrais-de-conteudo/noticias",
            [
                (
                    "Operação Acolhida completa oito anos",
                    "https://www.gov.br/defesa/pt-br/centrais-de-conteudo/noticias/operacao-acolhida-completa-oito-anos",
                    "2026-01-20T11:15:00-03:00",
                ),
                (
                    "Navio hidroceanográfico chega à Antártica",
                    "https://www.gov.br/defesa/pt-br/centrais-de-conteudo/noticias/navio-hidroceanografico-chega-a-antartica",
                    "2026-01-19T17:45:00-03:00",
                ),
            ],
        ),
    ],
)
def test_fallback_listing_shapes(fixture, base, expected):
    items = parse_listing_html(page(fixture), base, base.split("/")[3])
    assert [(i.title, i.url, i.published_at.isoformat()) for i in items] == expected


def test_fallback_pagination_link_is_next_url_not_an_item():
    base = "https://www.gov.br/defesa/pt-br/centrais-de-conteudo/noticias"
    result = parse_listing_page(page("listing_div_item.html"), base, "defesa")
    assert result.next_url == f"{base}?b_start:int=20"
    assert len(result.items) == 2


def test_empty_listing_is_valid_and_unknown_markup_is_html_changed():
    assert (
        parse_listing_html(page("listing_empty.html"), "https://www.gov.br/turismo/pt-br/noticias", "turismo")
        == []
    )
    with pytest.raises(ScrapeError) as exc:
        parse_listing_html(
            page("listing_unknown.html"), "https://www.gov.br/cidades/pt-br/noticias", "cidades"
        )
    assert_category(exc, "html_changed")
    with pytest.raises(ScrapeError) as exc:
        parse_listing_html(page("anti_bot_cloudflare.html"), MEC_NEWS, "mec")
    assert_category(exc, "anti_bot")


def test_navigation_links_are_not_items():
    base = "https://www.gov.br/defesa/pt-br/centrais-de-conteudo/noticias"
    items = parse_listing_html(page("listing_nav_links.html"), base, "defesa")
    # "Menu" (nav-toggle), "Clique Aqui" (btn), "Leia mais »", links under navbar-nav / menu-lateral / nav,
    # a "button" link and a pagination-next link are skipped; the items keep their headline links.
    assert [(i.title, i.url, i.published_at) for i in items] == [
        (
            "Fragata participa de exercício no Atlântico Sul",
            f"{base}/fragata-participa-de-exercicio",
            brt(2026, 1, 21, 9, 30),
        ),
        (
            "Concurso da Marinha abre inscrições",
            f"{base}/concurso-da-marinha-abre-inscricoes",
            brt(2026, 1, 20, 16, 0),
        ),
    ]


@pytest.mark.parametrize(
    "link, nav",
    [
        ('<a class="nav-link" href="/x">Ministério anuncia plano</a>', True),
        ('<a class="navbar-brand" href="/x">Ministério anuncia plano</a>', True),
        ('<a class="main-menu__item" href="/x">Ministério anuncia plano</a>', True),
        ('<a class="btn-outline" href="/x">Ministério anuncia plano</a>', True),
        ('<span class="button-wrap"><a href="/x">Ministério anuncia plano</a></span>', True),
        ('<a href="/x">MENU</a>', True),
        ('<a href="/x">Clique aqui!</a>', True),
        ('<a href="/x">» Leia mais...</a>', True),
        ('<a href="/x">Saiba Mais</a>', True),
        ('<a class="summary url" href="/x">Leia mais sobre o novo plano de safra</a>', False),
        ('<a class="canvas-title" href="/x">Menu da merenda escolar muda em março</a>', False),
        ('<a class="tileHeadline" href="/x">Ministério anuncia plano</a>', False),
    ],
)
def test_is_navigation_link(link, nav):
    from dgb.scraper.listing import is_navigation_link
    from dgb.scraper.markup import parse_html

    tree = parse_html(f'<html><body><div class="item">{link}</div></body></html>')
    assert is_navigation_link(tree.css_first("a"), tree.css_first("div.item")) is nav


# --- classic article ----------------------------------------------------------------------


def test_article_with_jsonld_graph():
    url = f"{MEC_NEWS}/2026/fevereiro/governo-anuncia-r-1-2-bilhao-para-escolas-em-tempo-integral"
    art = parse_article_html(page("article_jsonld.html"), url, "mec")
    assert art.title == "Governo anuncia R$ 1,2 bilhão para escolas em tempo integral"
    assert art.subtitle == "Recursos vão ampliar 500 mil matrículas em todo o país até o fim de 2026"
    assert art.category == art.editorial_lead == "EDUCAÇÃO INTEGRAL"
    assert art.published_at.isoformat() == "2026-02-10T17:05:07-03:00"  # JSON-LD wins over the byline
    assert art.updated_at.isoformat() == "2026-02-11T09:12:44-03:00"
    assert art.image_url == f"{url}/@@images/image"
    assert art.video_url is None
    assert art.content == (
        "O Ministério da Educação (MEC) anunciou nesta terça-feira, 10 de fevereiro, investimento de R$ 1,2 "
        "bilhão no Programa Escola em Tempo Integral.\n\n"
        "Segundo o ministro, a meta é que **todas as redes estaduais** tenham ao menos uma escola de tempo "
        "integral por município.\n\n## Como aderir\n\n- Acesse o Simec;\n- Preencha o termo de compromisso."
    )
    # Production never read JSON-LD inside @graph: its id took the byline's minute-precision text date.
    assert art.id_date == "2026-02-10T17:05:00-03:00"
    assert art.unique_id == unique_id("mec", "2026-02-10T17:05:00-03:00", art.title)
    assert art.unique_id.startswith("governo-anuncia-r-1-2-bilhao-para-escolas-em-tempo-integral_")
    assert art.content_hash == content_hash(art.title, art.content)


def test_article_with_malformed_jsonld_uses_regex_dates():
    art = parse_article_html(
        page("article_malformed_jsonld.html"),
        "https://www.gov.br/mcti/pt-br/noticias/2026/03/edital-mais-ciencia",
        "mcti",
    )
    assert art.title == 'Ministério lança edital "Mais Ciência na Escola" com R$ 100 milhões'
    assert art.published_at.isoformat() == "2026-03-03T11:20:00-03:00"
    assert art.updated_at.isoformat() == "2026-03-03T15:45:10-03:00"  # only in the broken JSON-LD


def test_article_with_byline_spans_only():
    art = parse_article_html(
        page("article_byline_only.html"),
        "https://www.gov.br/agricultura/pt-br/assuntos/noticias/safra-recorde",
        "agricultura",
    )
    assert art.published_at.isoformat() == "2026-03-12T10:30:00-03:00"
    assert art.updated_at.isoformat() == "2026-03-12T18:02:00-03:00"
    assert art.category is None and art.editorial_lead is None
    assert "Publicado em" not in art.content


def test_article_with_publicado_em_free_text():
    art = parse_article_html(
        page("article_publicado_text.html"),
        "https://www.gov.br/trabalho-e-emprego/pt-br/noticias/seguro",
        "trabalho-e-emprego",
    )
    assert art.title == "Seguro-desemprego passa a ser pedido apenas pelo aplicativo"
    assert art.published_at == brt(2026, 1, 15, 14, 22)
    assert art.updated_at == brt(2026, 1, 16, 8, 0)
    assert art.subtitle is None
    assert art.content.startswith("A partir de fevereiro, o pedido do seguro-desemprego")
    assert art.content.count("\n\n") == 1


def test_article_rich_content_cleaning_resolveuid_video_tags():
    url = "https://www.gov.br/povosindigenas/pt-br/assuntos/noticias/2026/04/brasil-sedia-encontro"
    art = parse_article_html(page("article_rich.html"), url, "povosindigenas")
    root = "https://www.gov.br/povosindigenas/resolveuid/"
    assert art.image_url == root + "3f2a9c1be4d34e6f8a0b1c2d3e4f5a6b/@@images/image/large"
    assert art.video_url == "https://www.youtube.com/embed/dQw4w9WgXcQ"
    assert art.tags == ["Saúde", "Povos Indígenas", "Cooperação Internacional"]
    assert art.category == "SAÚDE INDÍGENA"
    for unwanted in (
        "Compartilhe",
        "Assessoria",
        "imprensa@",
        "2020-4000",
        "Facebook",
        "analytics",
        "width: 100%",
        "Tags",
        "Você está aqui",
        "Publicado em",
    ):
        assert unwanted not in art.content
    assert (
        "O encontro reúne, até quinta-feira (9), representantes de 12 países da América Latina."
        in art.content
    )
    assert (
        f"[Política Nacional de Atenção à Saúde dos Povos Indígenas]({root}a1b2c3d4e5f60718293a4b5c6d7e8f90)"
        in art.content
    )
    assert art.content.endswith("O evento é transmitido pelo canal do ministério no YouTube.")
    assert "\n\n\n" not in art.content


def test_article_errors():
    with pytest.raises(ScrapeError) as exc:
        parse_article_html(page("anti_bot_cloudflare.html"), f"{MEC_NEWS}/x", "mec")
    assert_category(exc, "anti_bot")
    with pytest.raises(ScrapeError) as exc:
        parse_article_html(page("article_empty.html"), f"{MEC_NEWS}/x", "mec")
    assert_category(exc, "empty_content")
    for listing in ("listing_tileitem.html", "listing_empty.html"):  # a listing is not an article
        with pytest.raises(ScrapeError) as exc:
            parse_article_html(page(listing), MEC_NEWS, "mec")
        assert_category(exc, "empty_content")


def test_article_without_date_uses_fallback():
    html = page("article_publicado_text.html").replace(
        "Publicado em 15/01/2026 14h22 Atualizado em 16/01/2026 08h00", ""
    )
    art = parse_article_html(
        html, "https://www.gov.br/trabalho-e-emprego/pt-br/noticias/seguro", "trabalho-e-emprego"
    )
    assert art.published_at is None and art.unique_id is None
    art.with_published_at(brt(2026, 1, 15))
    assert art.unique_id == unique_id("trabalho-e-emprego", brt(2026, 1, 15), art.title)
    fallback = parse_article_html(
        html, "https://www.gov.br/x/pt-br/y", "x", published_fallback=brt(2026, 1, 14)
    )
    assert fallback.published_at == brt(2026, 1, 14)


def test_decoding_cp1252_and_binary():
    data = (PAGES / "article_cp1252.html").read_bytes()
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    art = parse_article_bytes(data, "https://www.gov.br/mec/pt-br/pronatec", "mec")
    assert art.title == "Inscrições para o Pronatec estão abertas até sexta-feira"
    assert art.subtitle == "São 200 mil vagas em cursos técnicos – gratuitos"
    assert "“Qualifica Mais”" in art.content
    assert decode_bytes("Educação".encode(), charset="iso-8859-1") == "EducaÃ§Ã£o"  # declared wins
    assert decode_bytes(b'<meta charset="windows-1252"><p>Educa\xe7\xe3o</p>').endswith("Educação</p>")
    with pytest.raises(ScrapeError) as exc:
        parse_article_bytes((PAGES / "binary_blob.bin").read_bytes(), "https://www.gov.br/mec/pt-br/x", "mec")
    assert_category(exc, "html_changed")
    assert "undecodable" in str(exc.value)


def test_absolute_url_resolveuid_rule():
    page_url = "https://www.gov.br/mec/pt-br/assuntos/noticias/2026/02/x"
    assert (
        absolute_url("../../resolveuid/abc/@@images/image", page_url, "mec")
        == "https://www.gov.br/mec/resolveuid/abc/@@images/image"
    )
    assert absolute_url("resolveuid/abc", page_url) == "https://www.gov.br/mec/resolveuid/abc"
    assert (
        absolute_url("https://cdn.gov.br/resolveuid/abc", page_url, "mec")
        == "https://cdn.gov.br/resolveuid/abc"
    )
    assert (
        absolute_url("imagem.jpg", page_url, "mec")
        == "https://www.gov.br/mec/pt-br/assuntos/noticias/2026/02/imagem.jpg"
    )
    assert absolute_url("javascript:void(0)", page_url) is None


# --- Plone 6 ------------------------------------------------------------------------------


def test_plone6_search_two_pages():
    first = parse_plone6_search(page("plone6_search_page1.json"), f"{CULTURA_API}/@search", "cultura")
    assert first.next_url == (
        f"{CULTURA_API}/@search?portal_type=News%20Item&sort_on=effective"
        "&sort_order=descending&b_start=2&b_size=2&fullobjects=1"
    )
    rouanet, funarte = first.items
    assert rouanet.title == "Lei Rouanet bate recorde de projetos aprovados em 2025"
    assert (
        rouanet.url
        == "https://www.gov.br/cultura/pt-br/assuntos/noticias/2026/03/lei-rouanet-bate-recorde-de-projetos-aprovados"
    )
    assert rouanet.published_at.isoformat() == "2026-03-10T14:05:07-03:00"
    assert rouanet.updated_at.isoformat() == "2026-03-11T09:00:00-03:00"
    assert rouanet.tags == ["Lei Rouanet", "Fomento", "Economia criativa"]
    assert rouanet.image_url == f"{rouanet.url}/@@images/image-1200-5e1f.jpeg"
    assert rouanet.content == (
        "O Ministério da Cultura aprovou **14 mil projetos** pela Lei Rouanet em 2025.\n\n## Regiões\n\n"
        "O Nordeste teve o maior crescimento, com [alta de 40%](https://www.gov.br/cultura/pt-br/rouanet-nordeste).\n\n"
        "Os dados estão no painel Versalic."
    )
    assert funarte.image_url == f"{funarte.url}/@@images/image-800-aa11.jpeg"
    assert funarte.content == "O edital oferece 50 prêmios de R$ 40 mil.\n\nInscrições até 30 de abril."
    assert funarte.summary is None
    second = parse_plone6_search(page("plone6_search_page2.json"), first.next_url, "cultura")
    assert second.next_url is None
    assert [i.title for i in second.items] == ["Cinemateca restaura acervo de Glauber Rocha"]
    assert second.items[0].published_at == brt(2026, 3, 5, 12, 0)
    article = rouanet.to_article("cultura")
    assert article.subtitle == "Foram 14 mil propostas habilitadas, alta de 18% sobre o ano anterior"
    assert article.category == "FOMENTO"
    # production hashed the API's effective text as given (UTC here), not the Brasília time
    assert article.unique_id == unique_id("cultura", "2026-03-10T17:05:07+00:00", rouanet.title)


def test_plone6_errors_and_single_object():
    with pytest.raises(ScrapeError) as exc:
        parse_plone6_search(page("plone6_malformed.json"), CULTURA_API, "cultura")
    assert_category(exc, "html_changed")
    assert "valid JSON" in str(exc.value)
    with pytest.raises(ScrapeError) as exc:
        parse_plone6_search('{"message": "Not found"}', CULTURA_API, "cultura")
    assert_category(exc, "html_changed")
    with pytest.raises(ScrapeError) as exc:
        parse_plone6_search(page("anti_bot_cloudflare.html"), CULTURA_API, "cultura")
    assert_category(exc, "anti_bot")
    import json

    item = json.loads(page("plone6_search_page2.json"))["items"][0]
    art = parse_plone6_article(json.dumps(item), item["@id"], "cultura")
    assert (
        art.url
        == "https://www.gov.br/cultura/pt-br/assuntos/noticias/2026/03/cinemateca-restaura-acervo-de-glauber-rocha"
    )
    assert art.tags == ["Cinema", "Patrimônio"]


def test_plone6_text_variants_are_kept():
    base = f"{CULTURA_API}/@search"
    item = {
        "@id": "https://www.gov.br/cultura/++api++/pt-br/assuntos/noticias/a",
        "title": "A",
        "effective": "2026-03-10T17:05:07+00:00",
        "text": "Conteúdo como string simples.",
    }
    assert parse_plone6_item(item, base).content == "Conteúdo como string simples."
    item["text"] = "<p>Parágrafo <strong>um</strong>.</p><p>Dois.</p>"
    assert parse_plone6_item(item, base).content == "Parágrafo **um**.\n\nDois."
    item["text"] = {"data": "<p>Rico</p>", "content-type": "text/html", "encoding": "utf-8"}
    assert parse_plone6_item(item, base).content == "Rico"
    blocks = {
        "t": {"@type": "title"},
        "b1": {"@type": "text", "text": "Bloco text em texto puro.\n\nSegundo parágrafo."},
        "b2": {"@type": "textBlock", "text": "<p>Bloco <em>textBlock</em> em HTML.</p>"},
        "b3": {"@type": "textBlock", "text": "Bloco textBlock em texto puro."},
        "b4": {"@type": "text", "text": {"blocks": [{"text": "Draft.js"}], "entityMap": {}}},
        "b5": {"@type": "slate", "plaintext": "Slate sem value."},
    }
    item = {
        **item,
        "text": "ignorado: os blocos têm texto",
        "blocks": blocks,
        "blocks_layout": {"items": ["t", "b1", "b2", "b3", "b4", "b5"]},
    }
    assert parse_plone6_item(item, base).content == (
        "Bloco text em texto puro.\n\nSegundo parágrafo.\n\nBloco *textBlock* em HTML.\n\n"
        "Bloco textBlock em texto puro.\n\nDraft.js\n\nSlate sem value."
    )
    del item["blocks_layout"]  # without a layout the blocks' own order is used
    assert parse_plone6_item(item, base).content.startswith("Bloco text em texto puro.")


@pytest.mark.parametrize(
    "effective, id_date, published",
    [
        (
            "2026-03-10T17:05:07+00:00",
            "2026-03-10T17:05:07+00:00",
            "2026-03-10T14:05:07-03:00",
        ),  # offset kept
        ("2026-03-10T14:05:07-03:00", "2026-03-10T14:05:07-03:00", "2026-03-10T14:05:07-03:00"),
        ("2026-03-10T17:05:07Z", "2026-03-10T17:05:07+00:00", "2026-03-10T14:05:07-03:00"),
        (
            "2026-03-10T17:05:07.250000+00:00",
            "2026-03-10T17:05:07.250000+00:00",
            "2026-03-10T14:05:07.250000-03:00",
        ),
        ("2026-03-10T14:05", "2026-03-10T14:05:00", "2026-03-10T14:05:00-03:00"),  # naive stays naive
        (None, None, None),
        ("None", None, None),
    ],
)
def test_plone6_id_date_is_effective_as_the_api_gives_it(effective, id_date, published):
    item = {
        "@id": "https://www.gov.br/cultura/++api++/pt-br/assuntos/noticias/a",
        "title": "A",
        "effective": effective,
        "text": "Texto.",
    }
    parsed = parse_plone6_item(item, f"{CULTURA_API}/@search")
    assert parsed.id_date == id_date
    assert (parsed.published_at.isoformat() if parsed.published_at else None) == published
    article = parsed.to_article("cultura")
    assert article.id_date == id_date and article.published_at == parsed.published_at


# --- EBC ----------------------------------------------------------------------------------

AB_URL = "https://agenciabrasil.ebc.com.br/economia/noticia/2026-11/ipca-15-desacelera-em-novembro"
TV_URL = "https://tvbrasil.ebc.com.br/caminhos-da-reportagem/2026/11/a-rota-do-cafe"


def test_ebc_listing_real_shapes():
    result = parse_ebc_listing(
        page("ebc_listing_agenciabrasil.html"), "https://agenciabrasil.ebc.com.br/ultimas"
    )
    # a.capa-noticia cards with /noticia/ links; the header "Menu", the "Clique Aqui" button, a /tags/ link
    # and the repeated "Leia mais" link of a card are not items.
    assert [(i.title, i.url, i.published_at.isoformat()) for i in result.items] == [
        ("IPCA-15 desacelera para 0,25% em novembro", AB_URL, "2026-11-27T14:30:00-03:00"),
        (
            "SUS amplia oferta de exames de imagem",
            "https://agenciabrasil.ebc.com.br/saude/noticia/2026-11/sus-amplia-oferta-de-exames",
            "2026-11-27T13:05:00-03:00",
        ),
    ]
    assert result.items[0].image_url == "https://imagens.ebc.com.br/ipca15-mercado-thumb.jpg"  # data-echo
    assert result.next_url == "https://agenciabrasil.ebc.com.br/ultimas?page=1"
    tv = parse_ebc_listing(page("ebc_listing_tvbrasil.html"), "https://tvbrasil.ebc.com.br/ultimas?page=3")
    assert [(i.title, i.url, i.published_at) for i in tv.items] == [
        ("A rota do café especial no Sul de Minas", TV_URL, brt(2026, 11, 26, 22, 0)),
        (
            "Feira de ciências reúne escolas do DF",
            "https://tvbrasil.ebc.com.br/reporter-brasil/2026/11/feira-de-ciencias",
            brt(2026, 11, 26),
        ),
    ]  # "Ver mais" (a nav-classed link in an h3.heading) is not an item
    assert tv.next_url == "https://tvbrasil.ebc.com.br/ultimas?page=4"  # production asks page + 1 until empty
    # Past the last page: no items, no next page (not an error); a first page of unknown markup is.
    empty = parse_ebc_listing(
        "<html><body><p>Nenhum conteúdo</p></body></html>", "https://agenciabrasil.ebc.com.br/ultimas?page=9"
    )
    assert empty.items == [] and empty.next_url is None
    assert (
        parse_ebc_listing(
            '<div class="view view-ultimas"><div class="view-empty"></div></div>',
            "https://tvbrasil.ebc.com.br/ultimas",
        ).items
        == []
    )
    with pytest.raises(ScrapeError) as exc:
        parse_ebc_listing(page("listing_unknown.html"), "https://agenciabrasil.ebc.com.br/ultimas")
    assert_category(exc, "html_changed")


def test_ebc_agencia_brasil_article():
    art = parse_ebc_article(page("ebc_article_agenciabrasil.html"), AB_URL)
    assert art.agency == "agencia_brasil"  # production's key
    assert art.title == "IPCA-15 desacelera para 0,25% em novembro"
    assert (art.subtitle, art.editorial_lead, art.category) == (None, None, "Notícias")
    # /tags/ links, case-insensitive duplicates and the menu link dropped
    assert art.tags == ["IBGE", "Inflação"]
    assert art.published_at.isoformat() == "2026-11-27T14:30:12-03:00"  # JSON-LD wins over div.data
    assert art.id_date == "2026-11-27T14:30:12-03:00"
    assert art.updated_at.isoformat() == "2026-11-27T16:05:00-03:00"
    assert art.image_url == "https://imagens.ebc.com.br/ipca15-mercado.jpg"  # figure data-echo, not og:image
    assert art.video_url == "https://www.youtube.com/embed/abc123XYZ"
    assert art.content == (  # no pixel paragraph, no credit line
        "O Índice Nacional de Preços ao Consumidor Amplo 15 (IPCA-15) ficou em 0,25% em novembro, "
        "informou nesta quinta-feira o [IBGE](https://agenciabrasil.ebc.com.br/tags/ibge).\n\n"
        "Em outubro, a taxa havia sido de 0,41%.\n\n"
        "## Grupos\n\nO grupo alimentação e bebidas recuou 0,12%."
    )
    with pytest.raises(ScrapeError) as exc:
        parse_ebc_article(page("article_empty.html"), AB_URL)
    assert_category(exc, "empty_content")


def test_ebc_tv_brasil_article():
    tv = parse_ebc_article(page("ebc_article_tvbrasil.html"), TV_URL)
    assert tv.agency == "tvbrasil"
    assert tv.title == "A rota do café especial no Sul de Minas"  # the bare h1
    assert tv.editorial_lead == "Caminhos da Reportagem"  # h4.txtNoticias a
    assert tv.published_at == brt(2026, 11, 26, 22, 0) and tv.updated_at is None  # h5 "No AR em"
    assert tv.id_date == "2026-11-26T22:00:00-03:00"
    assert tv.video_url == "https://tvbrasil.ebc.com.br/sites/default/files/videos/rota-do-cafe.mp4"
    assert tv.image_url == "https://tvbrasil.ebc.com.br/sites/default/files/thumbnails/rota-do-cafe.jpg"
    assert tv.tags == ["café", "agricultura familiar"]
    assert tv.content == (  # restriction notice, "Clique aqui", "Tags:" dropped
        "O Caminhos da Reportagem desta semana percorre a Serra da Mantiqueira, onde pequenos "
        "produtores colhem cafés premiados.\n\nA equipe acompanha a colheita, a secagem e a torra "
        "em propriedades familiares."
    )
    # Production's own test shape: h5 text without the span, h4 without a link.
    html = """<html><body><h4 class="txtNoticias">Repórter Brasil</h4><h5>No AR em 01/01/2026 - 20:00</h5>
    <h1>Título da matéria</h1><article><p>Conteúdo do programa exibido hoje.</p></article></body></html>"""
    plain = parse_ebc_article(html, "https://tvbrasil.ebc.com.br/reporter-brasil/2026/01/x")
    assert (plain.editorial_lead, plain.id_date) == ("Repórter Brasil", "2026-01-01T20:00:00-03:00")
    # The local mirror's URLs carry the EBC host in the path; markup alone also tells TV Brasil apart.
    local = parse_ebc_article(html, "http://127.0.0.1:8090/tvbrasil.ebc.com.br/reporter-brasil/2026/01/x")
    assert local.agency == "tvbrasil" and local.title == "Título da matéria"
    by_markup = parse_ebc_article(html, "http://127.0.0.1:8090/x/y", "tvbrasil")
    assert by_markup.editorial_lead == "Repórter Brasil"


@pytest.mark.parametrize(
    "ld, date_div, id_date, published",
    [
        # JSON-LD: fromisoformat(...).isoformat(), offset as written (not converted), seconds as written
        (
            '{"@type": "NewsArticle", "datePublished": "2026-11-27T17:30:00+00:00"}',
            "27/11/2026 - 14:30",
            "2026-11-27T17:30:00+00:00",
            "2026-11-27T14:30:00-03:00",
        ),
        (
            '{"@type": "NewsArticle", "datePublished": "2026-11-27T17:30Z"}',
            "",
            "2026-11-27T17:30:00+00:00",
            "2026-11-27T14:30:00-03:00",
        ),
        (
            '[{"@type": "WebPage"},'
            ' {"@type": "NewsArticle", "datePublished": "2026-11-27T14:30:45.5-03:00"}]',
            "",
            "2026-11-27T14:30:45.500000-03:00",
            "2026-11-27T14:30:45.500000-03:00",
        ),
        # not read by production: @graph, a list @type, broken JSON
        # -> the page text, fixed -03:00, zero seconds
        (
            '{"@graph": [{"@type": "NewsArticle", "datePublished": "2026-11-27T14:30:45-03:00"}]}',
            "27/11/2026 - 14:30",
            "2026-11-27T14:30:00-03:00",
            "2026-11-27T14:30:45-03:00",
        ),
        (
            '{"@type": ["NewsArticle"], "datePublished": "2026-11-27T14:30:45-03:00"}',
            "Publicado em 27/11/2026 - 9:05",
            "2026-11-27T09:05:00-03:00",
            "2026-11-27T14:30:45-03:00",
        ),
        (
            '{"@type": "NewsArticle", "headline": "O "novo" IPCA",'
            ' "datePublished": "2026-11-27T14:30:45-03:00"}',
            "27/11/2026 - 14:30",
            "2026-11-27T14:30:00-03:00",
            "2026-11-27T14:30:45-03:00",
        ),
        # text only: date and time, else the date at midnight; the true instant keeps Brasília's history
        (
            None,
            "Publicado em 27/11/2026 - 14:30 Atualizado em 28/11/2026 - 10:00",
            "2026-11-27T14:30:00-03:00",
            "2026-11-27T14:30:00-03:00",
        ),
        (None, "Publicado em 27/11/2026", "2026-11-27T00:00:00-03:00", "2026-11-27T00:00:00-03:00"),
        (None, "Publicado em 15/01/2018 - 10:00", "2018-01-15T10:00:00-03:00", "2018-01-15T10:00:00-02:00"),
        (None, "Publicado em 27/11/2026 às 14h30", "2026-11-27T00:00:00-03:00", "2026-11-27T14:30:00-03:00"),
        (
            None,
            "Publicado em 27/11/2026 Atualizado em 28/11/2026 - 10:00",
            "2026-11-28T10:00:00-03:00",
            "2026-11-27T00:00:00-03:00",
        ),  # production's with-time pattern matches first, anywhere in the text
        (None, "", None, None),
    ],
)
def test_ebc_id_date_follows_production(ld, date_div, id_date, published):
    head = f'<script type="application/ld+json">{ld}</script>' if ld else ""
    html = (
        f'<html><head>{head}</head><body><h1 class="titulo-materia">O novo IPCA</h1>'
        f'<div class="data">{date_div}</div><div class="conteudo-noticia"><p>Texto da notícia.</p></div>'
        f"</body></html>"
    )
    art = parse_ebc_article(html, AB_URL)
    assert art.id_date == id_date
    assert (art.published_at.isoformat() if art.published_at else None) == published


def test_ebc_tv_brasil_id_date_reads_the_first_h5_only():
    html = """<html><body><h5>Programação de hoje</h5><h1>Título</h1><h5>No AR em 02/02/2026 - 23:00</h5>
    <article><p>Texto do programa desta semana.</p></article></body></html>"""
    art = parse_ebc_article(html, "https://tvbrasil.ebc.com.br/programa/2026/02/x")
    assert art.published_at == brt(2026, 2, 2, 23, 0)  # ours: the "No AR em" h5
    # production read the first h5 only: it found no date and stored no row; ours keeps the article,
    # its id from the Brasília wall clock (the rule for text dates)
    assert art.id_date == "2026-02-02T23:00:00-03:00"


def test_detect_source():
    assert detect_source(CULTURA_API, page("plone6_search_page1.json")) == "plone6"
    assert detect_source("https://agenciabrasil.ebc.com.br/ultimas", "<html></html>") == "ebc"
    assert (
        detect_source("http://127.0.0.1:8080/agenciabrasil/ultimas", page("ebc_listing_agenciabrasil.html"))
        == "ebc"
    )
    assert detect_source(MEC_NEWS, page("listing_tileitem.html")) == "classic"
    local = "http://127.0.0.1:8090/agenciabrasil.ebc.com.br/ultimas?page=7"
    assert detect_source(local, "<html></html>") == "ebc"
    from dgb.scraper.parsers import default_agency

    assert default_agency("https://agenciabrasil.ebc.com.br/ultimas") == "agencia_brasil"
    assert default_agency("http://127.0.0.1:8090/tvbrasil.ebc.com.br/ultimas") == "tvbrasil"
    assert default_agency(MEC_NEWS) == "mec"


def test_lead_image_and_credit_leave_the_body_but_later_images_stay():
    html = """<html><body><div id="content"><h1 class="documentFirstHeading">Título da notícia</h1>
    <div id="content-core"><div id="parent-fieldname-text">
    <figure><img src="resolveuid/abc123/@@images/image" alt="Título da notícia">\
<figcaption>Foto: Divulgação/MEC</figcaption></figure>
    <p>Foto: Fulano de Tal/Agência Gov</p>
    <p>Primeiro parágrafo do texto.</p>
    <p><img src="https://www.gov.br/mec/grafico.png" alt="gráfico"></p>
    <p>Segundo parágrafo.</p></div></div></div></body></html>"""
    art = parse_article_html(html, "https://www.gov.br/mec/pt-br/assuntos/noticias/x", "mec")
    assert art.image_url == "https://www.gov.br/mec/resolveuid/abc123/@@images/image"
    assert art.content.startswith("Primeiro parágrafo do texto.")
    assert "Foto:" not in art.content and "grafico.png" in art.content
