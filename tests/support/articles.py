"""The small article list of the local gov.br site most server tests scrape, the article records the
site serves, and the catalogue's entry of an agency pointed at that site."""

from __future__ import annotations

from dataclasses import replace

from dgb.agencies import load_agencies

ARTICLES = [
    # (agency, slug, title, published_at)
    (
        "mec",
        "mec-anuncia-novas-vagas",
        "MEC anuncia novas vagas no ensino técnico",
        "2026-11-20T10:15:00-03:00",
    ),
    ("mec", "enem-tem-recorde", "Enem tem recorde de inscritos confirmados", "2026-11-18T09:00:00-03:00"),
    ("mec", "pe-de-meia-paga", "Pé-de-Meia paga nova parcela a estudantes", "2026-11-12T16:40:00-03:00"),
    ("mec", "escolas-conectadas", "Escolas conectadas chegam a mais municípios", "2026-11-05T11:30:00-03:00"),
    ("mec", "merenda-escolar", "Programa amplia recursos para merenda escolar", "2026-10-28T08:00:00-03:00"),
    (
        "mulheres",
        "casa-da-mulher",
        "Nova Casa da Mulher Brasileira é inaugurada",
        "2026-11-19T14:00:00-03:00",
    ),
    ("mulheres", "ligue-180", "Ligue 180 amplia atendimento por mensagem", "2026-11-10T10:00:00-03:00"),
]


def article_dict(agency: str, slug: str, title: str, published: str) -> dict:
    return {
        "agency": agency,
        "url_slug": slug,
        "title": title,
        "published_at": published,
        "subtitle": f"Linha fina de {title.lower()}",
        "category": "Notícias",
        "tags": ["governo", agency],
        "content": f"{title}. Primeiro parágrafo com detalhes do anúncio.\n\n"
        "Segundo parágrafo com números e uma declaração do ministério.",
        "image_url": f"imagens/{slug}.jpg",
    }


def mirrored_agency(base, key, kind="html"):
    """The catalogue's entry (its listing path), pointed at the mirror, with a chosen site kind."""
    return replace(load_agencies(base_url=base)[key], site_kind=kind)
