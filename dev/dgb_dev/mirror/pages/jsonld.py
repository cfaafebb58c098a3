"""JSON-LD scripts as the mirror's article pages carry them, valid or with the raw quotes that
break JSON-LD in the wild."""

from __future__ import annotations

import json


def ldjson(obj: dict) -> str:
    text = json.dumps(obj, ensure_ascii=False).replace("</", "<\\/")
    return f'<script type="application/ld+json">{text}</script>'


def with_raw_quotes(title: str) -> str:
    """The title with unescaped double quotes (what breaks JSON-LD in the wild)."""
    if '"' in title:
        return title
    words = title.split(" ")
    i = next((n for n, w in enumerate(words) if len(w) >= 4), 0)
    words[i] = f'"{words[i]}"'
    return " ".join(words)
