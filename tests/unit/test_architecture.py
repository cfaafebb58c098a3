"""The import rules of docs/architecture.md, checked by parsing every source file with ``ast``.

Rules are written by package prefix, not by file lists, so a new module falls under them at once:

* no import cycle between first-party modules (``dgb``, ``dgb_dev``, ``dgb_airflow``), counting
  imports inside functions too: a cycle is broken by a small shared module, not by a lazy import;
* ``dgb`` (include/) never imports ``dgb_airflow`` (plugins/) or ``dgb_dev`` (dev/), and imports
  Airflow only inside functions (the domain package loads without Airflow);
* nothing that ships (``dgb``, plugins/, dags/) imports the dev package ``dgb_dev``;
* DAG files import, at parse time, only specs from ``dgb``: modules that, with everything they
  import at module level, use the standard library alone (no database, broker, search or HTTP
  client is loaded or reached while a DAG file is parsed); ``dgb.dags_meta`` and every
  ``dgb.<package>.dags`` / ``*_dags`` module must be such specs;
* the dev package is outside what Astro and Composer deploy (.dockerignore, the Composer stage);
* no module under tests/ imports a test module (``test_*.py``) or a conftest.py: fixtures are shared
  through conftest.py, helpers through tests/support.

Imports under ``if TYPE_CHECKING:`` are annotations only and do not count.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"dgb": REPO / "include", "dgb_dev": REPO / "dev", "dgb_airflow": REPO / "plugins"}
FIRST_PARTY = tuple(ROOTS)
DAGS = REPO / "dags"


@dataclass(frozen=True)
class Import:
    target: str  # the module imported (``from a import b``: ``a.b`` when that is a module)
    top_level: bool  # executed when the importing module is imported (not inside a function)
    line: int


def _module_files() -> dict[str, Path]:
    """Every first-party module name -> its file (packages by their ``__init__.py``)."""
    out: dict[str, Path] = {}
    for package, root in ROOTS.items():
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _module_files()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(module: str | None, level: int, importer: str, is_package: bool) -> str:
    if not level:
        return module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


@cache
def imports_of(path: Path, name: str) -> tuple[Import, ...]:
    """The imports of one file, each resolved to the most specific module it names."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def visit(node: ast.AST, top_level: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                visit(ast.Module(body=child.orelse, type_ignores=[]), top_level)  # the else branch runs
                continue
            if isinstance(child, ast.Import):
                found.extend(Import(a.name, top_level, child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(child.module, child.level, name, is_package)
                for alias in child.names:
                    sub = f"{base}.{alias.name}"
                    found.append(Import(sub if sub in MODULES else base, top_level, child.lineno))
            inner = top_level and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, inner)

    visit(tree, True)
    return tuple(found)


def _owner(target: str) -> str | None:
    """The first-party module an import lands in (``dgb.search.sync.sync`` -> ``dgb.search.sync``)."""
    parts = target.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in MODULES:
            return candidate
    return None


def _top(target: str) -> str:
    return target.split(".", 1)[0]


def _in(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def graph(top_level_only: bool = False) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for imp in imports_of(path, name):
            owner = _owner(imp.target)
            if owner and owner != name and (imp.top_level or not top_level_only):
                edges[name].add(owner)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def _stdlib(name: str) -> bool:
    return _top(name) in sys.stdlib_module_names or _top(name) == "__future__"


@cache
def third_party_at_import(module: str) -> frozenset[str]:
    """Non-stdlib, non-first-party modules loaded (transitively) by importing ``module``."""
    found: set[str] = set()
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for imp in imports_of(MODULES[name], name):
            if not imp.top_level:
                continue
            owner = _owner(imp.target)
            if owner:
                todo.append(owner)
            elif not _stdlib(imp.target) and _top(imp.target) not in FIRST_PARTY:
                found.add(imp.target)
    return frozenset(found)


def dag_file_imports() -> list[tuple[Path, Import]]:
    out = []
    for path in sorted(DAGS.glob("*.py")):
        out.extend((path, imp) for imp in imports_of(path, "dags." + path.stem))
    return out


def _where(path: Path, imp: Import) -> str:
    return f"{path.relative_to(REPO)}:{imp.line} imports {imp.target}"


# --------------------------------------------------------------------------- the parser itself


def test_the_import_parser_sees_what_python_sees(tmp_path):
    """The rules are only as good as the parser: a file with every import form it must handle."""
    pkg = tmp_path / "dgb_probe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    source = (
        "from __future__ import annotations\n"
        "import os.path\n"
        "from typing import TYPE_CHECKING\n"
        "from dgb import topology\n"
        "from dgb.search.sync import sync as run_sync\n"
        "from . import sibling\n"  # dgb.probe is no package: the sibling of dgb/probe.py is in dgb
        "if TYPE_CHECKING:\n"
        "    from dgb_dev.mirror.site import Site\n"
        "else:\n"
        "    import json\n"
        "def later():\n"
        "    import dgb_airflow.operators.stage\n"
        "class K:\n"
        "    from dgb import db\n"
    )
    probe = pkg / "probe.py"
    probe.write_text(source)
    got = {(i.target, i.top_level) for i in imports_of(probe, "dgb.probe")}
    assert got == {
        ("__future__", True),
        ("os.path", True),
        ("typing", True),
        ("dgb.topology", True),
        ("dgb.search.sync", True),
        ("dgb", True),
        ("json", True),
        ("dgb_airflow.operators.stage", False),
        ("dgb.db", True),
    }
    # a cycle of three modules is found, a chain is not
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_every_first_party_module_is_found():
    assert {
        "dgb.cli",
        "dgb.search.sync",
        "dgb_dev.stack",
        "dgb_dev.mirror.site",
        "dgb_airflow.operators.stage",
    } <= set(MODULES)
    for name in ("dgb.cli", "dgb_airflow.operators.stage"):  # dgb_dev is not installed everywhere
        assert importlib.util.find_spec(name) is not None, f"{name} is not importable here"


# --------------------------------------------------------------------------- the rules


def test_no_import_cycles_between_first_party_modules():
    found = cycles(graph())
    assert not found, (
        "import cycles (break each with a small shared module, not a lazy import): "
        + "; ".join(" <-> ".join(c) for c in found)
    )


def package_of(module: str) -> str:
    """The package a module belongs to for the package rule: its first two name parts
    (``dgb.pipeline.runner`` -> ``dgb.pipeline``; a top-level module is its own package:
    ``dgb.fetch``; ``dgb_airflow.hooks.outbox`` -> ``dgb_airflow.hooks``)."""
    return ".".join(module.split(".")[:2])


def package_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph collapsed onto packages (imports within one package dropped)."""
    out: dict[str, set[str]] = {}
    for name, targets in edges.items():
        source = package_of(name)
        out.setdefault(source, set())
        for target in targets:
            dest = package_of(target)
            out.setdefault(dest, set())
            if dest != source:
                out[source].add(dest)
    return out


def _package_loop_witnesses(loop: list[str]) -> list[str]:
    """For a failing package loop, the module imports that make it (file:line, inside a function or not)."""
    members = set(loop)
    out = []
    for name, path in MODULES.items():
        if package_of(name) not in members:
            continue
        for imp in imports_of(path, name):
            owner = _owner(imp.target)
            if owner and package_of(owner) in members and package_of(owner) != package_of(name):
                where = "" if imp.top_level else " (inside a function)"
                out.append(f"{name}:{imp.line} -> {owner}{where}")
    return sorted(set(out))


def test_no_import_cycles_between_packages():
    """Packages (``dgb.pipeline``, ``dgb.reconcile``, ``dgb.fetch``, ...) form no loop either,
    imports inside functions included: a shared piece moves down into a module both sides import."""
    found = cycles(package_graph(graph()))
    assert not found, "package loops: " + "; ".join(
        " <-> ".join(c) + " [" + ", ".join(_package_loop_witnesses(c)) + "]" for c in found
    )


def write_tree(root: Path, files: dict[str, str]) -> None:
    """A probe tree for the rules' own tests: relative path -> source."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_the_package_rule_catches_a_loop_hidden_in_a_function(tmp_path):
    """Two packages whose modules form no module cycle, closed by an import inside a function: the
    module rule passes, the package rule fails, and it would pass if function imports were ignored."""
    root = tmp_path / "dgb_probe"
    files = {
        "__init__.py": "",
        "a/__init__.py": "",
        "a/x.py": "from dgb_probe.b import y\n",
        "a/z.py": "VALUE = 1\n",
        "b/__init__.py": "",
        "b/y.py": "def later():\n    from dgb_probe.a import z\n\n    return z.VALUE\n",
    }
    write_tree(root, files)
    names = {"dgb_probe.a.x": root / "a/x.py", "dgb_probe.b.y": root / "b/y.py"}
    found = {name: imports_of(path, name) for name, path in names.items()}
    assert [(i.target, i.top_level) for i in found["dgb_probe.b.y"]] == [("dgb_probe.a", False)]
    every = {name: {i.target for i in imps} for name, imps in found.items()}
    top_only = {name: {i.target for i in imps if i.top_level} for name, imps in found.items()}
    assert cycles(every) == []  # no module cycle: a.x -> b, b.y -> a
    assert cycles(package_graph(every)) == [["dgb_probe.a", "dgb_probe.b"]]
    assert cycles(package_graph(top_only)) == []


MAX_MODULE_LINES = 600
SIZE_ROOTS = ("include", "plugins", "dev", "scripts")


def test_no_module_is_over_600_lines():
    """A module has one job; past ~600 lines it has several (docs/architecture.md)."""
    big = {}
    for top in SIZE_ROOTS:
        for path in sorted((REPO / top).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_MODULE_LINES:
                big[str(path.relative_to(REPO))] = lines
    assert not big, f"modules over {MAX_MODULE_LINES} lines: {big}"


_ENV_WRITERS = {"setenv", "setdefault", "putenv", "pop", "delenv", "unsetenv"}
_SETTING_NAME = re.compile(r"DGB_[A-Z0-9_]+")


def setting_reads(path: Path) -> list[str]:
    """``DGB_*`` variables a file reads itself: any call given the name first (``os.environ.get``,
    ``os.getenv``, dgb.config's parsers, a private parser), or ``os.environ["DGB_X"]`` as a value.
    Writing one for a child process (``env["DGB_X"] = ...``, ``setenv``, ``pop``) is not a read."""
    out = []
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    constants = {  # NAME = "DGB_X" at module level, then os.environ.get(NAME)
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for target in node.targets
        if isinstance(target, ast.Name) and isinstance(node.value.value, str)
    }
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0]
            if called in _ENV_WRITERS:
                pass
            elif isinstance(first, ast.Constant) and isinstance(first.value, str):
                name = first.value
            elif isinstance(first, ast.Name):
                name = constants.get(first.id)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
            base = node.value
            is_environ = isinstance(base, ast.Attribute) and base.attr == "environ"
            if is_environ and isinstance(key, ast.Constant) and isinstance(key.value, str):
                name = key.value
        if name and _SETTING_NAME.fullmatch(name):
            out.append(f"{path.relative_to(REPO)}:{node.lineno} reads {name}")
    return out


def test_every_setting_is_read_in_dgb_config():
    """One home for configuration: outside ``include/dgb/config/`` nothing reads a DGB_ variable."""
    config = REPO / "include" / "dgb" / "config"
    bad = []
    for top in ("include", "plugins", "dev", "dags", "scripts"):
        for path in sorted((REPO / top).rglob("*.py")):
            if config not in path.parents:
                bad += setting_reads(path)
    assert not bad, bad


def test_the_setting_rule_sees_each_way_of_reading(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os\n"
        "a = os.environ.get('DGB_A', '1')\n"
        "b = os.getenv('DGB_B')\n"
        "c = os.environ['DGB_C']\n"
        "d = env_number('DGB_D', 1)\n"
        "env = {}\n"
        "env['DGB_E'] = '1'\n"
        "os.environ['DGB_F'] = '2'\n"
        "g = os.environ.get('OTHER')\n"
        "h = _private_int('DGB_H', 3)\n"
        "os.environ.pop('DGB_I', None)\n"
        "log.info('DGB_J is set')\n"
        "K = 'DGB_K'\n"
        "k = os.environ.get(K, '')\n"
    )
    global REPO
    saved, REPO = REPO, tmp_path
    try:
        reads = setting_reads(probe)
    finally:
        REPO = saved
    assert [r.split(" reads ")[1] for r in reads] == ["DGB_A", "DGB_B", "DGB_C", "DGB_D", "DGB_H", "DGB_K"]


def test_dgb_never_imports_plugins_or_the_dev_package():
    bad = []
    for name, path in MODULES.items():
        if not _in(name, "dgb"):
            continue
        for imp in imports_of(path, name):
            if (
                _in(imp.target, "dgb_airflow")
                or _in(imp.target, "dgb_airflow_plugins")
                or _in(imp.target, "dgb_dev")
            ):
                bad.append(f"{name}:{imp.line} imports {imp.target}")
            elif _in(imp.target, "airflow") and imp.top_level:
                bad.append(f"{name}:{imp.line} imports {imp.target} at module level")
    assert not bad, bad


def test_dgb_names_the_dev_package_only_for_the_optional_dgb_mirror_command():
    """``dgb.cli`` lists ``dgb_dev.mirror.cli`` by name (skipped where absent); nothing else in the
    shipped package refers to the dev package, not even through importlib."""
    mentions = {}
    for name, path in MODULES.items():
        if not _in(name, "dgb"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _in(node.value, "dgb_dev"):
                mentions.setdefault(name, set()).add(node.value)
    assert mentions == {"dgb.cli": {"dgb_dev.mirror.cli"}}
    from dgb import cli

    assert "dgb_dev.mirror.cli" in cli.COMMAND_MODULES


def test_nothing_that_ships_imports_the_dev_package():
    bad = [
        f"{name}:{imp.line} imports {imp.target}"
        for name, path in MODULES.items()
        if not _in(name, "dgb_dev")
        for imp in imports_of(path, name)
        if _in(imp.target, "dgb_dev")
    ]
    bad += [_where(path, imp) for path, imp in dag_file_imports() if _in(imp.target, "dgb_dev")]
    plugin_root = ROOTS["dgb_airflow"]
    for path in sorted(plugin_root.glob("*.py")):  # plugin entry modules beside the package
        bad += [_where(path, imp) for imp in imports_of(path, path.stem) if _in(imp.target, "dgb_dev")]
    assert not bad, bad


def _is_dag_spec_module(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return _in(name, "dgb") and (last in ("dags", "dags_meta") or last.endswith("_dags"))


def test_dag_spec_modules_are_pure_specs():
    specs = [name for name in MODULES if _is_dag_spec_module(name)]
    assert "dgb.dags_meta" in specs and any(s.endswith(".dags") for s in specs)
    heavy = {name: sorted(third_party_at_import(name)) for name in specs if third_party_at_import(name)}
    assert not heavy, f"DAG spec modules must load no third-party library at import: {heavy}"


def test_dag_files_import_only_specs_at_parse_time():
    bad = []
    for path, imp in dag_file_imports():
        if not imp.top_level or not _in(imp.target, "dgb"):
            continue
        owner = _owner(imp.target)
        if owner is None:
            bad.append(_where(path, imp) + " (not a dgb module)")
        elif third_party_at_import(owner):
            bad.append(_where(path, imp) + f" (loads {sorted(third_party_at_import(owner))})")
    assert not bad, (
        "DAG files may import only dgb specs at parse time; do the rest in operators/tasks: " + "; ".join(bad)
    )


@pytest.mark.parametrize(
    "module, library", [("dgb.db", "psycopg"), ("dgb.embed", "numpy"), ("dgb.outbox", "psycopg")]
)
def test_the_spec_rule_can_fail(module, library):
    """The parse-time rule rejects what it must: a module loading a client library, directly or
    through what it imports (dgb.outbox -> dgb.db -> psycopg)."""
    assert library in {_top(t) for t in third_party_at_import(module)}


# --------------------------------------------------------------------------- what ships


def test_the_dev_package_is_not_in_the_astro_image():
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert "dev" in patterns or "dev/" in patterns
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "/usr/local/airflow/dev" not in dockerfile and "dgb_dev" not in dockerfile


def test_the_dev_package_is_not_in_the_composer_upload(tmp_path):
    script = REPO / "scripts" / "deploy_composer.py"
    spec = importlib.util.spec_from_file_location("deploy_composer_for_arch", script)
    deploy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(deploy)
    staged = deploy.stage(tmp_path / "stage")
    root = tmp_path / "stage"
    files = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    assert any(f == "dags/dgb/cli.py" for f in files)
    leaked = [f for f in files if "dgb_dev" in f or f.endswith("/stack.py") or "/mirror/" in f]
    assert not leaked, leaked
    assert staged["dags"].joinpath("dgb", "search", "sync.py").exists()


# --------------------------------------------------------------------------- the tests themselves


def modules_of_the_tests(root: Path) -> dict[str, Path]:
    """Every module under ``root`` (the tests/ package) -> its file, named as pytest imports it."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports_of_test_modules(modules: dict[str, Path]) -> list[str]:
    """Imports, anywhere in a module of ``modules``, of one of them that is a test module
    (``test_*.py``) or a ``conftest.py`` (relative imports resolved; ``from pkg import test_x`` too)."""
    banned = {
        name for name, path in modules.items() if path.name.startswith("test_") or path.name == "conftest.py"
    }
    bad = []
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(node.module, node.level, name, is_package)
                named = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            bad += [f"{name}:{node.lineno} imports {target}" for target in named if target in banned]
    return bad


def test_no_test_module_imports_a_test_module_or_a_conftest():
    """Shared fixtures live in a conftest.py (pytest finds them), shared helpers in tests/support;
    importing a test module or a conftest re-registers its fixtures and tests (tests/README.md)."""
    found = imports_of_test_modules(modules_of_the_tests(REPO / "tests"))
    assert not found, found


def test_the_test_import_rule_catches_each_form(tmp_path):
    root = tmp_path / "tests"
    files = {
        "__init__.py": "",
        "conftest.py": "",
        "support/__init__.py": "",
        "support/articles.py": "ARTICLES = []\n",
        "unit/__init__.py": "",
        "unit/conftest.py": "",
        "unit/test_a.py": "X = 1\n",
        "unit/test_ok.py": "from tests.support.articles import ARTICLES\nfrom ..support import articles\n",
        "unit/test_b.py": "from .test_a import X\n",
        "unit/test_c.py": "from . import test_a\n",
        "unit/test_d.py": "import tests.unit.test_a\n",
        "unit/test_e.py": "def later():\n    from tests.conftest import thing\n",
        "unit/test_f.py": "from ..unit.conftest import fixture\n",
    }
    write_tree(root, files)
    found = imports_of_test_modules(modules_of_the_tests(root))
    assert found == [
        "tests.unit.test_b:1 imports tests.unit.test_a",
        "tests.unit.test_c:1 imports tests.unit.test_a",
        "tests.unit.test_d:1 imports tests.unit.test_a",
        "tests.unit.test_e:2 imports tests.conftest",
        "tests.unit.test_f:1 imports tests.unit.conftest",
    ]
