"""Comments and docs say what a requirement is instead of citing the project's seed documents,
which a reader of the repository cannot open."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"\bseeds? 0\d\d\b", re.IGNORECASE)
# applied migrations are immutable (checksummed in schema_migrations): their comments stay
IMMUTABLE = REPO / "include" / "dgb" / "migrations"


def test_nothing_cites_a_seed():
    files = [REPO / "README.md", *(REPO / "docs").rglob("*.md")]
    for top in ("include", "plugins", "dags", "scripts", "tests"):
        files += [p for p in (REPO / top).rglob("*") if p.suffix in (".py", ".md", ".sql", ".yaml", ".txt")]
    hits = []
    for path in files:
        if IMMUTABLE in path.parents or path == Path(__file__).resolve():
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if CITATION.search(line):
                hits.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert hits == [], "\n".join(hits)
