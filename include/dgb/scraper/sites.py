"""The same-site rule of listing pages, applied when a listing is parsed.

A listing page names the articles the scraper will fetch next; a link that leaves the agency's site
(another host, an internal address, ``file://``, ``javascript:``, ``data:`` ...) is never an article of
that agency. Every listing parser (:mod:`listing`, :mod:`plone6`, :mod:`ebc`) ends with
:func:`keep_on_site`: such items, and such a next-page link, are dropped and counted in
``ListingPage.off_site_dropped``; the scrape run adds the count to its report
(``RunReport.off_site_dropped``), and ``dgb parse-listing`` prints it on stderr. The fetcher's URL
guard (:mod:`dgb.urlpolicy`) still checks every request: this rule only stops the links earlier,
all at once instead of one refused request at a time.

A link's site (:func:`link_site`) is its lower-cased host, with its port unless it is the scheme's
default; under the local mirror (``http://127.0.0.1:P/www.gov.br/...``) it is
``127.0.0.1:P/www.gov.br`` (each mirrored host is its own site, as :func:`dgb.fetch.site_host`).
Only ``http``/``https`` links without credentials have a site; any other link has none and is
always dropped. The agency's sites (:func:`own_sites`) are the sites of its configured URLs (the
catalogue's listing URL, mirrored in mirror mode) and of the listing page itself, each with its
``www.`` twin (``gov.br`` and ``www.gov.br`` are one site; gov.br agencies all live on
``www.gov.br``, and each EBC portal on its own host: ``agenciabrasil.ebc.com.br``,
``tvbrasil.ebc.com.br``). A link to another EBC portal or any other host is dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from urllib.parse import urlsplit

from dgb.fetch import site_host
from dgb.scraper.models import ListingPage

log = logging.getLogger(__name__)

_DEFAULT_PORTS = {"http": 80, "https": 443}


def link_site(url: str | None) -> str:
    """The site of ``url`` (module docstring); "" when it has none (never on any agency's site)."""
    if not url:
        return ""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return ""
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or parts.username is not None or parts.password is not None:
        return ""
    site = site_host(url.strip())
    if port is not None and port == _DEFAULT_PORTS[scheme]:
        host, sep, rest = site.partition("/")
        site = host.rsplit(":", 1)[0] + sep + rest
    return site


def _twins(site: str) -> set[str]:
    """``site`` and its ``www.`` twin (on the mirrored host under the mirror)."""
    prefix, sep, host = site.rpartition("/")
    head = prefix + sep
    other = host[4:] if host.startswith("www.") else f"www.{host}"
    return {site, head + other} if "." in other else {site}


def own_sites(*urls: str | None) -> frozenset[str]:
    """The sites of ``urls`` (an agency's listing URL, its page URL...), each with its ``www.`` twin."""
    sites: set[str] = set()
    for url in urls:
        if site := link_site(url):
            sites |= _twins(site)
    return frozenset(sites)


def is_on_site(url: str | None, sites: Iterable[str]) -> bool:
    site = link_site(url)
    return bool(site) and site in set(sites)


def keep_on_site(page: ListingPage, sites: Iterable[str], *, label: str = "listing") -> ListingPage:
    """Drop ``page``'s items and next-page link that are not on ``sites``; count them (in place)."""
    allowed = frozenset(sites)
    dropped = [item.url for item in page.items if not is_on_site(item.url, allowed)]
    if dropped:
        page.items = [item for item in page.items if is_on_site(item.url, allowed)]
    if page.next_url and not is_on_site(page.next_url, allowed):
        dropped.append(page.next_url)
        page.next_url = None
    if dropped:
        page.off_site_dropped += len(dropped)
        log.warning(
            "%s: %d link(s) off the site %s dropped: %s",
            label,
            len(dropped),
            sorted(allowed),
            [url[:200] for url in dropped[:5]],
        )
    return page


def unresolved_link(href: str | None) -> str | None:
    """A link the parser could not make absolute (``javascript:``, ``data:``, ``mailto:``...) kept as
    written, so that :func:`keep_on_site` drops and counts it; None for no link or a bare fragment."""
    href = (href or "").strip()
    return href if href and not href.startswith("#") else None
