"""Article identity: readable ``unique_id`` and the dedup ``content_hash``, equal to production's.

Both values are contracts shared with the DestaquesGovBr database this pipeline adopts: a row
that production scraped and the same article scraped here must get the same ``unique_id`` (or the
upsert would duplicate it) and the same ``content_hash`` (or search's ``group_by content_hash`` would
not fold republished copies together). ``docs/compatibility.md`` lists them with their tests.

``unique_id(agency, id_date, title)`` is ``<slug>_<suffix>``:

* ``slug`` = :func:`slugify_title` of the title (NFKD folded to ASCII, lowercase, every run of
  other characters one hyphen, <= 100 chars cut at the last hyphen; ``"sem-titulo"`` when empty);
* ``suffix`` = first 6 hex digits of ``md5("<agency>_<id_date>_<title>")`` (UTF-8).

``id_date`` is the *text* production's scrapers fed to that hash: ``isoformat()`` of the datetime
they built, which depends on where the date came from (:func:`iso_as_given`,
:func:`brasilia_wall_clock`). The parsers record it on the article (``Article.id_date``), because
the true instant (``published_at``) does not determine it:

* an ISO 8601 string (JSON-LD ``datePublished``, Plone 6 ``effective``) is parsed with
  ``datetime.fromisoformat`` and printed back: the offset stays as the source wrote it
  (``2026-02-10T20:05:07+00:00`` is *not* rewritten as ``17:05:07-03:00``), fractions of a second stay;
* a date read from page text ("10/02/2026 17h05") or a listing date without a time is the Brasília
  wall clock with a fixed ``-03:00`` offset (even for dates before 2019, when Brasília used summer
  time), seconds ``00``; a listing date alone is midnight.

``content_hash(title, content)`` = first 16 hex digits of
``sha256(normalise_text(title) + "\\n" + normalise_text(content))`` where :func:`normalise_text`
folds to ASCII (NFKD, non-ASCII dropped), lowercases, removes every character that is neither a
word character nor whitespace, collapses whitespace runs to one space and strips. When title and
content both normalise to nothing the hash is ``None``.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from dgb.textfold import ascii_fold

BRASILIA = ZoneInfo("America/Sao_Paulo")
#: The fixed offset production attaches to dates read from text (not the zone: no summer time).
BRASILIA_FIXED = timezone(timedelta(hours=-3))
SLUG_MAX = 100
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_NOT_WORD_OR_SPACE = re.compile(r"[^\w\s]")
_WS = re.compile(r"\s+")


def slugify_title(title: str | None, max_length: int = SLUG_MAX) -> str:
    """ASCII, lowercase, hyphen-separated slug of ``title``, at most ``max_length`` characters."""
    slug = _NON_ALNUM.sub("-", ascii_fold(title or "").lower()).strip("-")
    if len(slug) > max_length:
        cut = slug[:max_length]
        # Prefer a word boundary; a single over-long word is cut hard.
        slug = cut.rsplit("-", 1)[0] if "-" in cut else cut
    return slug.strip("-")


def iso_as_given(value: object) -> str | None:
    """``datetime.fromisoformat(value).isoformat()``: an ISO string as production re-prints it.

    None when ``value`` is not a string that ``fromisoformat`` accepts (production then fell back
    to the next date source).
    """
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).isoformat()
    except ValueError:
        return None


def brasilia_wall_clock(dt: datetime) -> str:
    """The Brasília wall-clock reading of ``dt`` with a fixed ``-03:00`` offset (text dates).

    A naive ``dt`` is taken as Brasília wall-clock time already.
    """
    if dt.tzinfo is not None:
        dt = dt.astimezone(BRASILIA)
    return dt.replace(tzinfo=BRASILIA_FIXED).isoformat()


def listing_day(dt: datetime) -> str:
    """The id date text of an article dated only by its listing: midnight of that Brasília day at
    ``-03:00`` (production kept the listing's day, not its time, when it fell back to it)."""
    if dt.tzinfo is not None:
        dt = dt.astimezone(BRASILIA)
    return brasilia_wall_clock(dt.replace(hour=0, minute=0, second=0, microsecond=0))


def unique_id(agency: str, id_date: str | datetime, title: str) -> str:
    """``<slug>_<6 hex of md5("<agency>_<id_date>_<title>")>`` (see module docstring).

    ``id_date`` is normally the text recorded by the parser; a datetime is printed with
    ``isoformat()`` exactly as given (its own offset), as production does with the datetimes it holds.
    """
    date_text = id_date.isoformat() if isinstance(id_date, datetime) else str(id_date)
    key = f"{agency}_{date_text}_{title}"
    suffix = hashlib.md5(key.encode("utf-8"), usedforsecurity=False).hexdigest()[:6]
    return f"{slugify_title(title) or 'sem-titulo'}_{suffix}"


def normalise_text(s: str | None) -> str:
    """ASCII-fold, lowercase, drop punctuation and symbols, collapse whitespace, strip."""
    if not s:
        return ""
    folded = _NOT_WORD_OR_SPACE.sub("", ascii_fold(s).lower())
    return _WS.sub(" ", folded).strip()


def content_hash(title: str | None, content: str | None) -> str | None:
    """First 16 hex digits of sha256(normalised title + "\\n" + normalised content); None if both empty."""
    norm_title, norm_content = normalise_text(title), normalise_text(content)
    if not norm_title and not norm_content:
        return None
    return hashlib.sha256((norm_title + "\n" + norm_content).encode("utf-8")).hexdigest()[:16]
