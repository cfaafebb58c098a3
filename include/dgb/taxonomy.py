"""Theme taxonomy of dgb-pipeline: a 3-level tree of news themes.

The tree lives in ``data/taxonomy/NN.yaml`` (one file per level-1 theme). Each node has a
``code`` (``NN`` / ``NN.NN`` / ``NN.NN.NN``), a ``label``, a Portuguese ``description`` and
``keywords`` (used by the embedding-similarity classifier), optional ``examples`` (typical
headlines, given at level 3) and ``children``.

This module has no Airflow dependency; it only needs PyYAML.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DEFAULT_FOLDER = Path(__file__).parent / "data" / "taxonomy"

#: The level-1 themes: codes and labels are fixed (22 and 23 were retired, never renumbered).
LEVEL1: dict[str, str] = {
    "01": "Economia e Finanças",
    "02": "Educação",
    "03": "Saúde",
    "04": "Segurança Pública",
    "05": "Meio Ambiente e Sustentabilidade",
    "06": "Ciência, Tecnologia e Inovação",
    "07": "Infraestrutura e Transportes",
    "08": "Cultura, Artes e Patrimônio",
    "09": "Esportes e Lazer",
    "10": "Agricultura, Pecuária e Abastecimento",
    "11": "Indústria e Comércio",
    "12": "Relações Internacionais e Diplomacia",
    "13": "Justiça e Direitos Humanos",
    "14": "Trabalho e Emprego",
    "15": "Desenvolvimento Social",
    "16": "Turismo",
    "17": "Energia e Recursos Minerais",
    "18": "Comunicações e Mídia",
    "19": "Defesa e Forças Armadas",
    "20": "Políticas Públicas e Governança",
    "21": "Legislação e Regulamentação",
    "24": "Minorias e Grupos Especiais",
    "25": "Habitação e Urbanismo",
}

_CODE_RE = {
    1: re.compile(r"^\d{2}$"),
    2: re.compile(r"^\d{2}\.\d{2}$"),
    3: re.compile(r"^\d{2}\.\d{2}\.\d{2}$"),
}
_CODE_SHAPE = {1: "NN", 2: "NN.NN", 3: "NN.NN.NN"}
_ALLOWED_FIELDS = frozenset({"code", "label", "description", "keywords", "examples", "children"})
MAX_LEVEL = 3


class TaxonomyError(ValueError):
    """Raised when the taxonomy files are invalid; lists every problem found."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid taxonomy ({len(self.problems)} problem(s)):\n{lines}")


@dataclass(frozen=True)
class Theme:
    code: str
    label: str
    level: int
    parent_code: str | None
    description: str
    keywords: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    full_name: str = ""

    @property
    def l1_code(self) -> str:
        return self.code[:2]

    def embedding_text(self) -> str:
        """Text describing this theme for the embedding-similarity classifier."""
        parts = [self.full_name or self.label, self.description]
        if self.keywords:
            parts.append("Termos: " + ", ".join(self.keywords))
        if self.examples:
            parts.append("Exemplos: " + "; ".join(self.examples))
        return "\n".join(p for p in parts if p)


def _norm(code: Any) -> str | None:
    if code is None:
        return None
    code = str(code).strip()
    return code or None


class Taxonomy:
    """An in-memory, validated theme tree (codes in file / document order)."""

    def __init__(self, themes: dict[str, Theme]):
        self.themes: dict[str, Theme] = dict(themes)
        self._children: dict[str | None, list[Theme]] = {}
        for theme in self.themes.values():
            self._children.setdefault(theme.parent_code, []).append(theme)

    def __len__(self) -> int:
        return len(self.themes)

    def __iter__(self) -> Iterator[Theme]:
        return iter(self.themes.values())

    def __contains__(self, code: object) -> bool:
        return code in self.themes

    def get(self, code: str | None) -> Theme | None:
        code = _norm(code)
        return self.themes.get(code) if code else None

    def level(self, n: int) -> list[Theme]:
        return [t for t in self.themes.values() if t.level == n]

    def children(self, code: str | None) -> list[Theme]:
        """Direct children of ``code``; ``children(None)`` gives the level-1 themes."""
        return list(self._children.get(_norm(code), []))

    def parent(self, code: str) -> Theme | None:
        theme = self.get(code)
        if theme is None or theme.parent_code is None:
            return None
        return self.themes.get(theme.parent_code)

    def path(self, code: str) -> list[Theme]:
        """Themes from level 1 down to ``code`` (empty if unknown)."""
        out: list[Theme] = []
        theme = self.get(code)
        while theme is not None:
            out.append(theme)
            theme = self.themes.get(theme.parent_code) if theme.parent_code else None
        return out[::-1]

    def is_valid_path(self, l1: str | None, l2: str | None = None, l3: str | None = None) -> bool:
        """True if ``l1`` is a level-1 theme and each further given code nests in the previous.

        A later level may only be given when the earlier ones are (``l1, None, l3`` is invalid).
        """
        codes = [_norm(l1), _norm(l2), _norm(l3)]
        if codes[0] is None:
            return False
        seen_gap = False
        parent: str | None = None
        for level, code in enumerate(codes, start=1):
            if code is None:
                seen_gap = True
                continue
            if seen_gap:
                return False
            theme = self.themes.get(code)
            if theme is None or theme.level != level or theme.parent_code != parent:
                return False
            parent = code
        return True

    def deepest_valid(
        self, l1: str | None, l2: str | None = None, l3: str | None = None
    ) -> tuple[str | None, str | None, str | None]:
        """Keep the longest valid prefix of ``(l1, l2, l3)``; dropped levels become ``None``."""
        codes = [_norm(l1), _norm(l2), _norm(l3)]
        out: list[str | None] = [None, None, None]
        parent: str | None = None
        for i, code in enumerate(codes):
            theme = self.themes.get(code) if code else None
            if theme is None or theme.level != i + 1 or theme.parent_code != parent:
                break
            out[i] = code
            parent = code
        return out[0], out[1], out[2]

    def most_specific(self, l1: str | None, l2: str | None = None, l3: str | None = None) -> str | None:
        """Code of the deepest theme in the longest valid prefix (``None`` if l1 is invalid)."""
        valid = [c for c in self.deepest_valid(l1, l2, l3) if c]
        return valid[-1] if valid else None


def _check_str_list(value: Any, field: str, where: str, problems: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.append(f"{where}: '{field}' must be a list of strings")
        return ()
    out: list[str] = []
    for item in value:
        if not isinstance(item, str) or not item.strip():
            problems.append(f"{where}: '{field}' must contain only non-empty strings (got {item!r})")
            continue
        out.append(item.strip())
    return tuple(out)


def _walk(
    node: Any,
    level: int,
    parent: Theme | None,
    source: str,
    themes: dict[str, Theme],
    problems: list[str],
) -> None:
    if not isinstance(node, dict):
        owner = parent.code if parent else source
        problems.append(f"{owner}: a child node must be a mapping, got {type(node).__name__}")
        return
    raw_code = node.get("code")
    code = raw_code if isinstance(raw_code, str) else None
    where = f"{code or repr(raw_code)} ({source})"

    if raw_code is None:
        under = f" under {parent.code}" if parent else ""
        where = f"<no code>{under} ({source})"
        problems.append(f"{where}: missing 'code'")
    elif not isinstance(raw_code, str):
        problems.append(f'{where}: code must be a quoted string like "{_CODE_SHAPE[min(level, 3)]}"')
    elif level > MAX_LEVEL:
        problems.append(f"{where}: too deep (level {level}); the taxonomy has {MAX_LEVEL} levels")
    elif not _CODE_RE[level].match(code):
        problems.append(f"{where}: bad code format for level {level}, expected {_CODE_SHAPE[level]}")
    elif parent is not None and not code.startswith(parent.code + "."):
        problems.append(f"{where}: child code does not start with parent code {parent.code}.")

    unknown = sorted(set(map(str, node)) - _ALLOWED_FIELDS)
    if unknown:
        problems.append(f"{where}: unknown field(s) {', '.join(unknown)}")

    label = node.get("label")
    if not isinstance(label, str) or not label.strip():
        problems.append(f"{where}: missing or empty 'label'")
        label = ""
    description = node.get("description")
    if not isinstance(description, str) or not description.strip():
        problems.append(f"{where}: missing or empty 'description'")
        description = ""
    keywords = _check_str_list(node.get("keywords"), "keywords", where, problems)
    examples = _check_str_list(node.get("examples"), "examples", where, problems)

    label = " ".join(label.split())
    full_name = f"{parent.full_name} > {label}" if parent else label
    theme = Theme(
        code=code or "",
        label=label,
        level=level,
        parent_code=parent.code if parent else None,
        description=" ".join(description.split()),
        keywords=keywords,
        examples=examples,
        full_name=full_name,
    )
    if code:
        if code in themes:
            problems.append(f"{where}: duplicate code")
        else:
            themes[code] = theme

    children = node.get("children")
    if children is None:
        return
    if not isinstance(children, list):
        problems.append(f"{where}: 'children' must be a list")
        return
    if level >= MAX_LEVEL and children:
        problems.append(f"{where}: level-{MAX_LEVEL} theme cannot have children")
        return
    for child in children:
        _walk(child, level + 1, theme, source, themes, problems)


def load_taxonomy(folder: str | Path | None = None, *, strict: bool = True) -> Taxonomy:
    """Load and validate every ``*.yaml`` in ``folder`` (default: the shipped taxonomy).

    With ``strict`` the set of level-1 codes and labels must equal :data:`LEVEL1` exactly.
    All problems are collected and raised together as one :class:`TaxonomyError`.
    """
    folder = Path(folder) if folder is not None else DEFAULT_FOLDER
    problems: list[str] = []
    themes: dict[str, Theme] = {}
    if not folder.is_dir():
        raise TaxonomyError([f"taxonomy folder not found: {folder}"])
    files = sorted(folder.glob("*.yaml"))
    if not files:
        problems.append(f"no *.yaml files in {folder}")
    for path in files:
        try:
            doc = yaml.load(
                path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            )
        except (OSError, yaml.YAMLError) as exc:
            problems.append(f"{path.name}: cannot read YAML: {exc}")
            continue
        if not isinstance(doc, dict):
            problems.append(f"{path.name}: top level must be a mapping (one level-1 theme)")
            continue
        code = doc.get("code")
        if isinstance(code, str) and code != path.stem:
            problems.append(f"{code} ({path.name}): file name must equal the level-1 code ({code}.yaml)")
        _walk(doc, 1, None, path.name, themes, problems)

    if strict:
        found = {t.code: t.label for t in themes.values() if t.level == 1}
        for code in sorted(set(LEVEL1) - set(found)):
            problems.append(f"{code}: level-1 theme missing ({LEVEL1[code]})")
        for code in sorted(set(found) - set(LEVEL1)):
            problems.append(f"{code}: unexpected level-1 theme {found[code]!r}")
        for code in sorted(set(found) & set(LEVEL1)):
            if found[code] != LEVEL1[code]:
                problems.append(f"{code}: level-1 label {found[code]!r} != expected {LEVEL1[code]!r}")

    if problems:
        raise TaxonomyError(problems)
    return Taxonomy(themes)


def themes_rows(taxonomy: Taxonomy) -> list[dict[str, Any]]:
    """Rows for the PostgreSQL ``themes`` table, parents before children."""
    return [
        {
            "code": t.code,
            "label": t.label,
            "full_name": t.full_name,
            "level": t.level,
            "parent_code": t.parent_code,
            "description": t.description,
            "keywords": list(t.keywords),
        }
        for t in taxonomy.themes.values()
    ]


#: Production's codes and labels (code<TAB>label, tree order), written by scripts/taxonomy_codes.py.
PRODUCTION_CODES = DEFAULT_FOLDER / "production_codes.tsv"


def load_production_codes(path: str | Path | None = None) -> list[tuple[str, str]]:
    """(code, label) pairs of production's theme tree, in its order (``#`` lines are comments)."""
    path = Path(path) if path is not None else PRODUCTION_CODES
    out: list[tuple[str, str]] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        code, sep, label = line.partition("\t")
        if not sep or not code or not label.strip():
            raise TaxonomyError([f"{path.name}:{n}: expected 'code<TAB>label', got {line!r}"])
        out.append((code, label.strip()))
    return out


def production_differences(taxonomy: Taxonomy, codes: list[tuple[str, str]] | None = None) -> list[str]:
    """Every way ``taxonomy`` differs from production's codes: missing or extra codes, other labels,
    other parents, other sibling order. Empty when the trees are identical at all three levels.

    Production stores these codes in every article row and every portal facet, so ours must match.
    """
    codes = load_production_codes() if codes is None else codes
    theirs = dict(codes)
    problems: list[str] = []
    for code, label in codes:
        ours = taxonomy.get(code)
        if ours is None:
            problems.append(f"{code}: production theme {label!r} missing from our tree")
        elif ours.label != label:
            problems.append(f"{code}: label {ours.label!r} != production's {label!r}")
    for theme in taxonomy:
        if theme.code not in theirs:
            problems.append(f"{theme.code}: {theme.label!r} is not a production code")
            continue
        parent = theme.code[:-3] if theme.level > 1 else None
        if theme.parent_code != parent:
            problems.append(f"{theme.code}: parent {theme.parent_code} != production's {parent}")
    # same order among siblings (only where both trees hold the same children)
    prod_children: dict[str | None, list[str]] = {}
    for code, _ in codes:
        prod_children.setdefault(code[:-3] if "." in code else None, []).append(code)
    for parent, children in prod_children.items():
        ours = [t.code for t in taxonomy.children(parent)]
        if sorted(ours) == sorted(children) and ours != children:
            problems.append(f"{parent or 'level 1'}: children in order {ours}, production has {children}")
    return problems
