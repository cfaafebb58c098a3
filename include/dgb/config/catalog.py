"""The catalogue of every ``DGB_*`` setting: name(s), default, meaning and the deploy targets that set
it, described once in ``settings.yaml`` beside this module.

The settings are *read* by the functions of this package (through :func:`dgb.config.env_str`,
:func:`dgb.config.env_number` and :func:`dgb.config.env_flag`); the catalogue is what the
documentation site's settings reference renders (``dev/docs_gen.py`` at build time). Tests keep the
two together: every name the code reads has an entry, every entry names a setting the code reads,
and a literal default in the code is the default the catalogue gives (``tests/unit/config``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

CATALOGUE = Path(__file__).with_name("settings.yaml")


@dataclass(frozen=True)
class Setting:
    """One row of the reference. Settings that belong together share a row: ``names`` in order,
    the defaults in ``default`` separated by " / " in the same order."""

    section: str
    names: tuple[str, ...]
    default: str
    meaning: str
    set_by: str


@cache
def settings() -> tuple[Setting, ...]:
    """Every catalogued setting, in reference order. A malformed catalogue is a ``ValueError``
    naming the row."""
    data = yaml.safe_load(CATALOGUE.read_text(encoding="utf-8"))
    rows: list[Setting] = []
    for section in data["sections"]:
        for i, row in enumerate(section["settings"]):
            missing = {"names", "default", "meaning", "set_by"} - set(row)
            names = tuple(row.get("names") or ())
            if missing or not names or not all(n.startswith("DGB_") for n in names):
                raise ValueError(f"{CATALOGUE.name}: row {i} of {section['title']!r} is malformed ({row!r})")
            rows.append(Setting(section["title"], names, row["default"], row["meaning"], row["set_by"]))
    return tuple(rows)


def names() -> set[str]:
    """Every setting name the catalogue describes."""
    return {name for setting in settings() for name in setting.names}


def sections() -> list[str]:
    """The sections, in reference order."""
    return list(dict.fromkeys(setting.section for setting in settings()))
