"""The documentation site's reference pages, written from the code so they cannot drift:

* :func:`settings_page`: every ``DGB_*`` setting from ``dgb.config``'s catalogue, each with the
  ``dgb.config`` function(s) that read it (found in the package's source);
* :func:`cli_page`: every ``dgb`` command and flag, walked from the argument parsers;
* :func:`dags_page`: the DAGs of the DAG bag (``dags/``), with schedule, tags and tasks;
* :func:`api_page`: the hooks, operators, sensors and triggers of ``plugins/dgb_airflow``, as
  mkdocstrings directives (rendered from their docstrings).

``dev/docs_gen.py`` (the mkdocs-gen-files script) writes them at build time; the tests check that
every setting, command and DAG has its entry.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dgb.config import REPO_ROOT, catalog

CONFIG_DIR = REPO_ROOT / "include" / "dgb" / "config"
PLUGIN_KINDS = ("hooks", "operators", "sensors", "triggers")
_PARSERS = ("env_str", "env_number", "env_flag", "_int")
_NAME = re.compile(r"^DGB_[A-Z0-9_]*[A-Z0-9]$")


def _cell(text: object) -> str:
    """Text made safe for one Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Read:
    """One place in ``dgb.config`` that reads a setting: ``default`` is the literal default the
    call passes (None when it passes an expression or nothing)."""

    name: str
    where: str  # dgb.config.<module>.<function>
    default: object | None
    literal: bool


def config_reads(config_dir: Path = CONFIG_DIR) -> list[Read]:
    """Every call in the ``dgb.config`` package whose first argument is a ``DGB_*`` name (the
    package's parsers and its modules' small helpers), with its default when that is a literal."""
    reads: list[Read] = []
    for path in sorted(config_dir.glob("*.py")):
        module = "dgb.config" if path.stem == "__init__" else f"dgb.config.{path.stem}"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = _module_constants(tree)
        for func, node in _calls_with_owner(tree):
            if not node.args:
                continue
            name = _resolve(node.args[0], constants)
            if not isinstance(name, str) or not _NAME.match(name):
                continue
            if isinstance(node.func, ast.Attribute) and node.func.attr == "get":
                continue  # a dict look-up (the secrets file), not a read of the environment
            parser = node.func.id if isinstance(node.func, ast.Name) else None
            # the package's parsers take the default second; a module's own helper may not
            default_node = node.args[1] if parser in _PARSERS and len(node.args) > 1 else None
            for kw in node.keywords:
                if kw.arg == "default":
                    default_node = kw.value
            literal = default_node is not None and _resolve(default_node, constants) is not None
            default = _resolve(default_node, constants) if literal else None
            reads.append(Read(name, f"{module}.{func}" if func else module, default, literal))
    return reads


def _module_constants(tree: ast.Module) -> dict[str, object]:
    """Module-level ``NAME = <literal>`` assignments (a setting's name or default kept in a constant)."""
    out: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def _resolve(node: ast.AST | None, constants: dict[str, object]) -> object | None:
    """A literal's value, or a module constant's; None for anything else."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def _calls_with_owner(tree: ast.Module) -> Iterable[tuple[str, ast.Call]]:
    """(enclosing function's qualified name, call) for every call in the module."""

    def walk(node: ast.AST, owner: str):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield from walk(child, f"{owner}.{child.name}" if owner else child.name)
            else:
                if isinstance(child, ast.Call):
                    yield owner, child
                yield from walk(child, owner)

    yield from walk(tree, "")


def settings_page() -> str:
    reads: dict[str, list[Read]] = {}
    for read in config_reads():
        reads.setdefault(read.name, []).append(read)
    out = [
        "# Settings reference",
        "",
        "Every `DGB_*` environment variable, generated from `dgb.config`'s catalogue",
        "(`include/dgb/config/settings.yaml`) when the site is built. *Read in* names the `dgb.config`",
        "function that reads it (found in the package's source). **default** is what the code uses when",
        "the variable is unset or empty; **set by** says which deploy targets set it and to what",
        '(L = local `make up`, D = docker compose, A = Astro, C = Cloud Composer; "optional": every',
        "target leaves the default). Connections, pools and where each target keeps its settings:",
        "[Configuration](../configuration.md).",
        "",
    ]
    for section in catalog.sections():
        out += [
            f"## {section}",
            "",
            "| variable | default | meaning | set by | read in |",
            "|---|---|---|---|---|",
        ]
        for s in catalog.settings():
            if s.section != section:
                continue
            where = sorted({r.where for n in s.names for r in reads.get(n, [])})
            out.append(
                "| "
                + " / ".join(f"`{n}`" for n in s.names)
                + f" | {_cell(s.default)} | {_cell(s.meaning)} | {_cell(s.set_by)} | "
                + (", ".join(f"`{w}`" for w in where) or "not read by `dgb` (the test suite's own)")
                + " |"
            )
        out.append("")
    return "\n".join(out)


# --------------------------------------------------------------------------- commands


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """(name, parser, help) of a parser's subcommands, in the order they were added."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                out.append((name, sub, helps.get(name, "")))
    return out


def commands(
    parser: argparse.ArgumentParser | None = None, prefix: str = "dgb"
) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """Every command path (``dgb``, ``dgb features``, ``dgb features backfill``, ...) with its parser
    and the help its parent gives it."""
    if parser is None:
        from dgb.cli import build_parser

        parser = build_parser()
    out = []
    for name, sub, helptext in _subparsers(parser):
        path = f"{prefix} {name}"
        out.append((path, sub, helptext))
        out.extend(commands(sub, path))
    return out


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The flags and positional arguments a parser documents (not --help, not its subcommands)."""
    return [
        a
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
        and a.help != argparse.SUPPRESS
    ]


def _usage(parser: argparse.ArgumentParser) -> str:
    return " ".join(parser.format_usage().split()).removeprefix("usage: ")


def cli_page() -> str:
    out = [
        "# Command reference",
        "",
        "Every `dgb` command and flag, generated from the argument parsers (`dgb.cli.build_parser`) when the",
        "site is built. `dgb <command> --help` prints the same. How the commands are used day to day:",
        "[Command line](../cli.md).",
        "",
    ]
    for path, sub, helptext in commands():
        depth = path.count(" ")
        out += [f"{'#' * min(depth + 1, 4)} `{path}`", ""]
        if helptext:
            out += [_cell(helptext[0].upper() + helptext[1:]) + ".", ""]
        if sub.description and sub.description != helptext:
            out += [sub.description.strip(), ""]
        out += ["```", _usage(sub), "```", ""]
        opts = options(sub)
        if opts:
            out += ["| argument | meaning | default |", "|---|---|---|"]
            for a in opts:
                flag = ", ".join(a.option_strings) or a.dest
                if a.metavar and a.option_strings:
                    flag += f" {a.metavar}"
                default = "" if a.default in (None, argparse.SUPPRESS, False) else f"`{a.default}`"
                choices = f" (one of: {', '.join(map(str, a.choices))})" if a.choices else ""
                meaning = _cell(a.help % vars(a) if a.help else "") + choices
                out.append(f"| `{_cell(flag)}` | {meaning} | {default} |")
            out.append("")
    return "\n".join(out)


# --------------------------------------------------------------------------- DAGs


def dagbag(dags_dir: Path | None = None):
    """The DAG bag of ``dags/`` as the local stack parses it (DGB_* settings as in this
    environment). Airflow is imported here, with a scratch AIRFLOW_HOME when none is set."""
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="dgb-docs-airflow-"))
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    plugins = str(REPO_ROOT / "plugins")
    if plugins not in sys.path:
        sys.path.insert(0, plugins)
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(dags_dir or REPO_ROOT / "dags"))


def _schedule(dag) -> str:
    timetable = getattr(dag, "timetable", None)
    summary = getattr(timetable, "summary", None) or getattr(timetable, "description", None)
    return str(summary or dag.schedule or "manual")


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    paragraphs = [
        p.strip() for p in re.split(r"\n\s*\n", doc.strip()) if p.strip() and not p.lstrip().startswith("#")
    ]
    return paragraphs[0] if paragraphs else ""


def dags_page(bag=None) -> str:
    bag = bag if bag is not None else dagbag()
    if bag.import_errors:
        raise RuntimeError(f"DAG files failed to import: {bag.import_errors}")
    dags = sorted(bag.dags.values(), key=lambda d: d.dag_id)
    scrapes = [d for d in dags if d.dag_id.startswith("scrape_") and d.dag_id != "scrape_dispatcher"]
    others = [d for d in dags if d not in scrapes]
    out = [
        "# DAG reference",
        "",
        "The DAGs of `dags/`, generated from Airflow's DAG bag when the site is built, with the settings of",
        "the build's environment (the local stack's defaults: the local site's agencies get a scrape DAG,",
        f"`DGB_SOURCE_MODE=live` gives every active agency one). {len(dags)} DAGs.",
        "",
    ]
    for dag in others:
        out += [f"## `{dag.dag_id}`", ""]
        desc = _first_paragraph(dag.doc_md) or (dag.description or "")
        if desc:
            out += [desc, ""]
        out += [
            f"- **schedule**: {_cell(_schedule(dag))}",
            f"- **tags**: {', '.join(f'`{t}`' for t in sorted(dag.tags)) or '-'}",
            f"- **tasks**: {', '.join(f'`{t}`' for t in dag.task_ids)}",
            "",
        ]
    if scrapes:
        out += [
            "## Scrape DAGs",
            "",
            "One per agency (or group of agencies) the source mode scrapes; each polls and parses its",
            "listing and stores new and edited articles with their `dgb.news.scraped` events.",
            "",
            "| DAG | schedule | tasks |",
            "|---|---|---|",
        ]
        for dag in scrapes:
            out.append(
                f"| `{dag.dag_id}` | {_cell(_schedule(dag))} | {', '.join(f'`{t}`' for t in dag.task_ids)} |"
            )
        out.append("")
    return "\n".join(out)


# --------------------------------------------------------------------------- Python API


def plugin_modules(root: Path | None = None) -> dict[str, list[str]]:
    """kind -> the dotted names of ``dgb_airflow.<kind>`` modules (hooks, operators, sensors,
    triggers), each module a file of ``plugins/dgb_airflow/<kind>/``."""
    root = root or REPO_ROOT / "plugins" / "dgb_airflow"
    out: dict[str, list[str]] = {}
    for kind in PLUGIN_KINDS:
        folder = root / kind
        out[kind] = [
            f"dgb_airflow.{kind}.{p.stem}" for p in sorted(folder.glob("*.py")) if p.stem != "__init__"
        ]
    return out


def api_page() -> str:
    out = [
        "# Python API: hooks, operators, sensors, triggers",
        "",
        "The Airflow extensions of `plugins/dgb_airflow/`, rendered from their docstrings when the site is",
        "built (mkdocstrings; nothing is imported). The domain package they call, `include/dgb/`, is",
        "described module by module in [Architecture](../architecture.md).",
        "",
    ]
    for kind, modules in plugin_modules().items():
        out += [f"## {kind.capitalize()}", ""]
        for module in modules:
            out += [f"::: {module}", "    options:", "      heading_level: 3", ""]
    return "\n".join(out)


PAGES = {
    "reference/settings.md": settings_page,
    "reference/cli.md": cli_page,
    "reference/dags.md": dags_page,
    "reference/api.md": api_page,
}
