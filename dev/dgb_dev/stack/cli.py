"""``python -m dgb_dev.stack up|down|status|ensure ...|bootstrap|watchdog|airflow ...`` (what
`make up`, `make down`, `make status`, `make airflow` and CI run)."""

from __future__ import annotations

import argparse
import sys

from dgb.config import Settings
from dgb_dev.stack.airflow import airflow_cli
from dgb_dev.stack.components import SERVICES
from dgb_dev.stack.lifecycle import bootstrap, down, ensure, status, up
from dgb_dev.stack.local_secrets import ensure_secrets
from dgb_dev.stack.process import StackError
from dgb_dev.stack.watchdog import run_watchdog


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dgb_dev.stack")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up", help="start everything, bootstrap, unpause DAGs")
    p_up.add_argument("--no-airflow", action="store_true")
    p_ensure = sub.add_parser("ensure", help="start (or reuse) only the named services")
    p_ensure.add_argument("services", nargs="+", choices=SERVICES + ("redis",))
    p_ensure.add_argument("--bootstrap", action="store_true")
    sub.add_parser("bootstrap", help="migrations, reference data, topology, collection (servers must be up)")
    sub.add_parser("down")
    sub.add_parser("status")
    sub.add_parser("watchdog", help="run the watchdog in the foreground (`up` starts it in the background)")
    p_af = sub.add_parser("airflow", help="run the Airflow CLI against the local stack")
    p_af.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "up":
            up(with_airflow=not args.no_airflow)
        elif args.cmd == "ensure":
            settings = ensure(args.services)
            if args.bootstrap:
                bootstrap(settings)
        elif args.cmd == "bootstrap":
            bootstrap(Settings.from_env())
        elif args.cmd == "down":
            down()
        elif args.cmd == "status":
            return status()
        elif args.cmd == "watchdog":
            return run_watchdog(Settings.from_env())
        elif args.cmd == "airflow":
            settings = ensure_secrets(Settings.from_env())
            return airflow_cli(settings, args.args, check=False).returncode
    except (StackError, ValueError) as exc:  # ValueError: a bad DGB_* setting, named by dgb.config
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
