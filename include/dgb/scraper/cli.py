"""``dgb parse-article`` and ``dgb parse-listing``: run the parsers on a saved page.

Both print JSON on stdout and exit 0; on a scrape error they print one line
``<category>: <message>`` on stderr and exit 2. ``parse-listing`` drops links off the site of
``--url`` (:mod:`dgb.scraper.sites`) and, when it dropped any, prints ``off_site_dropped=<n>`` on
stderr (stdout stays the JSON list).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from dgb.scrape_errors import ScrapeError, UnknownScrapeError
from dgb.scraper.markup import decode_bytes
from dgb.scraper.parsers import PLONE6, parse_any_article, parse_any_listing

EXIT_ERROR = 2


def _read(path: str) -> bytes:
    if path == "-":
        stream = getattr(sys.stdin, "buffer", None)
        return stream.read() if stream is not None else sys.stdin.read().encode("utf-8")
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise UnknownScrapeError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _emit(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2) + "\n")


def _fail(err: ScrapeError) -> int:
    print(str(err).replace("\n", " "), file=sys.stderr)
    return EXIT_ERROR


def cmd_parse_article(args: argparse.Namespace) -> int:
    try:
        text = decode_bytes(_read(args.file), args.charset)
        article = parse_any_article(text, args.url, args.agency)
    except ScrapeError as err:
        return _fail(err)
    _emit(article.to_dict())
    return 0


def cmd_parse_listing(args: argparse.Namespace) -> int:
    try:
        text = decode_bytes(_read(args.file), args.charset)
        source, page = parse_any_listing(text, args.url, args.agency)
    except ScrapeError as err:
        return _fail(err)
    _emit([item.to_dict(full=source == PLONE6) for item in page.items])
    if page.off_site_dropped:  # stdout stays the list; the count goes to stderr
        print(f"off_site_dropped={page.off_site_dropped}", file=sys.stderr)
    return 0


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agency", help="agency key (default: from the URL: first path segment, EBC host label)"
    )
    parser.add_argument(
        "--url", required=True, help="URL the page was fetched from (resolves relative links)"
    )
    parser.add_argument("--charset", help="charset declared by the server (Content-Type), if known")
    parser.add_argument("file", metavar="FILE", help="saved page (HTML, or Plone 6 JSON); '-' for stdin")


def register(subparsers: argparse._SubParsersAction) -> None:
    article = subparsers.add_parser(
        "parse-article",
        help="parse a saved article page into one JSON object",
        description="Parse a saved gov.br/EBC article page (or Plone 6 JSON object) and print one JSON "
        "object: title, subtitle, editorial_lead, category, tags, published_at, updated_at, "
        "image_url, video_url, content, unique_id, content_hash. Exit 2 with "
        "'<category>: <message>' on stderr when the page cannot be parsed.",
    )
    _add_common(article)
    article.set_defaults(func=cmd_parse_article)
    listing = subparsers.add_parser(
        "parse-listing",
        help="parse a saved news listing into a JSON list",
        description="Parse a saved listing page (classic gov.br HTML, EBC /ultimas, or a Plone 6 @search "
        "JSON response) and print a JSON list of {title, url, published_at} (Plone 6 adds "
        "updated_at, tags, image_url, content). Links off the site of --url (other hosts, internal "
        "addresses, file:, javascript:, data:) are dropped, and 'off_site_dropped=<n>' is printed on "
        "stderr when there were any. Exit 2 with '<category>: <message>' on stderr when the page "
        "cannot be parsed.",
    )
    _add_common(listing)
    listing.set_defaults(func=cmd_parse_listing)
