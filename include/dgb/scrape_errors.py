"""Scrape error categories (the ``scrape_runs.error_category`` vocabulary) and anti-bot detection.

Every failure a parser or fetcher reports is a :class:`ScrapeError` carrying one of
:data:`CATEGORIES`; ``str(err)`` is ``"<category>: <message>"`` on one line, which is what the
``dgb parse-*`` commands print on stderr.

The category vocabulary is fixed (it is the database's CHECK list). Some errors also carry a
finer ``kind`` (:data:`KINDS`) that scrape reports count per run: ``too_large`` (a response
over the size cap; category ``unknown``), ``parse_error`` (a parser raised something other than
a ScrapeError on one page; category ``html_changed``: markup we do not recognise),
``too_deep`` (a page over the DOM depth/node caps; ``html_changed``) and ``store_error`` (one
article the database refused; ``unknown``). Without one, ``kind`` is the category.
"""

from __future__ import annotations

import re

NETWORK_ERROR = "network_error"
ANTI_BOT = "anti_bot"
EMPTY_CONTENT = "empty_content"
URL_BROKEN = "url_broken"
HTML_CHANGED = "html_changed"
UNKNOWN = "unknown"
CATEGORIES: tuple[str, ...] = (NETWORK_ERROR, ANTI_BOT, EMPTY_CONTENT, URL_BROKEN, HTML_CHANGED, UNKNOWN)
TOO_LARGE = "too_large"
PARSE_ERROR = "parse_error"
TOO_DEEP = "too_deep"
STORE_ERROR = "store_error"
KINDS: tuple[str, ...] = (TOO_LARGE, PARSE_ERROR, TOO_DEEP, STORE_ERROR)


class ScrapeError(Exception):
    """A scrape failure with a category from :data:`CATEGORIES`.

    Build it as ``ScrapeError("anti_bot", "page is a Cloudflare challenge")`` or through a
    subclass (``AntiBotError("...")``), or from an HTTP status with :func:`error_for_status`.
    """

    category: str = UNKNOWN
    kind: str | None = None

    def __init__(self, category: str, message: str = "", *, kind: str | None = None) -> None:
        if category not in CATEGORIES:
            raise ValueError(f"unknown scrape error category {category!r}; expected one of {CATEGORIES}")
        if kind is not None and kind not in KINDS:
            raise ValueError(f"unknown scrape error kind {kind!r}; expected one of {KINDS}")
        self.category = category
        self.kind = kind or type(self).kind or category
        self.message = " ".join(str(message).split()) or category.replace("_", " ")
        super().__init__(self.message)

    def __str__(self) -> str:
        return f"{self.category}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.category!r}, {self.message!r})"


class _Categorised(ScrapeError):
    def __init__(self, message: str = "", *, kind: str | None = None) -> None:
        super().__init__(type(self).category, message, kind=kind)


class NetworkError(_Categorised):
    category = NETWORK_ERROR


class AntiBotError(_Categorised):
    category = ANTI_BOT


class EmptyContentError(_Categorised):
    category = EMPTY_CONTENT


class UrlBrokenError(_Categorised):
    category = URL_BROKEN


class HtmlChangedError(_Categorised):
    category = HTML_CHANGED


class UnknownScrapeError(_Categorised):
    category = UNKNOWN


class TooLargeError(UnknownScrapeError):
    """A response over the fetch size cap (``FetchPolicy.max_bytes``): not read further."""

    kind = TOO_LARGE


def as_scrape_error(exc: BaseException, kind: str = PARSE_ERROR, where: str = "") -> ScrapeError:
    """``exc`` as a :class:`ScrapeError`: itself when it is one, else one of ``kind``
    (``parse_error`` -> category ``html_changed``, ``store_error`` -> ``unknown``) naming the
    exception type, so one bad page is recorded instead of raising out of the run."""
    if isinstance(exc, ScrapeError):
        return exc
    category = HTML_CHANGED if kind in (PARSE_ERROR, TOO_DEEP) else UNKNOWN
    text = str(exc)[:300]
    return ScrapeError(category, f"{type(exc).__name__}{where}: {text}", kind=kind)


def error_for_status(status: int, url: str = "") -> ScrapeError | None:
    """Map an HTTP status to an error: 403/404/410 -> url_broken, 429/5xx -> network_error."""
    where = f" for {url}" if url else ""
    if status in (403, 404, 410):
        return UrlBrokenError(f"HTTP {status}{where}")
    if status == 429 or 500 <= status <= 599:
        return NetworkError(f"HTTP {status}{where}")
    if status >= 400:
        return UnknownScrapeError(f"HTTP {status}{where}")
    return None


# Cloudflare's interstitial titles: a challenge whatever else the page holds.
_CHALLENGE_TITLE = re.compile(
    r"<title>[^<]*(?:just a moment|attention required!? \| cloudflare|captcha|checking your browser)"
    r"[^<]*</title>",
    re.IGNORECASE,
)
# Challenge scripts/widgets. Cloudflare can also inject its challenge-platform script into real
# pages, so these count only when the page carries none of the content markers below.
_MARKERS = re.compile(
    r"challenge-platform|cf-browser-verification|cf-chl|_cf_chl|jschl[-_](?:vc|answer)|"
    r"just a moment|attention required! \| cloudflare|checking your browser|"
    r"g-recaptcha|h-captcha|hcaptcha\.com|cf-turnstile|captcha-delivery",
    re.IGNORECASE,
)
_CONTENT_MARKERS = re.compile(
    r"id=[\"']content-core[\"']|documentFirstHeading|tileItem|"
    r"titulo-materia|conteudo-noticia|capa-noticia|view-ultimas|txtNoticias",  # EBC's real markup
    re.IGNORECASE,
)


ANTI_BOT_SCAN_CHARS = 200_000


def detect_anti_bot(text: str | bytes | None) -> bool:
    """True when ``text`` is an anti-bot interstitial (Cloudflare challenge, captcha wall).

    A challenge title ("Just a moment...", "Attention Required! | Cloudflare", "...captcha...")
    always counts; the other markers (``challenge-platform``, ``cf-browser-verification``,
    ``cf-chl``, captcha widgets) count when the page has no gov.br/EBC content markers.
    Only the first :data:`ANTI_BOT_SCAN_CHARS` characters are read (linear time on huge pages).
    """
    if not text:
        return False
    text = text[:ANTI_BOT_SCAN_CHARS]  # challenge pages are small: the head of a page decides
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if _CHALLENGE_TITLE.search(text):
        return True
    return bool(_MARKERS.search(text)) and not _CONTENT_MARKERS.search(text)
