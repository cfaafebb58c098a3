"""The gov.br portal frame every classic page sits in (menu, breadcrumbs, footer), and the site's
plain pages: the mirror's index, an agency's home, the error page."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from dgb_dev.mirror.content import GOVBR, MirrorAgency, esc

if TYPE_CHECKING:  # the Site calls these renderers with itself; only its public methods are used
    from dgb_dev.mirror.site import Site


def index_page(site: Site, base: str) -> str:
    links = []
    for key in site.agency_keys():
        ag = site.agency_for(key)
        links.append(f'<li><a href="{esc(site.listing_url(base, ag))}">{esc(ag.name)}</a> ({key})</li>')
    return (
        f'<!DOCTYPE html><html lang="pt-br"><head><meta charset="utf-8"><title>dgb mirror</title></head>'
        f"<body><h1>dgb mirror</h1><ul>{''.join(links)}</ul></body></html>"
    )


def home_page(site: Site, base: str, ag: MirrorAgency) -> str:
    body = f'<p><a href="{esc(site.listing_url(base, ag))}">Notícias</a></p>'
    return portal_page(base, ag, ag.name, body)


def portal_page(
    base: str,
    ag: MirrorAgency,
    title: str,
    content: str,
    *,
    head: str = "",
    canonical: str = "",
    breadcrumbs: Iterable[tuple[str, str | None]] = (),
    body_class: str = "template-listing_view",
) -> str:
    root = f"{base}/{GOVBR}/{ag.key}"
    menu = [
        ("Assuntos", f"{root}/pt-br/assuntos"),
        ("Notícias", f"{root}/{ag.path}"),
        ("Acesso à Informação", f"{root}/pt-br/acesso-a-informacao"),
        ("Composição", f"{root}/pt-br/composicao"),
        ("Canais de Atendimento", f"{root}/pt-br/canais_atendimento"),
    ]
    menu_html = "".join(f'<li><a href="{esc(u)}">{esc(t)}</a></li>' for t, u in menu)
    crumbs = [f'<li><a href="{esc(root)}/pt-br">Página Inicial</a></li>']
    for text, href in breadcrumbs:
        crumbs.append(
            f'<li><a href="{esc(href)}">{esc(text)}</a></li>'
            if href
            else f'<li class="active"><span>{esc(text)}</span></li>'
        )
    canon = f'<link rel="canonical" href="{esc(canonical)}">' if canonical else ""
    return f"""<!DOCTYPE html>
<html lang="pt-br" xml:lang="pt-br">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)} — {esc(ag.name)}</title>
{canon}
{head}
</head>
<body class="{body_class} site-{esc(ag.key)}">
<div id="wrapper">
<header id="header" role="banner">
<div id="barra-brasil"><a href="{base}/{GOVBR}">gov.br</a> \
<a href="{base}/{GOVBR}/pt-br/orgaos-do-governo">Órgãos do Governo</a></div>
<div id="portal-title"><a href="{esc(root)}/pt-br">{esc(ag.name)}</a></div>
<nav id="portal-globalnav" class="portal-menu"><ul>{menu_html}</ul></nav>
</header>
<main id="main" role="main"><div id="portal-column-content">
<nav class="portal-breadcrumbs" id="portal-breadcrumbs" aria-label="Você está aqui:">\
<ol>{"".join(crumbs)}</ol></nav>
<div id="content">
{content}
</div>
</div></main>
<footer id="portal-footer">
<div class="footer-links"><a href="{esc(root)}/pt-br/acesso-a-informacao">Acesso à Informação</a>
<a href="{base}/{GOVBR}/pt-br/termos-de-uso">Termos de Uso</a> \
<a href="{esc(root)}/pt-br/canais_atendimento/ouvidoria">Ouvidoria</a></div>
<p>Todo o conteúdo deste site está publicado sob a licença Creative Commons \
Atribuição-SemDerivações 3.0 Não Adaptada.</p>
</footer>
</div>
</body>
</html>
"""


def error_page(base: str, status: int) -> str:
    title = "Este conteúdo foi removido" if status == 410 else "Página não encontrada"
    return (
        '<!DOCTYPE html><html lang="pt-br"><head><meta charset="utf-8">'
        f"<title>{title} — gov.br</title></head>"
        f'<body><div id="content"><h1 class="documentFirstHeading">{title}</h1>'
        f"<p>Desculpe, não foi possível encontrar o conteúdo solicitado.</p>"
        f'<p><a href="{base}/{GOVBR}">Ir para o gov.br</a></p></div></body></html>'
    )
