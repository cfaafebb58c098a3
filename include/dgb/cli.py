"""`dgb` command line.

Each domain module that offers commands exposes ``register(subparsers)``; it adds its
subcommands and sets ``func`` on each parser (a callable taking the parsed args and
returning an exit code). Modules are listed in COMMAND_MODULES; one that is missing
is skipped, so a partial checkout still runs the commands it has. ``dgb_dev.mirror.cli``
(``dgb mirror``) belongs to the development package: the command exists where ``dgb_dev`` is
installed (the local venv, the docker compose image) and not where it is absent (Astro,
Composer). It is named here, never imported statically: ``dgb`` does not depend on ``dgb_dev``
(tests/unit/test_architecture.py).
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES = (
    "dgb.db_cli",
    "dgb.topology_cli",
    "dgb.search.cli",
    "dgb.scraper.cli",
    "dgb.enrich.cli",
    "dgb_dev.mirror.cli",  # the development package: skipped where it is not installed
    "dgb.observe.cli",  # dgb status
    "dgb.integrity.cli",
    "dgb.embed.cli",
    "dgb.reconcile.cli",
    "dgb.features.cli",  # dgb features backfill
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dgb", description="dgb-pipeline command line")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and (exc.name == name or name.startswith(exc.name + ".")):
                continue
            raise
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    return int(func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
