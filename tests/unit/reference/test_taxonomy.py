"""The theme taxonomy: shipped YAML files load, and the loader rejects malformed trees."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from dgb.taxonomy import (
    DEFAULT_FOLDER,
    LEVEL1,
    Taxonomy,
    TaxonomyError,
    Theme,
    load_production_codes,
    load_taxonomy,
    production_differences,
    themes_rows,
)

ROOT = Path(__file__).resolve().parents[3]
ALL_FILES_PRESENT = all((DEFAULT_FOLDER / f"{code}.yaml").exists() for code in LEVEL1)


@pytest.fixture(scope="module")
def shipped() -> Taxonomy:
    return load_taxonomy(strict=ALL_FILES_PRESENT)


# --------------------------------------------------------------------------- shipped data


def test_shipped_taxonomy_loads(shipped: Taxonomy) -> None:
    assert len(shipped) > 0
    assert shipped.level(1), "no level-1 theme"
    for theme in shipped.level(1):
        assert LEVEL1[theme.code] == theme.label


def test_shipped_is_complete_when_all_files_exist(shipped: Taxonomy) -> None:
    if not ALL_FILES_PRESENT:
        pytest.skip("not all 23 level-1 files are written yet")
    assert {t.code: t.label for t in shipped.level(1)} == LEVEL1
    assert 90 <= len(shipped.level(2)) <= 130
    assert 380 <= len(shipped.level(3)) <= 520
    # the strict default must accept the shipped folder as is
    assert len(load_taxonomy()) == len(shipped)


def test_every_node_is_described(shipped: Taxonomy) -> None:
    for theme in shipped:
        assert theme.label.strip(), theme.code
        assert theme.description.strip(), theme.code
        assert theme.keywords, f"{theme.code} has no keywords"
        assert all(isinstance(k, str) and k for k in theme.keywords), theme.code
        if theme.level == 3:
            assert len(theme.examples) >= 1, f"{theme.code} has no example headline"


def test_codes_and_nesting(shipped: Taxonomy) -> None:
    shapes = {1: r"\d{2}", 2: r"\d{2}\.\d{2}", 3: r"\d{2}\.\d{2}\.\d{2}"}
    for theme in shipped:
        assert re.fullmatch(shapes[theme.level], theme.code), theme.code
        if theme.level == 1:
            assert theme.parent_code is None
        else:
            parent = shipped.parent(theme.code)
            assert parent is not None and parent.level == theme.level - 1
            assert theme.code.startswith(parent.code + ".")
            assert theme.full_name == f"{parent.full_name} > {theme.label}"
    # every level-1 and level-2 theme has children
    for theme in shipped.level(1) + shipped.level(2):
        assert shipped.children(theme.code), f"{theme.code} has no children"


def test_tree_equals_production_codes(shipped: Taxonomy) -> None:
    """Codes, labels, parents and sibling order equal production's tree at all three levels.

    Production stores these codes in every article row and portal facet; the facts file is
    generated from its themes_tree.yaml by scripts/taxonomy_codes.py.
    """
    codes = load_production_codes()
    assert len(codes) == 588 and len({c for c, _ in codes}) == 588
    assert {c: label for c, label in codes if "." not in c} == LEVEL1
    assert production_differences(shipped, codes) == []
    assert [t.code for t in shipped] == [c for c, _ in codes]


def test_production_differences_reports_each_kind_of_mismatch(shipped: Taxonomy) -> None:
    codes = [(t.code, t.label) for t in shipped]
    assert production_differences(shipped, codes) == []
    l3 = shipped.level(3)[0]
    relabelled = [(c, "Outro rótulo" if c == l3.code else label) for c, label in codes]
    assert any(l3.code in p and "label" in p for p in production_differences(shipped, relabelled))
    missing = [(c, label) for c, label in codes if c != l3.code]
    assert any(
        l3.code in p and "not a production code" in p for p in production_differences(shipped, missing)
    )
    extra = codes + [(l3.parent_code + ".99", "Nova")]
    assert any(".99" in p and "missing from our tree" in p for p in production_differences(shipped, extra))
    siblings = [t.code for t in shipped.children(l3.parent_code)]
    assert len(siblings) >= 2
    swapped = {siblings[0]: siblings[1], siblings[1]: siblings[0]}
    reordered = [(swapped.get(c, c), dict(codes)[swapped.get(c, c)]) for c, _ in codes]
    assert any("order" in p for p in production_differences(shipped, reordered))


def test_production_codes_script_parses_the_tree_format(tmp_path: Path) -> None:
    """scripts/taxonomy_codes.py reads production's themes_tree.yaml layout and skips 22/23."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("taxonomy_codes", ROOT / "scripts" / "taxonomy_codes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tree = tmp_path / "themes_tree.yaml"
    tree.write_text(
        textwrap.dedent("""\
        01 - Economia e Finanças:
          01.01 - Política Econômica:
            - 01.01.01 - Política Fiscal
            - 01.01.02 -  Autonomia   Econômica
        22 - Eventos Oficiais e Cerimônias:
          22.01 - Cerimônias:
            - 22.01.01 - Posses
        24 - Minorias e Grupos Especiais:
          24.01 - Povos Indígenas:
            - 24.01.01 - Demarcação
        """),
        encoding="utf-8",
    )
    out = tmp_path / "codes.tsv"
    assert module.main([str(tree), "-o", str(out)]) == 0
    assert load_production_codes(out) == [
        ("01", "Economia e Finanças"),
        ("01.01", "Política Econômica"),
        ("01.01.01", "Política Fiscal"),
        ("01.01.02", "Autonomia Econômica"),
        ("24", "Minorias e Grupos Especiais"),
        ("24.01", "Povos Indígenas"),
        ("24.01.01", "Demarcação"),
    ]
    tree.write_text("01 - Economia:\n  01.02.03 - Fora do lugar:\n    - 01.02.03.04 - X\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"01\.02\.03"):
        module.main([str(tree), "-o", str(out)])


def test_shipped_codes_that_agree_with_production_keep_their_labels(shipped: Taxonomy) -> None:
    assert shipped.get("01.01.01").full_name == "Economia e Finanças > Política Econômica > Política Fiscal"
    assert shipped.get("03.02.01").label == "Combate à Dengue"


def test_themes_rows(shipped: Taxonomy) -> None:
    rows = themes_rows(shipped)
    assert len(rows) == len(shipped)
    assert set(rows[0]) == {"code", "label", "full_name", "level", "parent_code", "description", "keywords"}
    seen: set[str] = set()
    for row in rows:  # parents come before their children
        assert row["parent_code"] is None or row["parent_code"] in seen
        assert isinstance(row["keywords"], list)
        seen.add(row["code"])


# --------------------------------------------------------------------------- navigation


def test_navigation(shipped: Taxonomy) -> None:
    assert [t.code for t in shipped.level(1)] == sorted(t.code for t in shipped.level(1))
    assert shipped.get("99") is None and shipped.get(None) is None
    assert shipped.parent("01") is None
    assert shipped.parent("01.01.01").code == "01.01"
    assert all(t.parent_code == "01" for t in shipped.children("01"))
    assert [t.code for t in shipped.children(None)] == [t.code for t in shipped.level(1)]
    assert [t.code for t in shipped.path("01.01.01")] == ["01", "01.01", "01.01.01"]
    assert isinstance(shipped.get("01"), Theme)


def test_is_valid_path(shipped: Taxonomy) -> None:
    assert shipped.is_valid_path("01")
    assert shipped.is_valid_path("01", "01.01")
    assert shipped.is_valid_path("01", "01.01", "01.01.01")
    assert not shipped.is_valid_path(None)
    assert not shipped.is_valid_path("99")
    assert not shipped.is_valid_path("01", "02.01")  # l2 not under l1
    assert not shipped.is_valid_path("01", "01.01", "01.02.02")  # l3 not under l2
    assert not shipped.is_valid_path("01", None, "01.01.01")  # gap
    assert not shipped.is_valid_path("01.01")  # a level-2 code given as level 1
    assert not shipped.is_valid_path("01", "01.01.01")  # a level-3 code given as level 2


def test_deepest_valid(shipped: Taxonomy) -> None:
    assert shipped.deepest_valid("01", "01.01", "01.01.01") == ("01", "01.01", "01.01.01")
    assert shipped.deepest_valid("01", "01.01", "01.02.02") == ("01", "01.01", None)
    assert shipped.deepest_valid("01", "02.01", "02.01.03") == ("01", None, None)
    assert shipped.deepest_valid("99", "01.01", "01.01.01") == (None, None, None)
    assert shipped.deepest_valid("01", None, "01.01.01") == ("01", None, None)
    assert shipped.deepest_valid(" 01 ", "01.01") == ("01", "01.01", None)
    assert shipped.most_specific("01", "01.01", "xx") == "01.01"
    assert shipped.most_specific(None) is None


# --------------------------------------------------------------------------- validation

GOOD_01 = """\
code: "01"
label: Economia e Finanças
description: Notícias de economia.
keywords: [economia, PIB]
children:
  - code: "01.01"
    label: Política Econômica
    description: Rumos da economia.
    keywords: [política econômica]
    children:
      - code: "01.01.01"
        label: Política Fiscal
        description: Metas fiscais.
        keywords: [arcabouço fiscal]
        examples: ["Governo anuncia bloqueio no Orçamento"]
"""


def _write(folder: Path, name: str, text: str) -> None:
    (folder / name).write_text(textwrap.dedent(text), encoding="utf-8")


def _errors(folder: Path, strict: bool = False) -> str:
    with pytest.raises(TaxonomyError) as info:
        load_taxonomy(folder, strict=strict)
    return str(info.value)


def test_minimal_folder_loads(tmp_path: Path) -> None:
    _write(tmp_path, "01.yaml", GOOD_01)
    tax = load_taxonomy(tmp_path, strict=False)
    assert len(tax) == 3
    theme = tax.get("01.01.01")
    assert theme.level == 3 and theme.parent_code == "01.01"
    assert theme.full_name == "Economia e Finanças > Política Econômica > Política Fiscal"
    assert theme.keywords == ("arcabouço fiscal",)
    assert theme.examples == ("Governo anuncia bloqueio no Orçamento",)


def test_strict_requires_exact_level1_set(tmp_path: Path) -> None:
    _write(tmp_path, "01.yaml", GOOD_01)
    with pytest.raises(TaxonomyError) as info:
        load_taxonomy(tmp_path)  # strict is the default
    problems = info.value.problems
    assert "02: level-1 theme missing (Educação)" in problems
    assert "25: level-1 theme missing (Habitação e Urbanismo)" in problems
    assert len(problems) == len(LEVEL1) - 1  # 01 itself is fine
    assert len(load_taxonomy(tmp_path, strict=False)) == 3


def test_strict_rejects_wrong_label_and_unknown_code(tmp_path: Path) -> None:
    for code, label in LEVEL1.items():
        text = GOOD_01.replace('"01"', f'"{code}"').replace('"01.', f'"{code}.')
        text = text.replace("Economia e Finanças", label if code != "03" else "Saúde Pública")
        _write(tmp_path, f"{code}.yaml", text)
    _write(tmp_path, "22.yaml", GOOD_01.replace('"01"', '"22"').replace('"01.', '"22.'))
    message = _errors(tmp_path, strict=True)
    assert "03: level-1 label 'Saúde Pública'" in message
    assert "22: unexpected level-1 theme" in message
    # and without the bad ones, strict passes
    (tmp_path / "22.yaml").unlink()
    good_03 = GOOD_01.replace('"01"', '"03"').replace('"01.', '"03.').replace("Economia e Finanças", "Saúde")
    _write(tmp_path, "03.yaml", good_03)
    assert len(load_taxonomy(tmp_path).level(1)) == 23


def test_bad_code_format(tmp_path: Path) -> None:
    _write(tmp_path, "01.yaml", GOOD_01.replace('"01.01.01"', '"01.01.1"'))
    assert "01.01.1" in _errors(tmp_path)


def test_unquoted_code_is_rejected(tmp_path: Path) -> None:
    _write(tmp_path, "01.yaml", GOOD_01.replace('code: "01.01"\n', "code: 01.01\n"))
    message = _errors(tmp_path)
    assert "quoted string" in message


def test_misnested_child(tmp_path: Path) -> None:
    _write(tmp_path, "01.yaml", GOOD_01.replace('"01.01.01"', '"01.02.01"'))
    message = _errors(tmp_path)
    assert "01.02.01" in message and "parent code 01.01" in message


def test_duplicate_code(tmp_path: Path) -> None:
    dup = GOOD_01 + textwrap.indent(
        '- code: "01.01.01"\n  label: Outra\n  description: Repetida.\n  keywords: [x]\n', " " * 6
    )
    _write(tmp_path, "01.yaml", dup)
    message = _errors(tmp_path)
    assert "01.01.01" in message and "duplicate" in message


def test_duplicate_code_across_files(tmp_path: Path) -> None:
    _write(tmp_path, "01.yaml", GOOD_01)
    _write(tmp_path, "02.yaml", GOOD_01.replace('code: "01"', 'code: "02"'))
    message = _errors(tmp_path)
    assert "duplicate" in message and "01.01" in message


def test_missing_description(tmp_path: Path) -> None:
    _write(tmp_path, "01.yaml", GOOD_01.replace("        description: Metas fiscais.\n", ""))
    message = _errors(tmp_path)
    assert "01.01.01" in message and "description" in message


def test_empty_label(tmp_path: Path) -> None:
    _write(tmp_path, "01.yaml", GOOD_01.replace("label: Política Econômica", 'label: ""'))
    message = _errors(tmp_path)
    assert "01.01 " in message and "label" in message


def test_unknown_field(tmp_path: Path) -> None:
    line = "    keywords: [política econômica]\n"
    _write(tmp_path, "01.yaml", GOOD_01.replace(line, line + "    synonyms: [x]\n"))
    message = _errors(tmp_path)
    assert "01.01" in message and "synonyms" in message


def test_keywords_must_be_strings(tmp_path: Path) -> None:
    _write(tmp_path, "01.yaml", GOOD_01.replace("keywords: [economia, PIB]", "keywords: economia"))
    assert "'keywords' must be a list" in _errors(tmp_path)
    _write(tmp_path, "01.yaml", GOOD_01.replace("keywords: [economia, PIB]", "keywords: [economia, 2024]"))
    assert "non-empty strings" in _errors(tmp_path)


def test_file_name_must_equal_code(tmp_path: Path) -> None:
    _write(tmp_path, "05.yaml", GOOD_01)
    message = _errors(tmp_path)
    assert "05.yaml" in message and "file name" in message


def test_too_deep(tmp_path: Path) -> None:
    deep = GOOD_01 + textwrap.indent(
        'children:\n  - code: "01.01.01.01"\n    label: X\n    description: Y.\n', " " * 8
    )
    _write(tmp_path, "01.yaml", deep)
    assert "cannot have children" in _errors(tmp_path)


def test_all_errors_are_collected(tmp_path: Path) -> None:
    bad = GOOD_01.replace('"01.01.01"', '"01.02.01"').replace("    description: Rumos da economia.\n", "")
    _write(tmp_path, "01.yaml", bad)
    with pytest.raises(TaxonomyError) as info:
        load_taxonomy(tmp_path, strict=False)
    assert len(info.value.problems) == 2
    assert isinstance(info.value, ValueError)


def test_invalid_yaml_and_missing_folder(tmp_path: Path) -> None:
    _write(tmp_path, "01.yaml", "code: [unclosed\n")
    assert "cannot read YAML" in _errors(tmp_path)
    with pytest.raises(TaxonomyError):
        load_taxonomy(tmp_path / "nope")
